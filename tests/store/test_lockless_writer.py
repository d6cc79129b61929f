"""Appending beside a writer without our lock (nanobot's ``append_history``, played here by raw
appends): how long an append waits for that writer's next line, and what ends the wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.history_log.lockless import LocklessWriter
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace
from dream_memory.testing.faults import at_write, fault_hook

S = 1_000_000_000


def _nanobot_line(path: Path, cursor: int, text: str = "- nanobot's line") -> None:
    """What nanobot's append_history does: one line appended, no lock taken."""
    with path.open("a", encoding="utf-8") as f:
        f.write(HistoryEntry(cursor, "2026-04-03 00:02", text).to_json_line() + "\n")


def _workspace(tmp_path: Path) -> tuple[HistoryLog, Path]:
    """A workspace we appended to once (so our hold left a record), then nanobot once."""
    workspace = build_workspace(tmp_path / "ws", history=["- one"])
    path = workspace / "memory/history.jsonl"
    log = HistoryLog(workspace, clock=FrozenClock())
    assert log.append("- ours, before").cursor == 2
    _nanobot_line(path, 3)
    return log, path


def test_sightings_expire_on_the_monotonic_clock() -> None:
    now = [50 * S]
    writer = LocklessWriter(monotonic_ns=lambda: now[0])
    assert not writer.lately()
    writer.saw()
    now[0] += S
    assert writer.lately()
    now[0] += S
    assert not writer.lately()


def test_a_nanobot_idle_for_seconds_then_stopped_between_its_read_and_its_write_shares_no_cursor(
    tmp_path: Path,
) -> None:
    """nanobot's last line is 3 s old when it reads the file (cursor 4 is next), and the scheduler
    stops it for 0.9 s before its write; our append takes cursor 4 meanwhile. The append waits for
    nanobot's line, finds cursor 4 taken and stores its entry again as 6: no cursor is shared.
    (With the wait shortened to half a second for a writer whose last line was old, the append
    gave up first and both entries kept cursor 4.)"""
    log, path = _workspace(tmp_path)
    time.sleep(3)

    def nanobot_reads_then_stalls(_: Path) -> None:  # runs just before our write
        threading.Timer(0.9, _nanobot_line, (path, 4, "- nanobot's stalled line")).start()

    with fault_hook(at_write(nanobot_reads_then_stalls, "history.append")):
        entry = log.append("- ours, during nanobot's stall")
    time.sleep(1.0)  # nanobot's line has landed
    cursors = [e.cursor for e in log.scan().entries]
    assert entry.cursor != 4
    assert sorted(cursors) == [1, 2, 3, 4, entry.cursor]


def test_a_wall_clock_stepped_back_does_not_make_every_append_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After one nanobot line the wall clock steps back a minute (NTP, a resumed VM) and nanobot
    writes nothing more: an append 2.1 s later does not wait for nanobot. (Sightings on the wall
    clock looked recent for the whole minute: every append waited 2 s, holding the lock.)"""
    log, _ = _workspace(tmp_path)
    log.append("- ours, after nanobot's line")  # sees it: waits up to 2 s for the next one
    stepped = time.time_ns() - 60 * S
    started = time.monotonic_ns()
    monkeypatch.setattr(time, "time_ns", lambda: stepped + time.monotonic_ns() - started)
    time.sleep(2.1)
    before = time.monotonic()
    log.append("- ours, 2 s later")
    assert time.monotonic() - before < 1.0


def test_our_append_never_lowers_the_counter_nanobot_allocates_from(tmp_path: Path) -> None:
    """nanobot allocates max(.cursor, last line) + 1. Between our read and our write it lands two
    lines (4 and 5) and sets .cursor to 5; our line (4, shared: renumbered later) lands last.
    Our .cursor write must not take the counter back to 4: nanobot's next append would then take
    5 again, a cursor nanobot itself had used. (Seen in a traced run of the race under load:
    "nanobot entry 233" and "234" both 253, right after our .cursor went back to 252.)"""
    workspace = build_workspace(tmp_path / "ws", history=["- one", "- two", "- three"], cursor=3)
    path = workspace / "memory/history.jsonl"
    counter = workspace / "memory/.cursor"
    log = HistoryLog(workspace, clock=FrozenClock())
    seen: list[str] = []

    def nanobot_lands_twice(_: Path) -> None:  # just before our first write
        for cursor in (4, 5):
            _nanobot_line(path, cursor)
            counter.write_text(str(cursor), encoding="utf-8")

    def counter_before_the_renumbering(_: Path) -> None:  # just before storing ours again
        seen.append(counter.read_text(encoding="utf-8").strip())

    appends: list[Path] = []

    def inject(site: str, where: Path) -> None:
        if site == "history.append":
            appends.append(where)
            (nanobot_lands_twice if len(appends) == 1 else counter_before_the_renumbering)(where)

    with fault_hook(inject):
        entry = log.append("- ours")
    assert seen, "our entry was not stored again (no shared cursor)"
    assert int(seen[0]) >= 5
    assert entry.cursor == 6
