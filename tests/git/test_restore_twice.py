"""Restoring the same commit twice (by hand, or after a restore killed once its commit had landed)
changes nothing the second time, as docs/versioning.md promises. It used to merge the same undo
again: a conflict on the lines a person wrote since, whose suggested --force deleted them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _head(ws: Path) -> str:
    return subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_restoring_a_commit_already_undone_writes_nothing(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers dark mode"])
    assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    batch = _head(ws)
    user = ws / "USER.md"
    user.write_text(
        user.read_text().replace("- User prefers dark mode\n", "- User prefers dark mode\n- Hand: allergic to nuts\n")
    )
    first = dream("restore", "-w", str(ws), batch)
    assert first.returncode == 0, first.stderr
    undone = _head(ws)

    again = dream("restore", "-w", str(ws), batch)
    assert again.returncode == 0, again.stderr
    assert f"is already undone by {undone[:10]}" in again.stdout
    assert _head(ws) == undone
    assert "- Hand: allergic to nuts" in user.read_text()
    assert "dark mode" not in user.read_text()

    back = dream("restore", "-w", str(ws), undone)  # a restore of the restore still brings it back
    assert back.returncode == 0, back.stderr
    assert "dark mode" in user.read_text() and "allergic to nuts" in user.read_text()
