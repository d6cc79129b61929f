"""Dream's own files (the Dream lock, history.jsonl, the record of how the history lock was left)
are never opened through a symbolic link: a link committed in a cloned repository, or planted
beside the workspace, must not make a command truncate, append to or read a file outside it.

What a user would notice if this failed: after cloning a repository and running `dream run` (or
`restore`, `forget`, `review`), a file of theirs outside the workspace is empty; or an entry
appended with `dream append` lands in some other file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]
PRECIOUS = "precious line 1\nprecious line 2\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(PRECIOUS, encoding="utf-8")
    return path


def _link(path: Path, target: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize("command", [["run", "--model", "offline"], ["forget", "--purge", "hello"]])
def test_a_linked_dream_lock_leaves_its_target_alone(
    tmp_path: Path, victim: Path, dream: Dream, command: list[str]
) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] hello there"])
    assert dream("init", "-w", str(ws)).returncode == 0
    _link(ws / "memory" / ".dream.lock", victim)
    proc = dream(*command, "-w", str(ws))
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr and "memory/.dream.lock" in proc.stderr
    assert victim.read_text(encoding="utf-8") == PRECIOUS


def test_a_linked_history_is_neither_appended_to_nor_read(tmp_path: Path, victim: Path, dream: Dream) -> None:
    ws = build_workspace(tmp_path / "ws")
    _link(ws / "memory" / "history.jsonl", victim)
    appended = dream("append", "-w", str(ws), "- a new entry")
    assert appended.returncode == 2, appended.stderr
    assert "symbolic link" in appended.stderr and "hint:" in appended.stderr
    assert victim.read_text(encoding="utf-8") == PRECIOUS
    ran = dream("run", "-w", str(ws), "--model", "offline")
    assert ran.returncode != 0 and "symbolic link" in ran.stderr
    assert victim.read_text(encoding="utf-8") == PRECIOUS


def test_a_linked_record_of_the_history_lock_is_not_written_through(tmp_path: Path, victim: Path, dream: Dream) -> None:
    """memory/.history.left is a hint only: a link in its place is left alone, and appends go on."""
    ws = build_workspace(tmp_path / "ws")
    assert dream("append", "-w", str(ws), "- one").returncode == 0
    _link(ws / "memory" / ".history.left", victim)
    assert dream("append", "-w", str(ws), "- two").returncode == 0
    assert dream("append", "-w", str(ws), "- three").returncode == 0
    assert victim.read_text(encoding="utf-8") == PRECIOUS
    assert (ws / "memory" / "history.jsonl").read_text(encoding="utf-8").count("\n") == 3
