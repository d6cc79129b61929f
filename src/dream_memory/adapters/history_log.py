"""memory/history.jsonl on disk: locked appends, tolerant reads, compaction into memory/archive/,
and the one-time migration of a legacy memory/HISTORY.md.

Every mutation of history.jsonl, its archive and ``.cursor`` happens under ``memory/.history.lock``
(a cross-process file lock), so an append can never land in the middle of a compaction's rewrite.
Each multi-step change leaves a marker file first, so a crash at any point is completed by the
next writing command instead of leaving duplicates or an orphaned legacy file.

Writers that never take that lock exist: nanobot's ``MemoryStore.append_history`` serializes its
appends with an in-process lock only. So a rewrite keeps the old file open and, after renaming
the new one over it, moves whatever such a writer appended to the old file into the new one
(``_rewrite_locked``); and an append checks, after writing, that no such writer took one of its
cursors at the same moment (``append_many``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import filelock

from dream_memory.adapters import fsutil
from dream_memory.core import jsontext, layout
from dream_memory.core.history import (
    HistoryEntry,
    LineProblem,
    ParsedLine,
    format_timestamp,
    max_cursor_bound,
    next_cursor,
    parse_cursor_text,
    parse_legacy_history,
    parse_lines,
    plan_compaction,
    split_physical_lines,
)
from dream_memory.core.ports import Clock
from dream_memory.errors import HistoryError, InputError

DEFAULT_LOCK_TIMEOUT = 10.0
_LOCK_POLL_SECONDS = 0.005
_PENDING_ARCHIVE = ".pending.json"
# Prefixes of the temp files of atomic rewrites of the files only this lock's holder writes
# (fsutil names a temp ".<name>.<random>.tmp"); a writer killed mid-rewrite leaves one behind.
_LOCKED_TEMPS = (".history.jsonl.", "..cursor.", "..migration.json.")
_ARCHIVE_TEMPS = (f".{_PENDING_ARCHIVE}.",)
# After a rewrite's rename, how long a writer that still has the replaced file open may take to
# finish before its bytes are moved over anyway (and reported): a lock-free append takes
# microseconds, so this is only reached by a writer that keeps the file open for good.
DRAIN_LIMIT_SECONDS = 2.0
# Path lookups that began before the rename may still open the replaced file; they have done so
# well within this.
_DRAIN_GRACE_SECONDS = 0.005
# Without kernel leases (another filesystem or OS): the replaced file counts as settled once it
# stopped growing for this long.
_DRAIN_QUIET_SECONDS = 0.05
# How often an append renumbers its entries when another writer keeps taking the same cursors
# (each time after _SETTLE_SECONDS; a writer stopped between its read and its write for most of
# its time, as under heavy load, took 4 in a row).
_RENUMBER_ATTEMPTS = 10
# A writer without our lock that wrote this recently may be between reading the file and writing
# its line (a few microseconds, unless the scheduler stops it there: under load, for
# milliseconds). An append beside it looks again this much later for a cursor it took meanwhile.
_FOREIGN_RECENT_NS = 200_000_000
_SETTLE_SECONDS = 0.03


@dataclass(frozen=True)
class HistoryScan:
    lines: tuple[ParsedLine, ...]

    @property
    def entries(self) -> list[HistoryEntry]:
        return [e for line in self.lines for e in line.entries]

    @property
    def problems(self) -> list[LineProblem]:
        return [line.problem for line in self.lines if line.problem is not None]

    @property
    def malformed(self) -> int:
        """Lines skipped because they hold no readable entry (malformed or foreign)."""
        return sum(1 for p in self.problems if p.kind in ("malformed", "foreign"))

    @property
    def max_cursor(self) -> int:
        return max((e.cursor for e in self.entries), default=0)


@dataclass(frozen=True)
class CompactionResult:
    archived: int = 0
    archive_files: tuple[str, ...] = ()
    kept: int = 0


@dataclass(frozen=True)
class MigrationResult:
    entries: int
    first_cursor: int
    last_cursor: int
    mode: str  # "initial" (history was empty: already consolidated) or "append" (new, undreamt)
    backup: str
    resumed: bool = False


@dataclass
class _Reported:
    # (source, kind, raw line): a line is reported once per run even after a compaction has
    # moved it to another line number.
    keys: set[tuple[str, str, str]] = field(default_factory=set)


def _unique_in_cursor_order(entries: Iterator[HistoryEntry] | list[HistoryEntry]) -> list[HistoryEntry]:
    """Entries sorted by cursor (stable), each distinct entry once.

    An entry both archived and still in history.jsonl (a compaction killed mid-way) is one
    entry; two different entries sharing a cursor (real files have them) are both kept.
    """
    seen: set[HistoryEntry] = set()
    unique: list[HistoryEntry] = []
    for entry in entries:
        if entry not in seen:
            seen.add(entry)
            unique.append(entry)
    return sorted(unique, key=lambda e: e.cursor)


def _content_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_from(fd: int, pos: int) -> bytes:
    """Everything in the file behind ``fd`` from byte ``pos`` to its current end."""
    chunks: list[bytes] = []
    while True:
        chunk = os.pread(fd, 1 << 20, pos)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        pos += len(chunk)


def _lines_of(data: bytes) -> list[ParsedLine]:
    return list(parse_lines(split_physical_lines(data.decode("utf-8", errors="replace"))))


_F_SETLEASE = getattr(fcntl, "F_SETLEASE", None)


def _open_for_writing_elsewhere(fd: int) -> bool | None:
    """Whether some process has the file behind ``fd`` open for writing; None when this system
    cannot tell (no kernel leases there).

    Linux grants a read lease only on a file that nobody has open for writing; it is given back
    at once. Asked only of a file already renamed away, which nobody can open by name any more.
    """
    if _F_SETLEASE is None:
        return None
    try:
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno in (errno.EAGAIN, errno.EBUSY) else None
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
    return False


@dataclass(frozen=True)
class _Written:
    entry: HistoryEntry
    offset: int  # the size of history.jsonl that allocation read before this entry was written


@dataclass
class _Snapshot:
    """history.jsonl as one read saw it: its complete lines, and the old file kept open so that
    what other writers append to it afterwards can still be found."""

    fd: int | None  # None: there was no file
    data: bytes  # complete lines only (an unterminated tail may be a write in progress)
    end: int  # where in the old file ``data`` ends

    @property
    def lines(self) -> list[ParsedLine]:
        return _lines_of(self.data)


class HistoryLog:
    """The workspace's history.jsonl, its cursors and its archive."""

    def __init__(
        self,
        workspace: Path,
        *,
        clock: Clock,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.path = workspace / layout.HISTORY
        self.cursor_path = workspace / layout.CURSOR
        self.dream_cursor_path = workspace / layout.DREAM_CURSOR
        self.lock_path = workspace / layout.HISTORY_LOCK
        self.archive_dir = workspace / layout.ARCHIVE_DIR
        self.legacy_path = workspace / layout.LEGACY_HISTORY
        self.marker_path = workspace / layout.MIGRATION_MARKER
        self.clock = clock
        self.lock_timeout = lock_timeout
        self._on_problem = on_problem
        self._reported = _Reported()
        self._lock_depth = 0
        self._lock_owner: int | None = None  # the thread holding the lock through this object
        self._left: tuple[int, int, int] | None = None  # history.jsonl (inode, size, mtime) after our last append
        self._foreign_recent = False  # whether someone else wrote history.jsonl just before this append

    # --- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold memory/.history.lock for the block, waiting at most ``lock_timeout`` seconds.

        Re-entrant for the thread holding it through this object: a caller that already holds it
        (to read and append as one step, say) may call ``append`` inside without waiting on
        itself; another thread waits like another process.
        """
        if self._lock_depth and self._lock_owner == threading.get_ident():
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        # Holds last milliseconds; filelock's default 50 ms poll would leave the lock idle
        # most of the time while several appenders wait for it.
        lock = filelock.FileLock(str(self.lock_path), timeout=self.lock_timeout, poll_interval=_LOCK_POLL_SECONDS)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise HistoryError(
                f"{layout.HISTORY_LOCK} is held by another writer for more than {self.lock_timeout:g} s",
                hint="another append, consolidation or compaction is running; try again",
            ) from None
        except OSError as exc:  # a read-only workspace, a folder where the lock file belongs
            raise fsutil.os_error(exc, "take the history lock", self.lock_path) from exc
        self._lock_depth, self._lock_owner = 1, threading.get_ident()
        try:
            yield
        finally:
            self._lock_depth, self._lock_owner = 0, None
            lock.release()

    # --- reading -----------------------------------------------------------------------------

    def _report(self, lines: Sequence[ParsedLine], source: str) -> None:
        if self._on_problem is None:
            return
        for line in lines:
            problem = line.problem
            if problem is None:
                continue
            key = (source, problem.kind, line.raw)
            if key not in self._reported.keys:
                self._reported.keys.add(key)
                self._on_problem(problem.describe(source))

    def _read_lines(self, path: Path) -> list[str]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise HistoryError(f"cannot read {path}: {fsutil.describe_os_error(exc)}") from exc
        return split_physical_lines(data.decode("utf-8", errors="replace"))

    def scan(self, *, report: bool = True) -> HistoryScan:
        scan = HistoryScan(tuple(parse_lines(self._read_lines(self.path))))
        if report:
            self._report(scan.lines, layout.HISTORY)
        return scan

    def read_counter(self) -> int | None:
        text = fsutil.read_text(self.cursor_path)
        return None if text is None else parse_cursor_text(text)

    def read_dream_cursor(self) -> int | None:
        text = fsutil.read_text(self.dream_cursor_path)
        return None if text is None else parse_cursor_text(text)

    def archive_files(self) -> list[Path]:
        if not self.archive_dir.is_dir():
            return []
        return sorted(p for p in self.archive_dir.glob("history-*.jsonl") if p.is_file())

    def archive_entries(self) -> list[HistoryEntry]:
        """Every entry in memory/archive/, in cursor order."""
        found: list[HistoryEntry] = []
        for path in self.archive_files():
            lines = list(parse_lines(self._read_lines(path)))
            self._report(lines, f"{layout.ARCHIVE_DIR}/{path.name}")
            found.extend(e for line in lines for e in line.entries)
        return _unique_in_cursor_order(found)

    def entries_after(self, cursor: int, scan: HistoryScan | None = None) -> list[HistoryEntry]:
        """Entries with a cursor above ``cursor``, in cursor order, reading the archive when
        compaction has moved part of that range out of history.jsonl (for ``--replay``)."""
        scan = scan or self.scan()
        entries = scan.entries
        # The archive only matters when it holds a cursor above ``cursor``; its bound is cheap.
        # (Not "when cursor is below the file's first cursor": a malformed line that compaction
        # must leave in place can hold a low cursor while the range after it was archived.)
        if any(self._cursor_bound(path) > cursor for path in self.archive_files()):
            entries = self.archive_entries() + entries
        return _unique_in_cursor_order([e for e in entries if e.cursor > cursor])

    def _cursor_bound(self, path: Path) -> int:
        try:
            return max_cursor_bound(path.read_bytes())
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise HistoryError(f"cannot read {path}: {fsutil.describe_os_error(exc)}") from exc

    def _allocate_from(self, data: bytes | None = None, count: int = 1) -> int:
        """The next free cursor. Must be called under the lock.

        Above every cursor in the file whatever its order (so a stale, missing or corrupt
        ``.cursor`` cannot lead to a duplicate), the counter and ``.dream_cursor``. Without a
        counter, also above the archive: a file emptied by hand leaves only it. ``data``: the
        file's bytes when the caller has just read them.
        """
        counter = self.read_counter()
        seen = [self._cursor_bound(self.path) if data is None else max_cursor_bound(data)]
        if counter is None:
            seen += [self._cursor_bound(path) for path in self.archive_files()]
        return next_cursor(counter, self.read_dream_cursor(), seen, count)

    # --- crash recovery ------------------------------------------------------------------------

    def _recover_locked(self) -> MigrationResult | None:
        """Finish what a killed writer left half done. Runs under the lock before every change,
        so the next writing command of any kind leaves no duplicate, orphan or temp file."""
        if (self.archive_dir / _PENDING_ARCHIVE).exists():
            self._finish_pending_archive()
        # One listing per folder: this runs on every append, under the lock.
        for folder, prefixes in ((self.path.parent, _LOCKED_TEMPS), (self.archive_dir, _ARCHIVE_TEMPS)):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            for name in names:
                if name.endswith(".tmp") and name.startswith(prefixes):
                    fsutil.remove(folder / name, site="temp.cleanup")
        marker = self._read_marker()
        return None if marker is None else self._resume_migration(marker)

    # --- appending ---------------------------------------------------------------------------

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
        same cursor, and ``_taken_meanwhile`` finds it if one did.
        """
        self._foreign_recent = self._written_by_another_lately()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise HistoryError(f"cannot read {layout.HISTORY}: {fsutil.describe_os_error(exc)}") from exc
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
            fsutil.atomic_write(self.cursor_path, f"{entries[-1].cursor}\n", site="cursor.write")
        except OSError as exc:
            # The entries are stored: failing now would make a caller append them twice. The
            # counter is only a floor (allocation reads the file too), so a stale one is safe.
            self._note(f"{layout.CURSOR} was not updated ({fsutil.describe_os_error(exc)}); the entry is stored")
        return [_Written(e, len(data)) for e in entries]

    def _written_by_another_lately(self) -> bool:
        """Whether history.jsonl changed in the last moments, and not by this object's last append
        (the size too: two writes within one tick of the file system's clock share an mtime)."""
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
        stopped it before its write: seen under load beside nanobot's ``append_history``)."""
        if self._taken_meanwhile(written):
            return True
        if not beside_foreign:
            return False
        time.sleep(_SETTLE_SECONDS)
        return self._taken_meanwhile(written)

    def _taken_meanwhile(self, written: Sequence[_Written]) -> bool:
        """Whether another writer stored an entry under one of our new cursors while we wrote
        them (it read the file just before our line landed). Only bytes after what allocation
        read can hold one."""
        if not written:
            return False
        ours = {w.entry.to_json_line() for w in written}
        wanted = {w.entry.cursor for w in written}
        since = min(w.offset for w in written)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size < since:
                since = 0  # replaced meanwhile (a foreign compaction): look at all of it
            fresh = _read_from(fd, since)
        finally:
            os.close(fd)
        return any(
            e.cursor in wanted for line in _lines_of(fresh) if line.raw.rstrip("\r") not in ours for e in line.entries
        )

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
            self._rewrite_locked(snap, "".join(raw + "\n" for raw in kept).encode("utf-8"))
        return current

    def _truncate_to(self, size: int | None) -> None:
        with contextlib.suppress(OSError):
            if size is None:
                self.path.unlink()
            else:
                os.truncate(self.path, size)

    def _note(self, message: str) -> None:
        if self._on_problem is not None:
            self._on_problem(message)

    # --- rewriting beside writers that take no lock ---------------------------------------------

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[_Snapshot]:
        """history.jsonl read once, its old file kept open for ``_rewrite_locked``."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            yield _Snapshot(None, b"", 0)
            return
        try:
            data = _read_from(fd, 0)
            end = data.rfind(b"\n") + 1
            yield _Snapshot(fd, data[:end], end)
        finally:
            os.close(fd)

    def _rewrite_locked(self, snap: _Snapshot, body: bytes) -> None:
        """Replace history.jsonl with ``body`` (what the snapshot's lines become), keeping every
        line another writer appended after the snapshot was read. Under the lock.

        Our own appenders wait for the lock; a writer without it appends to whichever file the
        name pointed at when it opened it. Lines that reached the old file before the rename go
        into the new one with it; lines that reach the old file after the rename (a writer that
        opened it just before) are moved over once that writer has closed it.
        """
        if snap.fd is None:
            fsutil.atomic_write(self.path, body, site="history.rewrite")
            return
        late = _read_from(snap.fd, snap.end)
        complete = late.rfind(b"\n") + 1  # a line still being written is moved with the rest
        fsutil.atomic_write(self.path, body + late[:complete], site="history.rewrite")
        self._drain(snap.fd, snap.end + complete)

    def _drain(self, fd: int, pos: int) -> None:
        """Move what lands in the replaced file (behind ``fd``, from ``pos``) into history.jsonl
        until nobody has it open for writing any more."""
        started = time.monotonic()
        time.sleep(_DRAIN_GRACE_SECONDS)
        pending = b""
        last_growth = time.monotonic()
        while True:
            chunk = _read_from(fd, pos)
            pos += len(chunk)
            now = time.monotonic()
            if chunk:
                pending += chunk
                last_growth = now
            busy = _open_for_writing_elsewhere(fd)
            if busy is False or (busy is None and now - last_growth >= _DRAIN_QUIET_SECONDS):
                # A writer that closed just now may have written its last bytes after the read.
                self._carry(pending + _read_from(fd, pos))
                return
            complete = pending.rfind(b"\n") + 1
            if complete:
                self._carry(pending[:complete])
                pending = pending[complete:]
            if now - started >= DRAIN_LIMIT_SECONDS:
                self._carry(pending)
                self._note(
                    f"a writer has kept the replaced {layout.HISTORY} open for more than {DRAIN_LIMIT_SECONDS:g} s; "
                    "what it writes there from now on cannot be seen (an appender must open the file for each append)"
                )
                return
            time.sleep(0.001)

    def _carry(self, data: bytes) -> None:
        if not data:
            return
        if not fsutil.ends_with_newline(self.path):
            data = b"\n" + data
        fsutil.append_bytes(self.path, data, site="history.carry")

    # --- compaction --------------------------------------------------------------------------

    def _archive_path(self, month: str) -> Path:
        return self.archive_dir / f"history-{month}.jsonl"

    def _finish_pending_archive(self) -> None:
        """Complete a compaction a crash interrupted after its marker was written.

        Lines already appended to the archive leave history.jsonl; the others stay and the next
        compaction moves them. Lines are matched by their exact text, so no entry is dropped
        that the archive does not hold, and none ends up in both places.
        """
        marker = self.archive_dir / _PENDING_ARCHIVE
        text = fsutil.read_text(marker)
        if text is None:
            return
        try:
            data = jsontext.loads(text)
            pending = {int(c) for c in data["cursors"]}
            names = [str(n) for n in data.get("files", [])]
        except (ValueError, KeyError, TypeError):
            pending, names = set(), []
        files = [self.archive_dir / n for n in names] if names else self.archive_files()
        archived = {raw for path in files for raw in self._read_lines(path)}
        with self._snapshot() as snap:
            lines = snap.lines
            keep = [
                line.raw
                for line in lines
                if not line.is_blank
                and not (line.entries and line.raw in archived and all(e.cursor in pending for e in line.entries))
            ]
            if len(keep) != len(lines):
                self._rewrite_locked(snap, "".join(raw + "\n" for raw in keep).encode("utf-8"))
        fsutil.remove(marker, site="archive.marker")

    def compact(self, *, dream_cursor: int, max_entries: int) -> CompactionResult:
        """Move the oldest consumed entries to memory/archive/ until at most ``max_entries`` stay.

        Entries above ``dream_cursor`` never move; malformed and foreign lines never move.
        The marker written first names what is moving, so a crash at any step is completed by
        the next writer (``_finish_pending_archive``) without loss or duplicate.
        """
        with self.lock():
            try:
                self._recover_locked()
                with self._snapshot() as snap:
                    lines = snap.lines
                    total = sum(len(line.entries) for line in lines)
                    plan = plan_compaction(lines, dream_cursor=dream_cursor, max_entries=max_entries)
                    if not plan.changes_anything:
                        return CompactionResult(kept=total)
                    months = sorted(plan.archive)
                    marker = self.archive_dir / _PENDING_ARCHIVE
                    fsutil.atomic_write(
                        marker,
                        json.dumps(
                            {
                                "cursors": list(plan.archived_cursors),
                                "files": [self._archive_path(m).name for m in months],
                            }
                        ),
                        site="archive.marker",
                    )
                    written: list[str] = []
                    for month in months:
                        path = self._archive_path(month)
                        # Never glue onto a line a killed compaction left unterminated.
                        prefix = "" if fsutil.ends_with_newline(path) else "\n"
                        data = prefix + "".join(raw + "\n" for raw in plan.archive[month])
                        fsutil.append_bytes(path, data.encode("utf-8"), site="archive.append")
                        written.append(f"{layout.ARCHIVE_DIR}/{path.name}")
                    self._rewrite_locked(snap, "".join(raw + "\n" for raw in plan.keep).encode("utf-8"))
                    fsutil.remove(marker, site="archive.marker")
            except OSError as exc:
                raise HistoryError(f"compaction of {layout.HISTORY} failed: {fsutil.describe_os_error(exc)}") from exc
            return CompactionResult(
                archived=len(plan.archived_cursors),
                archive_files=tuple(written),
                kept=total - len(plan.archived_cursors),
            )

    # --- legacy HISTORY.md ---------------------------------------------------------------------

    def legacy_pending(self) -> bool:
        return self.legacy_path.is_file() or self.marker_path.is_file()

    def _backup_name(self) -> Path:
        candidate = self.legacy_path.with_name("HISTORY.md.bak")
        n = 2
        while candidate.exists():
            candidate = self.legacy_path.with_name(f"HISTORY.md.bak.{n}")
            n += 1
        return candidate

    def migrate_legacy(self) -> MigrationResult | None:
        """Fold memory/HISTORY.md into history.jsonl (CONTRACT section 3); None when there is none.

        Into an empty history the entries arrive already consolidated (both cursors at the last
        one); beside a non-empty history they arrive as new, undreamt entries.
        """
        with self.lock():
            try:
                resumed = self._recover_locked()
                if not self.legacy_path.is_file():
                    return resumed
                # Also after a resumed migration: the agent may have written a new HISTORY.md.
                return self._start_migration()
            except OSError as exc:
                reason = fsutil.describe_os_error(exc)
                raise HistoryError(f"migration of {layout.LEGACY_HISTORY} failed: {reason}") from exc

    def _read_marker(self) -> dict[str, object] | None:
        text = fsutil.read_text(self.marker_path)
        if text is None:
            return None
        try:
            value = jsontext.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _start_migration(self) -> MigrationResult | None:
        data = self.legacy_path.read_bytes()
        legacy = parse_legacy_history(data.decode("utf-8", errors="replace"))
        # Undated text was written before the file was last changed: its modification time (as
        # nanobot's own migration has it), in local time like every timestamp we write.
        undated = format_timestamp(datetime.fromtimestamp(self.legacy_path.stat().st_mtime))
        with self._snapshot() as snap:
            lines = snap.lines
            # A file without a single entry of ours (missing, empty, or only foreign lines) is the
            # "missing or empty" case: the old design had consolidated what HISTORY.md holds.
            mode = "append" if any(line.entries for line in lines) else "initial"
            first = self._allocate_from(snap.data, max(len(legacy), 1))
            entries = [
                HistoryEntry(cursor=first + i, timestamp=e.timestamp or undated, content=e.content)
                for i, e in enumerate(legacy)
            ]
            marker = {
                "source_sha256": hashlib.sha256(data).hexdigest(),
                "source_bytes": len(data),
                "mode": mode,
                "first": first,
                "last": first + len(entries) - 1,
                "entries": len(entries),
                "last_sha256": _content_digest(entries[-1].content) if entries else "",
            }
            fsutil.atomic_write(self.marker_path, json.dumps(marker), site="migration.marker")
            if entries:
                kept = [line.raw for line in lines if not line.is_blank]
                body = "".join(raw + "\n" for raw in kept) + "".join(e.to_json_line() + "\n" for e in entries)
                self._rewrite_locked(snap, body.encode("utf-8"))
        return self._finish_migration(marker, resumed=False)

    def _resume_migration(self, marker: dict[str, object]) -> MigrationResult | None:
        last = int(str(marker.get("last", 0)))
        entries = int(str(marker.get("entries", 0)))
        written = any(
            e.cursor == last and _content_digest(e.content) == marker.get("last_sha256")
            for e in self.scan(report=False).entries
        )
        if self.legacy_path.is_file() and entries and not written:
            # The crash came before history.jsonl was rewritten: start over from the legacy file.
            fsutil.remove(self.marker_path, site="migration.marker")
            return self._start_migration()
        return self._finish_migration(marker, resumed=True)

    def _finish_migration(self, marker: dict[str, object], *, resumed: bool) -> MigrationResult:
        first = int(str(marker["first"]))
        last = int(str(marker["last"]))
        entries = int(str(marker["entries"]))
        mode = str(marker["mode"])
        if entries:
            counter = self.read_counter() or 0
            if counter < last:
                fsutil.atomic_write(self.cursor_path, f"{last}\n", site="cursor.write")
            if mode == "initial" and (self.read_dream_cursor() or 0) < last:
                fsutil.atomic_write(self.dream_cursor_path, f"{last}\n", site="dream_cursor.write")
        backup = ""
        if self.legacy_path.is_file():
            data = self.legacy_path.read_bytes()
            source = str(marker.get("source_sha256", ""))
            size = int(str(marker.get("source_bytes", len(data))))
            if not resumed or hashlib.sha256(data).hexdigest() == source:
                target = self._backup_name()
                fsutil.rename(self.legacy_path, target, site="migration.rename")
                backup = f"memory/{target.name}"
            elif len(data) > size and hashlib.sha256(data[:size]).hexdigest() == source:
                # The agent appended to HISTORY.md between the crash and now: keep what was
                # migrated as the backup and leave only the new tail, migrated next as new entries.
                target = self._backup_name()
                fsutil.atomic_write(target, data[:size], site="migration.backup")
                fsutil.atomic_write(self.legacy_path, data[size:], site="migration.tail")
                backup = f"memory/{target.name}"
            # Any other HISTORY.md is not the one migrated: it gets a migration of its own.
        fsutil.remove(self.marker_path, site="migration.marker")
        return MigrationResult(
            entries=entries, first_cursor=first, last_cursor=last, mode=mode, backup=backup, resumed=resumed
        )
