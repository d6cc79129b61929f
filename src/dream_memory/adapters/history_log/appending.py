"""Appending to history.jsonl: under the lock, one durable write, and a check afterwards that no
writer without the lock (nanobot's) took the same cursors meanwhile."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.base import LogBase, _lines_of, _read_error, _read_from, raw_bytes
from dream_memory.adapters.history_log.lockless import RECENT_NS
from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry, format_timestamp
from dream_memory.errors import HistoryError, InputError

# How often an append renumbers its entries when another writer keeps taking the same cursors
# (each time after _SETTLE_SECONDS; a writer stopped between its read and its write for most of
# its time, as under heavy load, took 4 in a row).
_RENUMBER_ATTEMPTS = 10
# A writer without our lock that wrote this recently may be between reading the file and writing
# its line (a few microseconds, unless the scheduler stops it there: under load, for
# milliseconds). An append beside it looks again this much later for a cursor it took meanwhile.
_FOREIGN_RECENT_NS = 200_000_000
_SETTLE_SECONDS = 0.03
# A line that lands while we hold the lock is proof of a writer without it (ours wait for the
# lock). After such proof (lockless.py keeps it), an append waits for that writer's next line to
# land behind its own (the line it may have allocated before ours): a scheduler at load 7 stopped
# nanobot for longer than _SETTLE_SECONDS between read and write, and four test workers beside
# busy loops for longer than the half second that once capped the wait (a shared cursor). Only on
# proof: another of our own writers, seen by the stat alone, never writes under our hold.
_POLL_SECONDS = 0.002


@dataclass(frozen=True)
class _Written:
    entry: HistoryEntry
    offset: int  # the size of history.jsonl that allocation read before this entry was written


class Appending(LogBase):
    """HistoryLog's appends."""

    _left: tuple[int, int, int] | None = None  # history.jsonl (inode, size, mtime) after our last append
    _foreign_recent = False  # whether someone else wrote history.jsonl just before this append

    def append(self, content: str, *, session_key: str | None = None, timestamp: str | None = None) -> HistoryEntry:
        return self.append_many([(content, session_key, timestamp)])[0]

    def append_many(self, items: Sequence[tuple[str, str | None, str | None]]) -> list[HistoryEntry]:
        """Append entries under one lock hold, one durable write; returns them with their cursors."""
        for content, _, _ in items:
            if not content.strip():
                raise InputError("a history entry needs some text; empty entries are refused")
        if not items:
            return []
        with self.lock():
            try:
                self._recover_locked()
            except OSError as exc:
                reason = fsutil.describe_os_error(exc)
                raise HistoryError(f"cannot finish an interrupted change of {layout.HISTORY}: {reason}") from exc
            written = self._write_new(items)
            try:
                if self._taken(written, beside_foreign=self._foreign_recent):
                    written = self._move_taken(written)
            except (OSError, HistoryError) as exc:
                # The entries are stored: failing now would make a caller append them twice.
                reason = fsutil.describe_os_error(exc) if isinstance(exc, OSError) else exc.message
                self._note(f"could not check {layout.HISTORY} for a cursor taken twice: {reason}")
            return [w.entry for w in written]

    def _write_new(self, items: Sequence[tuple[str, str | None, str | None]]) -> list[_Written]:
        """Allocate cursors for ``items`` and append them in one write (under the lock).

        From reading the file to the write landing takes microseconds, and nothing slow (no
        fsync) sits in between: that is the only moment a writer without our lock can pick the
        same cursor, and ``_taken`` finds it if one did.
        """
        self._foreign_recent = self._written_by_another_lately() or self._unrecorded_hold
        try:
            data = fsutil.read_own(self.path)
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise _read_error(exc, self.path) from exc
        first = self._allocate_from(data, len(items))
        now = format_timestamp(self.clock.now())
        entries = [
            HistoryEntry(cursor=first + i, timestamp=ts or now, content=content, session_key=key)
            for i, (content, key, ts) in enumerate(items)
        ]
        payload = "".join(e.to_json_line() + "\n" for e in entries)
        if not fsutil.ends_with_newline(self.path):
            # A foreign writer left the last line unterminated; never glue onto it.
            payload = "\n" + payload
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = None
        try:
            fsutil.append_bytes(self.path, payload.encode("utf-8"), site="history.append")
        except OSError as exc:
            # A full disk may have let part of the line through: take it back, so that a
            # failed append (which the caller will retry) leaves no trace.
            self._truncate_to(size)
            raise HistoryError(f"cannot append to {layout.HISTORY}: {fsutil.describe_os_error(exc)}") from exc
        with contextlib.suppress(OSError):
            left = self.path.stat()
            self._left = (left.st_ino, left.st_size, left.st_mtime_ns)
        try:
            # Never lower the counter: nanobot allocates max(.cursor, last line) + 1, and a writer
            # without our lock may have raised it past ours since we read it (its lines landed
            # before ours, ours is the last line now). A lowered counter made nanobot take one
            # of its own cursors again. (A raise between this read and the rename still goes.)
            floor = max(entries[-1].cursor, self.read_counter() or 0)
            fsutil.atomic_write(self.cursor_path, f"{floor}\n", site="cursor.write")
        except OSError as exc:
            # The entries are stored: failing now would make a caller append them twice. The
            # counter is only a floor (allocation reads the file too), so a stale one is safe.
            self._note(f"{layout.CURSOR} was not updated ({fsutil.describe_os_error(exc)}); the entry is stored")
        return [_Written(e, len(data)) for e in entries]

    def _written_by_another_lately(self) -> bool:
        """Whether history.jsonl changed in the last moments, and not by this object's last append
        (the size too: two writes within one tick of the file system's clock share an mtime), or
        a writer without our lock was seen lately (an object that appends often hides that
        writer's lines from the stat behind its own last append)."""
        if self._lockless.lately():
            return True
        try:
            now = self.path.stat()
        except OSError:
            return False
        ours = self._left == (now.st_ino, now.st_size, now.st_mtime_ns)
        return not ours and time.time_ns() - now.st_mtime_ns < _FOREIGN_RECENT_NS

    def _taken(self, written: Sequence[_Written], *, beside_foreign: bool) -> bool:
        """Whether another writer took one of our cursors: right after our write and, beside a
        writer without our lock that is active, once more after it had time to land a line it
        allocated from the file as it was before ours (it read the file, then the scheduler
        stopped it before its write: seen under load beside nanobot's ``append_history``). When
        such a writer has been seen lately, until its next line lands behind ours (that is the
        one it allocated then), it has not been proven active lately, or RECENT_NS pass."""
        taken, _ = self._look_behind(written)
        if taken or not beside_foreign:
            return taken
        deadline = time.monotonic_ns() + RECENT_NS
        time.sleep(_SETTLE_SECONDS)
        while True:
            taken, landed_behind = self._look_behind(written)
            if taken or landed_behind or not self._lockless.lately():
                return taken
            # Each look proves again a writer whose line landed before ours without taking our
            # cursor (it stopped across two of our appends): only the deadline ends that wait.
            if time.monotonic_ns() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)

    def _look_behind(self, written: Sequence[_Written]) -> tuple[bool, bool]:
        """(whether another writer stored an entry under one of our new cursors, whether a line of
        another writer landed behind all of ours). Only bytes after what allocation read can hold
        either: the writer read the file just before our line landed."""
        if not written:
            return False, False
        ours = {w.entry.to_json_line() for w in written}
        wanted = {w.entry.cursor for w in written}
        since = min(w.offset for w in written)
        try:
            fd = os.open(self.path, os.O_RDONLY | fsutil.NOFOLLOW)
        except FileNotFoundError:
            return False, False
        replaced = False
        try:
            if os.fstat(fd).st_size < since:
                since, replaced = 0, True  # replaced meanwhile (a foreign compaction): look at all of it
            fresh = _read_from(fd, since)
        finally:
            os.close(fd)
        taken = behind = False
        seen_ours = 0
        for line in _lines_of(fresh):
            if line.raw.rstrip("\r") in ours:
                seen_ours += 1
                continue
            if line.is_blank:
                continue
            if not replaced:  # it landed while we held the lock
                self._lockless.saw()
            taken = taken or any(e.cursor in wanted for e in line.entries)
            # A line is behind ours once every one of ours came before it (appends land in order).
            behind = behind or seen_ours >= len(ours)
        return taken, behind

    def _move_taken(self, written: list[_Written]) -> list[_Written]:
        """Another writer took our cursors: store the entries again under fresh ones, then take
        the first copies out (a rewrite that loses nothing appended meanwhile).

        The fresh copies are appended like any append, with the same short window; a writer that
        takes those too makes another round. Until the rewrite, the entries are in the file
        twice, the first copy under the shared cursor; a crash there leaves them so, never lost.
        """
        superseded = [w.entry for w in written]
        current = written
        for _ in range(_RENUMBER_ATTEMPTS):
            # The writer that took our cursor is appending right now, and its next line may be
            # allocated already: storing ours again at once would take that cursor too (a race
            # in lockstep that used up every attempt under load). Its line lands first.
            time.sleep(_SETTLE_SECONDS)
            again = self._write_new([(w.entry.content, w.entry.session_key, w.entry.timestamp) for w in current])
            self._note(
                f"another writer took cursor {current[0].entry.cursor} of {layout.HISTORY} at the same moment "
                f"(it does not take {layout.HISTORY_LOCK}); the entry is stored again as {again[0].entry.cursor}"
            )
            current = again
            if not self._taken(current, beside_foreign=True):
                break
            superseded += [w.entry for w in current]
        else:
            superseded = superseded[: -len(current)]  # the last copies stay, shared cursor or not
        with self._snapshot() as snap:
            left = [e.to_json_line() for e in superseded]
            kept: list[str] = []
            for line in snap.lines:
                bare = line.raw.rstrip("\r")
                if bare in left:
                    left.remove(bare)
                    continue
                if not line.is_blank:
                    kept.append(line.raw)
            self._rewrite_locked(snap, raw_bytes(kept))
        return current
