"""A held change's folder (memory/.dream_held/ID) deleted by hand, then the change settled with
`dream review reject`, `review accept` or `dream restore` of its batch. The folder's files were
listed from the disk alone, so none was deleted in the commit: they stayed in HEAD for good, and
`git status` showed them deleted through every later commit (Dream never takes its own files up
as a person's edit), while `dream status` said there was nothing unsaved."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from dream_helpers import git

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]

USER = "# User\n\n## Profile\n\n- User lives in Lyon\n"


def _held(dream: Dream, tmp_path: Path) -> tuple[Path, str, str]:
    """A workspace with one held change (a correction of a line a person wrote): its id and batch."""
    ws = build_workspace(tmp_path / "ws", files={"USER.md": USER})
    assert dream("append", "-w", str(ws), "- [correction] User lives in Porto (was Lyon)").returncode == 0
    run = dream("run", "-w", str(ws), "--model", "offline", "--json")
    report = json.loads(run.stdout)
    assert report["status"] == "held", report
    listed = json.loads(dream("review", "-w", str(ws), "--json").stdout)
    held_id = listed["changes"][0]["id"]
    batch = report["batches"][0]["commit"]
    assert git(ws, "ls-tree", "-r", "--name-only", "HEAD", f"memory/.dream_held/{held_id}").strip()
    return ws, held_id, batch


@pytest.mark.parametrize("settle", ["reject", "accept", "restore"])
def test_settling_a_held_change_whose_folder_was_deleted_leaves_a_clean_tree(
    dream: Dream, tmp_path: Path, settle: str
) -> None:
    ws, held_id, batch = _held(dream, tmp_path)
    shutil.rmtree(ws / "memory" / ".dream_held" / held_id)

    if settle == "accept":  # nothing left to accept: refused, and its hint is to reject
        refused = dream("review", "accept", held_id, "-w", str(ws))
        assert refused.returncode == 2 and f"dream review reject {held_id}" in refused.stderr, refused.stderr
        settle = "reject"
    args = ("restore", batch) if settle == "restore" else ("review", settle, held_id)
    done = dream(*args, "-w", str(ws))
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(ws, "ls-tree", "-r", "--name-only", "HEAD", "memory/.dream_held/").strip() == ""
    assert git(ws, "status", "--porcelain") == ""
