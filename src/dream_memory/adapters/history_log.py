"""memory/history.jsonl on disk: locked appends, tolerant reads, compaction into memory/archive/,
and the one-time migration of a legacy memory/HISTORY.md.

Every mutation of history.jsonl, its archive and ``.cursor`` happens under ``memory/.history.lock``
(a cross-process file lock), so an append can never land in the middle of a compaction's rewrite.
Each multi-step change leaves a marker file first, so a crash at any point is completed by the
next writing command instead of leaving duplicates or an orphaned legacy file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import filelock

from dream_memory.adapters import fsutil
from dream_memory.core import layout
from dream_memory.core.history import (
    HistoryEntry,
    LineProblem,
    ParsedLine,
    format_timestamp,
    next_cursor,
    parse_cursor_text,
    parse_legacy_history,
    parse_line,
    parse_lines,
    plan_compaction,
    split_physical_lines,
)
from dream_memory.core.ports import Clock
from dream_memory.errors import HistoryError, InputError

DEFAULT_LOCK_TIMEOUT = 10.0
_TAIL_CHUNK = 64 * 1024
_PENDING_ARCHIVE = ".pending.json"


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
    keys: set[tuple[str, int, str]] = field(default_factory=set)


def _content_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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

    # --- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(self.lock_path), timeout=self.lock_timeout)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise HistoryError(
                f"{layout.HISTORY_LOCK} is held by another writer for more than {self.lock_timeout:g} s",
                hint="another append, consolidation or compaction is running; try again",
            ) from None
        try:
            yield
        finally:
            lock.release()

    # --- reading -----------------------------------------------------------------------------

    def _report(self, problems: Sequence[LineProblem], source: str) -> None:
        if self._on_problem is None:
            return
        for problem in problems:
            key = (source, problem.line_no, problem.kind)
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
            self._report(scan.problems, layout.HISTORY)
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
        seen: dict[int, HistoryEntry] = {}
        for path in self.archive_files():
            lines = list(parse_lines(self._read_lines(path)))
            self._report([ln.problem for ln in lines if ln.problem], f"{layout.ARCHIVE_DIR}/{path.name}")
            for line in lines:
                for entry in line.entries:
                    seen.setdefault(entry.cursor, entry)
        return [seen[c] for c in sorted(seen)]

    def entries_after(self, cursor: int, scan: HistoryScan | None = None) -> list[HistoryEntry]:
        """Entries with a cursor above ``cursor``, in cursor order, reading the archive when
        compaction has moved part of that range out of history.jsonl (for ``--replay``)."""
        scan = scan or self.scan()
        by_cursor: dict[int, HistoryEntry] = {}
        for entry in scan.entries:
            by_cursor.setdefault(entry.cursor, entry)
        first_in_file = min(by_cursor, default=None)
        if first_in_file is None or cursor + 1 < first_in_file:
            for entry in self.archive_entries():
                by_cursor.setdefault(entry.cursor, entry)
        return [by_cursor[c] for c in sorted(by_cursor) if c > cursor]

    def _tail_max_cursor(self) -> int | None:
        """The highest cursor among the last readable lines, reading backwards from the end."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return None
        with handle:
            position = handle.seek(0, os.SEEK_END)
            buffer = b""
            while position > 0:
                step = min(_TAIL_CHUNK, position)
                position -= step
                handle.seek(position)
                buffer = handle.read(step) + buffer
                raw_lines = buffer.split(b"\n")
                complete = raw_lines if position == 0 else raw_lines[1:]
                for raw in reversed(complete):
                    parsed = parse_line(raw.decode("utf-8", errors="replace"), 0)
                    if parsed.entries:
                        return max(e.cursor for e in parsed.entries)
                buffer = raw_lines[0] if position > 0 else b""
        return None

    def _allocate_from(self) -> int:
        """The next free cursor. Must be called under the lock."""
        counter = self.read_counter()
        dream_cursor = self.read_dream_cursor()
        if counter is None:
            seen = [self.scan(report=False).max_cursor]
        else:
            tail = self._tail_max_cursor()
            seen = [tail] if tail is not None else []
        return next_cursor(counter, dream_cursor, seen)

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
            first = self._allocate_from()
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
                fsutil.append_bytes(self.path, payload.encode("utf-8"), site="history.append")
                fsutil.atomic_write(self.cursor_path, f"{entries[-1].cursor}\n", site="cursor.write")
            except OSError as exc:
                raise HistoryError(f"cannot append to {layout.HISTORY}: {fsutil.describe_os_error(exc)}") from exc
            return entries

    # --- compaction --------------------------------------------------------------------------

    def _archive_path(self, month: str) -> Path:
        return self.archive_dir / f"history-{month}.jsonl"

    def _archived_cursors(self, path: Path) -> set[int]:
        return {e.cursor for line in parse_lines(self._read_lines(path)) for e in line.entries}

    def _finish_pending_archive(self) -> None:
        """Complete a compaction a crash interrupted between archiving and rewriting."""
        marker = self.archive_dir / _PENDING_ARCHIVE
        text = fsutil.read_text(marker)
        if text is None:
            return
        try:
            pending = set(json.loads(text)["cursors"])
        except (ValueError, KeyError, TypeError):
            pending = set()
        archived: set[int] = set()
        for path in self.archive_files():
            archived |= self._archived_cursors(path)
        done = pending & archived
        scan = self.scan(report=False)
        keep = [
            line.raw
            for line in scan.lines
            if not line.is_blank and not (line.entries and all(e.cursor in done for e in line.entries))
        ]
        if len(keep) != sum(1 for line in scan.lines if not line.is_blank):
            fsutil.atomic_write(self.path, "".join(raw + "\n" for raw in keep), site="history.rewrite")
        fsutil.remove(marker, site="archive.marker")

    def compact(self, *, dream_cursor: int, max_entries: int) -> CompactionResult:
        """Move the oldest consumed entries to memory/archive/ until at most ``max_entries`` stay.

        Entries above ``dream_cursor`` never move; malformed and foreign lines never move.
        """
        with self.lock():
            try:
                self._finish_pending_archive()
                scan = self.scan(report=False)
                plan = plan_compaction(scan.lines, dream_cursor=dream_cursor, max_entries=max_entries)
                if not plan.changes_anything:
                    return CompactionResult(kept=len(scan.entries))
                marker = self.archive_dir / _PENDING_ARCHIVE
                fsutil.atomic_write(marker, json.dumps({"cursors": list(plan.archived_cursors)}), site="archive.marker")
                written: list[str] = []
                for month, raws in sorted(plan.archive.items()):
                    path = self._archive_path(month)
                    already = self._archived_cursors(path)
                    fresh = [
                        raw for raw in raws if not all(e.cursor in already for e in parse_line(raw, 0).entries)
                    ]
                    if fresh:
                        prefix = "" if fsutil.ends_with_newline(path) else "\n"
                        data = prefix + "".join(raw + "\n" for raw in fresh)
                        fsutil.append_bytes(path, data.encode("utf-8"), site="archive.append")
                    written.append(f"{layout.ARCHIVE_DIR}/{path.name}")
                fsutil.atomic_write(self.path, "".join(raw + "\n" for raw in plan.keep), site="history.rewrite")
                fsutil.remove(marker, site="archive.marker")
            except OSError as exc:
                raise HistoryError(f"compaction of {layout.HISTORY} failed: {fsutil.describe_os_error(exc)}") from exc
            return CompactionResult(
                archived=len(plan.archived_cursors),
                archive_files=tuple(written),
                kept=len(scan.entries) - len(plan.archived_cursors),
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
                marker = self._read_marker()
                if marker is not None:
                    return self._resume_migration(marker)
                if not self.legacy_path.is_file():
                    return None
                return self._start_migration()
            except OSError as exc:
                raise HistoryError(f"migration of {layout.LEGACY_HISTORY} failed: {fsutil.describe_os_error(exc)}") from exc

    def _read_marker(self) -> dict[str, object] | None:
        text = fsutil.read_text(self.marker_path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _start_migration(self) -> MigrationResult | None:
        data = self.legacy_path.read_bytes()
        legacy = parse_legacy_history(data.decode("utf-8", errors="replace"))
        scan = self.scan(report=False)
        mode = "append" if scan.entries else "initial"
        first = next_cursor(self.read_counter(), self.read_dream_cursor(), [scan.max_cursor])
        now = format_timestamp(self.clock.now())
        timestamps = [e.timestamp for e in legacy]
        # An undated entry takes the next dated one's time (it was written before it), else now.
        following: str | None = None
        for i in range(len(timestamps) - 1, -1, -1):
            if timestamps[i] is None:
                timestamps[i] = following or now
            following = timestamps[i]
        entries = [
            HistoryEntry(cursor=first + i, timestamp=ts or now, content=e.content)
            for i, (e, ts) in enumerate(zip(legacy, timestamps, strict=True))
        ]
        marker = {
            "source_sha256": hashlib.sha256(data).hexdigest(),
            "mode": mode,
            "first": first,
            "last": first + len(entries) - 1,
            "entries": len(entries),
            "last_sha256": _content_digest(entries[-1].content) if entries else "",
        }
        fsutil.atomic_write(self.marker_path, json.dumps(marker), site="migration.marker")
        if entries:
            kept = [line.raw for line in scan.lines if not line.is_blank]
            body = "".join(raw + "\n" for raw in kept) + "".join(e.to_json_line() + "\n" for e in entries)
            fsutil.atomic_write(self.path, body, site="history.rewrite")
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
            target = self._backup_name()
            fsutil.rename(self.legacy_path, target, site="migration.rename")
            backup = f"memory/{target.name}"
        fsutil.remove(self.marker_path, site="migration.marker")
        return MigrationResult(
            entries=entries, first_cursor=first, last_cursor=last, mode=mode, backup=backup, resumed=resumed
        )
