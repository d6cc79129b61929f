"""history.jsonl on disk: reporting, compaction into memory/archive/, reading back from a cursor,
and the history lock, each against real files (and real processes for the lock)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.errors import HistoryError, InputError
from dream_memory.testing import FrozenClock, build_workspace
from dream_memory.testing.faults import at_write, disk_full


def _entry(cursor: int, month: str = "2026-04", text: str | None = None) -> HistoryEntry:
    return HistoryEntry(cursor, f"{month}-03 00:02", text or f"- fact {cursor}")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else []


def test_a_malformed_line_is_reported_once_with_its_line_number_and_never_removed(tmp_path: Path) -> None:
    """A broken line is named once per run with its line number, skipped, and survives every
    compaction byte for byte, even when the entries around it are archived."""
    workspace = build_workspace(tmp_path / "ws", history=[_entry(c) for c in range(1, 6)], dream_cursor=30)
    path = workspace / "memory/history.jsonl"
    lines = _lines(path)
    broken = '{"cursor": 6, "timestamp": "2026-04-03 00:02", "content": "cut sho'
    lines.insert(2, broken)
    lines += [_entry(c).to_json_line() for c in range(7, 31)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    reported: list[str] = []
    log = HistoryLog(workspace, clock=FrozenClock(), on_problem=reported.append)
    assert len(log.scan().entries) == 29
    assert reported == [reported[0]] and reported[0].startswith(
        "memory/history.jsonl line 3: malformed: not valid JSON"
    )
    log.compact(dream_cursor=30, max_entries=10)
    log.compact(dream_cursor=30, max_entries=10)
    log.scan()
    log.entries_after(0)
    assert len(reported) == 1, "the same line is not reported again after it moved to line 1"
    remaining = _lines(path)
    assert broken in remaining
    assert len(log.scan().entries) == 10
    archived = [line for p in log.archive_files() for line in _lines(p)]
    assert broken not in archived
    assert [e.cursor for e in log.entries_after(0)] == [c for c in range(1, 31) if c != 6]


def test_compaction_never_moves_what_dream_has_not_consumed(tmp_path: Path) -> None:
    """Only entries at or below .dream_cursor move, oldest first, into archive/history-YYYY-MM.jsonl;
    when too few are consumed the file keeps more than the limit rather than lose anything."""
    history = [_entry(c, "2026-03") for c in range(1, 21)] + [_entry(c, "2026-04") for c in range(21, 41)]
    workspace = build_workspace(tmp_path / "ws", history=history)
    log = HistoryLog(workspace, clock=FrozenClock())
    result = log.compact(dream_cursor=25, max_entries=10)
    assert result.archived == 25 and result.kept == 15
    assert sorted(p.name for p in log.archive_files()) == ["history-2026-03.jsonl", "history-2026-04.jsonl"]
    assert [e.cursor for e in log.scan().entries] == list(range(26, 41))
    assert [json.loads(x)["cursor"] for x in _lines(workspace / "memory/archive/history-2026-04.jsonl")] == list(
        range(21, 26)
    )
    assert log.compact(dream_cursor=25, max_entries=10).archived == 0  # nothing more may move
    assert log.compact(dream_cursor=40, max_entries=10).archived == 5
    assert [e.cursor for e in log.scan().entries] == list(range(31, 41))
    assert [e.cursor for e in log.archive_entries()] == list(range(1, 31))


def test_reading_from_a_cursor_reaches_into_the_archive(tmp_path: Path) -> None:
    """After compaction, asking for entries after an old cursor (a --replay) returns the
    archived ones too, in cursor order, once each; asking after .dream_cursor reads no archive."""
    workspace = build_workspace(tmp_path / "ws", history=[_entry(c) for c in range(1, 51)])
    log = HistoryLog(workspace, clock=FrozenClock())
    log.compact(dream_cursor=40, max_entries=10)
    assert [e.cursor for e in log.entries_after(40)] == list(range(41, 51))
    assert [e.cursor for e in log.entries_after(12)] == list(range(13, 51))
    # the archive also holds a copy of 41 if a compaction was killed after archiving it:
    archive = log.archive_files()[0]
    archive.write_text(archive.read_text(encoding="utf-8") + _entry(41).to_json_line() + "\n", encoding="utf-8")
    assert [e.cursor for e in log.entries_after(39)] == list(range(40, 51))


def test_two_different_entries_with_one_cursor_are_both_read(tmp_path: Path) -> None:
    """Real files hold duplicate cursors; neither entry is dropped on the way to Dream."""
    history = [_entry(1), _entry(2, text="- first two"), _entry(2, text="- second two"), _entry(3)]
    workspace = build_workspace(tmp_path / "ws", history=history)
    log = HistoryLog(workspace, clock=FrozenClock())
    assert [e.content for e in log.entries_after(1)] == ["- first two", "- second two", "- fact 3"]
    assert log.append("- next").cursor == 4


def test_an_append_never_glues_onto_an_unterminated_line(tmp_path: Path) -> None:
    """Another writer left the last line without its newline: the new entry gets its own line."""
    workspace = build_workspace(tmp_path / "ws")
    path = workspace / "memory/history.jsonl"
    path.write_text(_entry(7).to_json_line(), encoding="utf-8")
    log = HistoryLog(workspace, clock=FrozenClock())
    entry = log.append("- after")
    assert entry.cursor == 8
    assert _lines(path) == [_entry(7).to_json_line(), entry.to_json_line()]
    assert log.scan().problems == []


def test_empty_entries_are_refused(tmp_path: Path) -> None:
    """A blank entry is bad input (exit 2 on the command line) and nothing is written."""
    workspace = build_workspace(tmp_path / "ws")
    log = HistoryLog(workspace, clock=FrozenClock())
    with pytest.raises(InputError):
        log.append("  \n\t")
    assert not (workspace / "memory/history.jsonl").exists()


HOLD_HISTORY_LOCK = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(code: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_held_history_lock_gives_up_after_the_bound(tmp_path: Path) -> None:
    """While another process holds memory/.history.lock, an append waits its bounded time and
    then fails with a message naming the lock; nothing is written."""
    workspace = build_workspace(tmp_path / "ws")
    holder = _hold(HOLD_HISTORY_LOCK, str(workspace / "memory/.history.lock"), "30")
    try:
        log = HistoryLog(workspace, clock=FrozenClock(), lock_timeout=0.5)
        start = time.monotonic()
        with pytest.raises(HistoryError, match=r"\.history\.lock is held by another writer"):
            log.append("- waits")
        assert 0.4 < time.monotonic() - start < 5
        assert not (workspace / "memory/history.jsonl").exists()
    finally:
        holder.kill()
        holder.communicate()
    assert log.append("- then goes through").cursor == 1  # the kernel released the dead holder's lock


def test_the_lock_is_reentrant_for_its_holder(tmp_path: Path) -> None:
    """Code that holds the history lock (to read and append as one step) can append inside it
    without waiting on itself, while other holders are still excluded."""
    workspace = build_workspace(tmp_path / "ws")
    log = HistoryLog(workspace, clock=FrozenClock(), lock_timeout=0.5)
    start = time.monotonic()
    with log.lock():
        first = log.append("- inside the lock")
        with pytest.raises(HistoryError):
            HistoryLog(workspace, clock=FrozenClock(), lock_timeout=0.2).append("- another writer")
        second = log.append("- still inside")
    assert time.monotonic() - start < 5
    assert (first.cursor, second.cursor) == (1, 2)
    assert log.append("- after").cursor == 3


def test_a_full_disk_never_reports_a_stored_entry_as_failed(tmp_path: Path) -> None:
    """ENOSPC while writing the line: the append fails (exit 1 on the command line) and leaves no
    trace, so a retry stores it once. ENOSPC while rewriting .cursor after the line is stored:
    the append succeeds with a warning (a stale counter is harmless), so no caller retries a
    stored entry."""
    from dream_memory.adapters import fsutil

    workspace = build_workspace(tmp_path / "ws", history=["- one"])
    path = workspace / "memory/history.jsonl"
    before = path.read_bytes()
    warnings: list[str] = []
    log = HistoryLog(workspace, clock=FrozenClock(), on_problem=warnings.append)
    fsutil.set_fault_injector(at_write(disk_full, "history.append"))
    try:
        with pytest.raises(HistoryError, match="no space left"):
            log.append("- lost to a full disk")
    finally:
        fsutil.set_fault_injector(None)
    assert path.read_bytes() == before
    fsutil.set_fault_injector(at_write(disk_full, "cursor.write"))
    try:
        entry = log.append("- stored although .cursor could not be rewritten")
    finally:
        fsutil.set_fault_injector(None)
    assert entry.cursor == 2 and log.scan().entries[-1] == entry
    assert warnings == ["memory/.cursor was not updated (no space left on the device); the entry is stored"]
    assert log.append("- next").cursor == 3


def test_lines_that_are_not_utf8_move_byte_for_byte(tmp_path: Path) -> None:
    """A line another program wrote in Latin-1, and an entry holding such a byte, keep their exact
    bytes through a compaction (the foreign line stays, the entry moves to the archive) and a
    rewrite beside them; the entry is still read (its byte shown as U+FFFD) and dreamt."""
    workspace = build_workspace(tmp_path / "ws", history=[_entry(c) for c in range(1, 13)])
    path = workspace / "memory/history.jsonl"
    foreign = b'{"note": "caf\xe9 written by another tool"}'
    latin = b'{"cursor": 13, "timestamp": "2026-04-03 00:02", "content": "r\xe9sum\xe9 of lizards"}'
    tail = "".join(_entry(c).to_json_line() + "\n" for c in range(14, 21)).encode()
    path.write_bytes(path.read_bytes() + foreign + b"\n" + latin + b"\n" + tail)
    log = HistoryLog(workspace, clock=FrozenClock())
    assert log.entries_after(12)[0].content == "r\ufffdsum\ufffd of lizards"
    assert log.compact(dream_cursor=20, max_entries=5).archived == 15
    archive = b"".join(p.read_bytes() for p in sorted((workspace / "memory/archive").glob("*.jsonl")))
    assert latin + b"\n" in archive and b"\xef\xbf\xbd" not in archive
    kept = path.read_bytes()
    assert foreign + b"\n" in kept and b"\xef\xbf\xbd" not in kept
    log.append("- one more")  # appends leave the other lines alone too
    assert foreign + b"\n" in path.read_bytes()
