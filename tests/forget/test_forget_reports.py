"""A report Dream wrote into the workspace (``--report /workspace/report.json``, the container's
documented use) quotes the entries and diffs of its run: the purge reaches it too, and any other
file in the top folder still holding the value is named, never missed without a word."""

from __future__ import annotations

import json
from pathlib import Path

from forget_helpers import CANARY, Env, dreamt_workspace, holders


def _with_report(env: Env) -> Path:
    dreamt_workspace(env, batches=1)
    assert env.dream("append", f"- [durable] User's bike lock code is {CANARY}").exit_code == 0
    report = env.ws / "report.json"
    assert env.dream("run", "--model", "offline", "--report", str(report)).exit_code == 0
    assert CANARY in report.read_text()
    return report


def test_a_report_written_in_the_workspace_is_purged_and_stays_a_report(tmp_path: Path) -> None:
    env = Env(tmp_path)
    report = _with_report(env)
    notes = env.ws / "notes.txt"
    notes.write_text(f"my own note: {CANARY}\n")

    code, done = env.dream_json("forget", "--purge", CANARY)

    assert code == 0, done
    assert "report.json" in done["files"]
    assert json.loads(report.read_text())["status"] == "ok"
    assert "[forgotten]" in report.read_text()
    # The user's own file is left as it is, and named.
    assert holders(env) == {"notes.txt": 1}
    assert any("notes.txt" in warning for warning in done["warnings"])


def test_a_dry_run_names_the_report_and_changes_nothing(tmp_path: Path) -> None:
    env = Env(tmp_path)
    report = _with_report(env)
    before = report.read_bytes()

    code, done = env.dream_json("forget", "--purge", CANARY, "--dry-run")

    assert code == 0, done
    assert "report.json" in done["files"]
    assert report.read_bytes() == before


def test_top_folder_files_it_cannot_open_or_will_not_read_are_named_and_the_purge_finishes(tmp_path: Path) -> None:
    """An Office lock file (`~$plan.docx`, a name the store's own files never take) and a file too
    large to read whole (a backup image) in the top folder: the purge finishes, exit 0, naming
    the first as still holding the value and the second as not searched; nothing is left
    unfinished for other commands to wait on."""
    env = Env(tmp_path)
    _with_report(env)
    (env.ws / "~$plan.docx").write_text(f"draft: {CANARY}\n")
    with (env.ws / "backup.img").open("wb") as image:
        image.truncate(65 * 1024 * 1024)  # sparse: large, but no disk

    code, done = env.dream_json("forget", "--purge", CANARY)

    assert code == 0, done
    warnings = "\n".join(done["warnings"])
    assert "~$plan.docx" in warnings and "still hold it" in warnings
    assert "backup.img is 68,157,440 bytes" in warnings and "not searched" in warnings
    assert "[forgotten]" in (env.ws / "report.json").read_text()
    assert env.dream("run", "--model", "offline").exit_code == 0
