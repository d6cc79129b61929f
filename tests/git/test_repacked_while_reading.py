"""`dream forget` rewrites history and replaces the pack files. A command that had read the pack
list before (a reader holds no lock; restore and review accept/reject now open the repository
only once they hold the Dream lock) then looked a commit up by its id in packs that were gone:
dulwich raised PackFileDisappeared, a traceback (found by an independent review, once in about 60
races of forget, restore and review). It is now a clear error, exit 75: run the command again."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.app.runtime import Runtime
from dream_memory.errors import EXIT_LOCKED, RepositoryChanged
from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _dreamt(dream: Dream, tmp_path: Path) -> Path:
    ws = build_workspace(tmp_path / "ws")
    for fact in ("- [durable] User lives in Carcassonne", "- [durable] User likes jazz"):
        assert dream("append", "-w", str(ws), fact).returncode == 0
        assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    return ws


def _forget(dream_process: Dream, ws: Path) -> None:
    """Another process's `dream forget`: it holds the Dream lock while it replaces the packs."""
    done = dream_process("forget", "--purge", "Carcassonne", "-w", str(ws))
    assert done.returncode == 0, done.stderr


def test_a_reader_whose_packs_were_replaced_is_told_to_run_again(
    dream: Dream, dream_process: Dream, tmp_path: Path
) -> None:
    ws = _dreamt(dream, tmp_path)
    git = Runtime.load(ws, None).git(create=False)
    assert git is not None
    with git:
        git.head()
        list(git.repo.object_store.packs)  # the pack list of this moment
        _forget(dream_process, ws)
        head = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        with pytest.raises(RepositoryChanged) as raised:
            git.resolve(head.strip())
    assert raised.value.exit_code == EXIT_LOCKED
    assert "run the command again" in str(raised.value)
