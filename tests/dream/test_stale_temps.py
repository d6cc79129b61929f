"""A writer killed between its temp file and the rename leaves ``.NAME.XXXXXXXX.tmp`` beside
the file; the next Dream run (under its lock) removes the ones old enough to be dead."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dream_helpers import dream_in_process

from dream_memory.adapters import fsutil, rooted
from dream_memory.testing import build_workspace


def _run(root: Path) -> list[str]:
    report = dream_in_process(root)
    assert report.status == "ok", report.to_json()
    return report.notes


def _aged(path: Path, seconds: float) -> Path:
    path.write_text("half a rewrite")
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_dead_temp_files_go_and_live_or_foreign_ones_stay(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea."])
    memory_before = (root / "memory" / "MEMORY.md").read_text()
    dead_memory = _aged(root / "memory" / ".MEMORY.md.k2x_9a0q.tmp", 3600)  # atomic_write's mkstemp name
    dead_user = _aged(root / ".USER.md.0a1b2c3d.tmp", 3600)  # rooted's name
    (root / "memory" / "entities").mkdir(exist_ok=True)
    dead_nested = _aged(root / "memory" / "entities" / ".bob.md.deadbeef.tmp", 3600)
    live = _aged(root / "memory" / ".MEMORY.md.abcdefgh.tmp", 1)  # a write in progress elsewhere
    foreign = _aged(root / "memory" / "notes.tmp", 3600)  # not a name our writers make
    notes = _run(root)
    assert not dead_memory.exists() and not dead_user.exists() and not dead_nested.exists()
    assert live.exists() and foreign.exists()
    assert any("removed 3 temp file(s) a killed writer left" in n for n in notes), notes
    assert "User prefers tea" in (root / "USER.md").read_text() + (root / "memory" / "MEMORY.md").read_text()
    assert (root / "memory" / "MEMORY.md").read_text().startswith(memory_before.splitlines()[0])


def test_the_pattern_matches_what_both_writers_leave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both writers, killed between their temp file and the rename (and so before their own
    cleanup), leave names that the cleanup removes."""

    def killed(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(os, "unlink", lambda *a, **k: None)
    with pytest.raises(OSError):
        fsutil.atomic_write(tmp_path / "a.md", "x")
    with pytest.raises(OSError):
        rooted.RootedDir(tmp_path).write("b.md", b"x")
    monkeypatch.undo()
    temps = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(temps) == 2, temps
    for path in temps:
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert sorted(fsutil.remove_stale_temps(tmp_path, deep=False)) == sorted(temps)
    assert list(tmp_path.iterdir()) == []
