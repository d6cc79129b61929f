"""A full disk while the provenance note is written, after the batch's commit landed: the batch
is reported landed (committed, its commit in the report), the missing note is said in the run's
notes (the text summary too), never a traceback or a `failed` batch for a commit that is there.

What a user would notice if this failed: `dream run` printing a dulwich traceback and reporting
the batch failed while HEAD holds its commit, so a script retries or alerts on work that is
done, and nobody learns that `dream why` will read that commit's body instead of a note.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dream_memory.testing.faults import Injector, disk_full, fault_hook

FACT = "- [durable] User lives in Lyon and works as a baker."


def _note_site(which: str) -> Injector:
    """ENOSPC at the note's first write of ``which`` kind, once the batch's commit has moved the
    branch: the note's objects (its pack) or the move of refs/notes/dream."""
    landed: list[bool] = []

    def inject(site: str, path: Path) -> None:
        if path.as_posix().endswith("refs/heads/main"):
            landed.append(True)
        elif which == "objects" and landed and site == "git.lock.object":
            landed.clear()  # once
            disk_full(path)
        elif which == "ref" and path.as_posix().endswith("refs/notes/dream"):
            disk_full(path)

    return inject


def _git(ws: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("which", ["objects", "ref"])
def test_a_full_disk_at_the_note_leaves_the_batch_landed_and_says_the_note_is_missing(
    tmp_path: Path, dream, clean_env: dict[str, str], which: str
) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert dream("append", "--workspace", str(ws), FACT).returncode == 0

    with fault_hook(_note_site(which)):
        run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    (batch,) = report["batches"]
    head = _git(ws, "rev-parse", "HEAD", env=clean_env).stdout.strip()
    assert report["status"] == "ok" and batch["outcome"] == "committed", report
    assert batch["commit"] == head and report["commits"] == [head] and report["cursor_after"] == 1
    assert "Lyon" in (ws / "USER.md").read_text()

    said = [n for n in report["notes"] if "without its provenance note" in n]
    assert len(said) == 1 and "no space left on the device" in said[0] and head[:10] in said[0], report["notes"]
    assert any("without its provenance note" in n for n in batch["notes"])
    assert "without its provenance note" in run.stderr and "no space left" in run.stderr
    assert _git(ws, "notes", "--ref", "dream", "show", head, env=clean_env).returncode != 0

    # What stands in for the note: `dream why` reads the facts from the commit body.
    number = next(i for i, line in enumerate((ws / "USER.md").read_text().split("\n"), 1) if "Lyon" in line)
    why = dream("why", f"USER.md:{number}", "--workspace", str(ws))
    assert why.returncode == 0 and head[:10] in why.stdout and "Lyon" in why.stdout, why.stdout + why.stderr

    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert status["pending"] == 0 and status["dream_cursor"] == 1
    fsck = _git(ws, "fsck", "--strict", env=clean_env)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
