"""A batch is reported as it landed: committed with its commit when the commit moved HEAD and
writing the files after it failed (the next run finishes writing them), failed when nothing
was committed. Before, a failure after the commit read "failed" with no commit, and the
batch's commit was in no report."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from dream_helpers import dream_in_process, git

from dream_memory.adapters import fsutil
from dream_memory.testing import build_workspace


@pytest.mark.parametrize("site", ["memory.write", "journal.remove"])
def test_a_commit_that_landed_is_in_the_report_though_the_run_failed_after_it(tmp_path: Path, site: str) -> None:
    root = build_workspace(tmp_path / "ws", history=["- [durable] User's name is Maya."])
    assert dream_in_process(root).status == "ok"
    with (root / "memory" / "history.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"cursor": 2, "timestamp": "2026-04-03 00:03", "content": "- [durable] User prefers dark roast."}\n')
    head = git(root, "rev-parse", "HEAD").strip()

    def full_disk(at: str, path: object) -> None:
        if at == site:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    fsutil.set_fault_injector(full_disk)
    try:
        report = dream_in_process(root).to_json()
    finally:
        fsutil.set_fault_injector(None)
    landed = git(root, "rev-parse", "HEAD").strip()
    assert landed != head
    assert report["status"] == "failed" and "no space left" in " ".join(report["errors"])
    assert [(b["outcome"], b["commit"]) for b in report["batches"]] == [("committed", landed)]
    assert report["commits"] == [landed]
    # The commit carries the cursor past the batch: so does the report (it said 1 -> 1, 0 entries).
    assert git(root, "show", "HEAD:memory/.dream_cursor").strip() == "2"
    assert (report["cursor_after"], report["entries_processed"]) == (2, 1), report

    again = dream_in_process(root).to_json()  # finishes the interrupted change
    assert again["status"] in ("ok", "nothing_to_do"), again
    assert "dark roast" in (root / "USER.md").read_text(encoding="utf-8")
