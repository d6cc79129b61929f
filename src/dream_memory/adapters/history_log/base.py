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

import abc
import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from dream_memory.adapters import fsutil, locks
from dream_memory.adapters.history_log.lockless import LocklessWriter
from dream_memory.adapters.history_log.writers import open_for_writing_elsewhere
from dream_memory.core import layout
from dream_memory.core.history import (
    HistoryEntry,
    LineProblem,
    ParsedLine,
    max_cursor_bound,
    next_cursor,
    parse_cursor_text,
    parse_lines,
    split_physical_lines,
)
from dream_memory.core.late_entries import missed
from dream_memory.core.ports import Clock
from dream_memory.errors import DreamError, HistoryError

DEFAULT_LOCK_TIMEOUT = 10.0
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
    note: str | None = None  # why it did not run, or what it could not vouch for (for the report)


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
    """The lines of history bytes, parsed. A line holding bytes that are not UTF-8 (another
    program's, or a torn write) is parsed from its text with those bytes replaced, but keeps its
    exact bytes in ``raw`` (as surrogate escapes): a compaction or a rewrite moves it byte for
    byte (``raw_bytes``), never the replaced text; a byte order mark opening ``data`` (core.history
    ``parse_lines``) is in neither."""
    try:
        return list(parse_lines(split_physical_lines(data.decode("utf-8"))))
    except UnicodeDecodeError:
        pass
    lines = list(parse_lines(split_physical_lines(data.decode("utf-8", errors="replace"))))
    # Newlines are ASCII and never part of an invalid sequence, so both decodings split alike.
    exact = split_physical_lines(data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff"))
    return [replace(line, raw=raw) for line, raw in zip(lines, exact, strict=True)]


def raw_bytes(raws: Iterable[str]) -> bytes:
    """Lines as ``_lines_of`` keeps them (``raw``), written back one per line, byte for byte."""
    return "".join(raw + "\n" for raw in raws).encode("utf-8", errors="surrogateescape")


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


class LogBase(abc.ABC):
    """The workspace's history.jsonl: its paths, the lock, reading, cursor allocation and
    rewriting beside writers that take no lock. ``HistoryLog`` (log.py) adds the rest."""

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
        self.left_path = workspace / layout.HISTORY_LEFT
        self.archive_dir = workspace / layout.ARCHIVE_DIR
        self.legacy_path = workspace / layout.LEGACY_HISTORY
        self.marker_path = workspace / layout.MIGRATION_MARKER
        self.clock = clock
        self.lock_timeout = lock_timeout
        self._on_problem = on_problem
        self._reported = _Reported()
        # What a rewrite under the last hold of the lock could not vouch for (a writer that kept
        # the replaced file open): also given to the caller's report, not only to on_problem.
        self.rewrite_notes: list[str] = []
        self._lock_depth = 0
        self._lock_owner: int | None = None  # the thread holding the lock through this object
        # A writer without the lock, proven by a line that landed while we held it or by a file
        # changed between two holds: appending.py waits for such a writer's next line.
        self._lockless = LocklessWriter()
        self._unrecorded_hold = False  # this hold found history.jsonl with no record of a last holder

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

        def busy() -> HistoryError:
            return HistoryError(
                f"{layout.HISTORY_LOCK} is held by another writer for more than {self.lock_timeout:g} s",
                hint="another append, consolidation or compaction is running; try again",
            )

        with locks.exclusive(self.lock_path, timeout=self.lock_timeout, busy=busy, doing="take the history lock"):
            self._lock_depth, self._lock_owner = 1, threading.get_ident()
            self.rewrite_notes.clear()  # each hold's own: the caller reads them once it is released
            try:
                self._check_left_as_recorded()
                yield
            finally:
                self._lock_depth, self._lock_owner = 0, None
                self._record_left()

    # A record of how the last holder of the lock left history.jsonl (its inode and size) lets
    # the next holder see a writer without the lock (nanobot) before that writer's line shares a
    # cursor with ours: only such a writer can change the file between two holds. A hint, not
    # data: written without fsync under the lock, and a record that is missing or unreadable
    # proves nothing (the stat heuristic of appending.py still applies).

    def _history_state(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_size

    def _check_left_as_recorded(self) -> None:
        try:
            # Bytes, not text: no codec is looked up (a user who cannot read the interpreter's
            # encodings package got "unknown encoding: ascii" from read_text).
            fields = fsutil.read_own(self.left_path).split()
            recorded = (int(fields[0]), int(fields[1]))
        except (OSError, ValueError, IndexError):
            recorded = None
        # Never recorded (a workspace only nanobot or an older version wrote) proves nothing, but
        # the first append looks once more after a moment (appending.py): a writer that is
        # between its read and its first write cannot be seen any other way.
        now = self._history_state()
        self._unrecorded_hold = recorded is None and now is not None
        if recorded is not None and now is not None and recorded != now:
            self._lockless.saw()

    def _record_left(self) -> None:
        state = self._history_state()
        with contextlib.suppress(OSError):
            if state is None:
                self.left_path.unlink(missing_ok=True)
                return
            fd = os.open(self.left_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | fsutil.NOFOLLOW, 0o666)
            try:
                os.write(fd, b"%d %d\n" % state)
            finally:
                os.close(fd)

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

    def _read_raw_lines(self, path: Path) -> list[str]:
        """A file's lines with their exact bytes (see ``_lines_of``), to compare with ``raw``."""
        return self._read_lines(path, errors="surrogateescape")

    def _read_lines(self, path: Path, *, errors: str = "replace") -> list[str]:
        try:
            data = fsutil.read_own(path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _read_error(exc, path) from exc
        # Without the byte order mark an editor may put at byte 0, as parse_lines reads line 1.
        return split_physical_lines(data.decode("utf-8", errors=errors).removeprefix("\ufeff"))

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

    def pending(self, cursor: int, dreamt_late: Collection[str], scan: HistoryScan | None = None) -> list[HistoryEntry]:
        """What Dream has still to dream, in cursor order: the entries after ``cursor``, and the
        late ones at or below it that ``dreamt_late`` (the state's record) does not hold
        (core/late_entries.py)."""
        scan = scan or self.scan()
        return _unique_in_cursor_order(missed(scan.entries, cursor, dreamt_late) + self.entries_after(cursor, scan))

    def _cursor_bound(self, path: Path) -> int:
        try:
            return max_cursor_bound(fsutil.read_own(path))
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise _read_error(exc, path) from exc

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

    @abc.abstractmethod
    def _recover_locked(self) -> MigrationResult | None:
        """Finish what a killed writer left half done (HistoryLog, in log.py)."""

    @abc.abstractmethod
    def _keep_replaced(self, fd: int, offset: int) -> Path | None:
        """A durable name for the file a rewrite is about to replace (replaced.py)."""

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
            fd = os.open(self.path, os.O_RDONLY | fsutil.NOFOLLOW)
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
        opened it just before) are moved over once that writer has closed it. Until then the old
        file keeps a name (replaced.py): a kill during the drain leaves them on disk.
        """
        if snap.fd is None:
            fsutil.atomic_write(self.path, body, site="history.rewrite")
            return
        late = _read_from(snap.fd, snap.end)
        complete = late.rfind(b"\n") + 1  # a line still being written is moved with the rest
        kept = self._keep_replaced(snap.fd, snap.end + complete)
        try:
            fsutil.atomic_write(self.path, body + late[:complete], site="history.rewrite")
        except BaseException:
            if kept is not None:  # nothing was replaced: the old file is history.jsonl still
                with contextlib.suppress(OSError):
                    kept.unlink()
            raise
        self._drain(snap.fd, snap.end + complete)
        if kept is not None:
            fsutil.remove(kept, site="history.replaced")

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
            busy = open_for_writing_elsewhere(fd)
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
                message = (
                    f"a writer has kept the replaced {layout.HISTORY} open for more than {DRAIN_LIMIT_SECONDS:g} s; "
                    "what it writes there from now on cannot be seen (an appender must open the file for each append)"
                )
                self.rewrite_notes.append(message)
                self._note(message)
                return
            time.sleep(0.001)

    def _carry(self, data: bytes) -> None:
        if not data:
            return
        if not fsutil.ends_with_newline(self.path):
            data = b"\n" + data
        fsutil.append_bytes(self.path, data, site="history.carry")


def _read_error(exc: OSError, path: Path) -> DreamError:
    """A history file that cannot be read. A symbolic link in its place is the workspace's to fix
    (exit 2, with the fix); anything else is the history's error."""
    if exc.errno == errno.ELOOP:
        return fsutil.os_error(exc, "read", path)
    return HistoryError(f"cannot read {path}: {fsutil.describe_os_error(exc)}")
