"""Legacy memory/HISTORY.md migration (CONTRACT section 3): which mode, which cursors, which
backup name, on real files."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace

LEGACY = "[2026-03-01 10:00] first\n[2026-03-02 11:00] second\n\nno header: an entry of its own\n"
# HISTORY.md's modification time: the time of its undated text, as nanobot's migration has it
MTIME = datetime(2026, 3, 5, 8, 30).timestamp()


def _log(ws: Path) -> HistoryLog:
    return HistoryLog(ws, clock=FrozenClock())


def test_into_an_empty_history_the_entries_arrive_already_consolidated(tmp_path: Path) -> None:
    """history.jsonl present but empty: entries in file order with their header timestamps (the
    paragraph after a blank line is an entry of its own, dated by the file's modification time,
    as nanobot splits it), and both .cursor and .dream_cursor at the last one (the old design had
    consolidated them)."""
    ws = build_workspace(tmp_path / "ws")
    (ws / "memory/history.jsonl").write_text("", encoding="utf-8")
    (ws / "memory/HISTORY.md").write_text(LEGACY, encoding="utf-8")
    os.utime(ws / "memory/HISTORY.md", (MTIME, MTIME))
    result = _log(ws).migrate_legacy()
    assert result is not None and (result.mode, result.entries, result.backup) == (
        "initial",
        3,
        "memory/HISTORY.md.bak",
    )
    entries = _log(ws).scan().entries
    assert [(e.cursor, e.timestamp, e.content) for e in entries] == [
        (1, "2026-03-01 10:00", "first"),
        (2, "2026-03-02 11:00", "second"),
        (3, "2026-03-05 08:30", "no header: an entry of its own"),
    ]
    assert (_log(ws).read_counter(), _log(ws).read_dream_cursor()) == (3, 3)
    assert _log(ws).entries_after(3) == []


def test_beside_a_non_empty_history_they_arrive_as_new_undreamt_entries(tmp_path: Path) -> None:
    """Entries already there stay first and untouched; the legacy ones get cursors above
    everything (here above a .dream_cursor that is ahead of the file) and stay pending."""
    history = [HistoryEntry(c, "2026-04-01 09:00", f"- existing {c}") for c in (5, 6)]
    ws = build_workspace(tmp_path / "ws", history=history, dream_cursor=8, cursor=6)
    before = (ws / "memory/history.jsonl").read_text(encoding="utf-8")
    (ws / "memory/HISTORY.md").write_text(LEGACY, encoding="utf-8")
    result = _log(ws).migrate_legacy()
    assert result is not None and (result.mode, result.first_cursor, result.last_cursor) == ("append", 9, 11)
    assert (ws / "memory/history.jsonl").read_text(encoding="utf-8").startswith(before)
    assert [e.cursor for e in _log(ws).entries_after(8)] == [9, 10, 11]
    assert (_log(ws).read_counter(), _log(ws).read_dream_cursor()) == (11, 8)


def test_backups_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    """A HISTORY.md that appears again is migrated again, as new entries, and renamed
    HISTORY.md.bak.2, then .bak.3: earlier backups are kept as they are."""
    ws = build_workspace(tmp_path / "ws")
    texts = ["[2026-03-01 10:00] one\n", "[2026-03-02 10:00] two\n", "[2026-03-03 10:00] three\n"]
    for text in texts:
        (ws / "memory/HISTORY.md").write_text(text, encoding="utf-8")
        assert _log(ws).migrate_legacy() is not None
    memory = ws / "memory"
    assert [
        (memory / n).read_text(encoding="utf-8") for n in ("HISTORY.md.bak", "HISTORY.md.bak.2", "HISTORY.md.bak.3")
    ] == texts
    assert [(e.cursor, e.content) for e in _log(ws).scan().entries] == [(1, "one"), (2, "two"), (3, "three")]
    assert _log(ws).read_dream_cursor() == 1  # only the first arrived into an empty history
    assert not (memory / "HISTORY.md").exists()


def test_a_legacy_file_without_entries_is_just_renamed(tmp_path: Path) -> None:
    """An empty (or blank) HISTORY.md adds nothing and moves no cursor, but is still retired."""
    ws = build_workspace(tmp_path / "ws", history=["- kept"], cursor=1)
    (ws / "memory/HISTORY.md").write_text("\n\n-e \n", encoding="utf-8")
    result = _log(ws).migrate_legacy()
    assert result is not None and result.entries == 0
    assert [e.content for e in _log(ws).scan().entries] == ["- kept"]
    assert _log(ws).read_counter() == 1 and _log(ws).read_dream_cursor() is None
    assert (ws / "memory/HISTORY.md.bak").exists() and not _log(ws).legacy_pending()
