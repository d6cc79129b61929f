"""`dream run --dry-run` changes nothing in the workspace, not even a lock file, and still
refuses to run beside a live Dream (exit 75) (issue 17)."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dream_helpers import Cli, sample_entries

from dream_memory.adapters.locks import dream_lock
from dream_memory.testing import build_workspace


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` (.git included) with its kind, mode and content hash: no mtimes."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            path = Path(folder, name)
            found[str(path.relative_to(root)) + "/"] = f"dir {path.stat().st_mode:o}"
        for name in files:
            path = Path(folder, name)
            if path.is_symlink():
                found[str(path.relative_to(root))] = f"link {os.readlink(path)}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[str(path.relative_to(root))] = f"file {path.stat().st_mode:o} {digest}"
    return found


def _workspace_with_pending_work(cli: Cli) -> Path:
    root = build_workspace(cli.workspace, history=sample_entries(6))
    done = cli.subprocess("dream", "run", "--model", "offline", "--batch-size", "2", "--max-batches", "1")
    assert done.returncode == 0, done.stderr
    return root


def test_a_dry_run_leaves_a_fresh_workspace_byte_identical(isolated: Cli) -> None:
    """A dry run over a workspace that never ran Dream: the would-be diff is reported, and every
    file (the repository's too) is as it was, with no memory/.dream.lock created."""
    root = build_workspace(isolated.workspace, history=sample_entries(4))
    before = tree(root)
    assert "memory/.dream.lock" not in before
    done = isolated.subprocess("dream", "run", "--model", "offline", "--dry-run")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "dry_run"
    assert report["files_changed"]  # it did the work, only in its staging copy
    assert tree(root) == before


@pytest.mark.slow
def test_a_dry_run_after_real_runs_changes_nothing(isolated: Cli) -> None:
    """With history pending after a real run (a lock file, a repository, a cursor in place), a
    dry run leaves every byte and every mode as it was."""
    root = _workspace_with_pending_work(isolated)
    before = tree(root)
    done = isolated.subprocess("dream", "run", "--model", "offline", "--batch-size", "2", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "dry_run"
    assert tree(root) == before


@pytest.mark.slow
def test_a_dry_run_beside_a_live_dream_exits_75_and_writes_nothing(isolated: Cli) -> None:
    """While another Dream holds the workspace, a dry run is refused with exit 75 and status
    locked, and the workspace (the live run's lock record included) is untouched."""
    root = _workspace_with_pending_work(isolated)
    with dream_lock(root, now=datetime.now(UTC)):
        before = tree(root)
        done = isolated.subprocess("dream", "run", "--model", "offline", "--dry-run")
        after = tree(root)
    assert done.returncode == 75, done.stderr
    assert json.loads(done.stdout)["status"] == "locked"
    assert after == before
