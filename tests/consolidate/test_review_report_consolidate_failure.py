"""`dream consolidate` prints its JSON report even when it cannot start or cannot take its lock.

Before, a missing template it could not create (a full disk, something in the way) or a lock file
it could not take ended the command with one stderr line and nothing on stdout, so a scheduler
parsing stdout (`docs/reference/report.md`: "always, JSON") had no report to read. Now the report
says ``failed`` with the error, and the exit code is the error's (the one table, exit-codes.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dream_memory.testing import clean_env

# `dream ARGS...` as a real process with a full disk at the first write of a template.
FULL_DISK = r"""
import sys
from dream_memory.testing.faults import at_write, disk_full, fault_hook
with fault_hook(at_write(disk_full, "template")):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[1:]]
    main()
"""


def dream(env: dict[str, str], *args: str, full_disk: bool = False) -> subprocess.CompletedProcess[str]:
    code = (
        FULL_DISK
        if full_disk
        else "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0
    return ws, env


def failed_report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), f"no report on stdout; stderr: {done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["status"] == "failed" and report["errors"], report
    assert "Traceback" not in done.stderr
    return report


def test_a_full_disk_while_creating_a_template_still_prints_the_report(tmp_path: Path) -> None:
    ws, env = workspace(tmp_path)
    (ws / "SOUL.md").unlink()  # consolidate recreates a missing template first
    done = dream(env, "consolidate", "--all", "--model", "offline", full_disk=True)
    report = failed_report(done)
    assert done.returncode == 1  # a full disk may clear: running again can work
    assert any("no space left" in e for e in report["errors"]), report["errors"]
    assert report["workspace"] == str(ws) and report["model"] == "offline"
    assert "dream: error:" in done.stderr and "no space left" in done.stderr


def test_a_file_where_a_workspace_folder_belongs_still_prints_the_report(tmp_path: Path) -> None:
    ws, env = workspace(tmp_path)
    (ws / "skills").rmdir()
    (ws / "skills").write_text("not a folder\n")
    done = dream(env, "consolidate", "--all", "--model", "offline")
    report = failed_report(done)
    assert done.returncode == 2 and any(f"cannot create workspace {ws}" in e for e in report["errors"])


@pytest.mark.slow
def test_a_lock_it_cannot_take_still_prints_the_report(tmp_path: Path) -> None:
    ws, env = workspace(tmp_path)
    (ws / "memory" / ".consolidation.lock").mkdir()
    done = dream(env, "consolidate", "--all", "--model", "offline")
    report = failed_report(done)
    assert done.returncode == 2  # a folder where a file belongs: the workspace's to fix (WorkspaceUnusable)
    assert any(".consolidation.lock" in e and "folder" in e for e in report["errors"]), report["errors"]
    assert "remove the folder" in done.stderr
    assert "error:" in done.stderr  # the summary on stderr names it too
