"""Compaction: the oldest consumed entries move from history.jsonl to memory/archive/, with a marker
first so a crash at any step is completed by the next writer without loss or duplicate."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.base import _PENDING_ARCHIVE, CompactionResult, LogBase, raw_bytes
from dream_memory.adapters.history_log.writers import writers_gone
from dream_memory.core import jsontext, layout
from dream_memory.core.history import plan_compaction
from dream_memory.core.late_entries import compaction_horizon
from dream_memory.errors import HistoryError


class Compaction(LogBase):
    """HistoryLog's compaction into memory/archive/."""

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
        archived = {raw for path in files for raw in self._read_raw_lines(path)}
        with self._snapshot() as snap:
            lines = snap.lines
            keep = [
                line.raw
                for line in lines
                if not line.is_blank
                and not (line.entries and line.raw in archived and all(e.cursor in pending for e in line.entries))
            ]
            if len(keep) != len(lines):
                self._rewrite_locked(snap, raw_bytes(keep))
        fsutil.remove(marker, site="archive.marker")

    def compact(self, *, dream_cursor: int, max_entries: int, dreamt_late: Collection[str] = ()) -> CompactionResult:
        """Move the oldest consumed entries to memory/archive/ until at most ``max_entries`` stay.

        Entries above ``dream_cursor`` never move; malformed and foreign lines never move; nor
        does a late entry not yet dreamt (not in ``dreamt_late``), or any line from its cursor up
        (core/late_entries.py: they are what shows it late).
        The marker written first names what is moving, so a crash at any step is completed by
        the next writer (``_finish_pending_archive``) without loss or duplicate.
        """
        with self.lock():
            try:
                self._recover_locked()
                with self._snapshot() as snap:
                    lines = snap.lines
                    total = sum(len(line.entries) for line in lines)
                    horizon = compaction_horizon([e for line in lines for e in line.entries], dream_cursor, dreamt_late)
                    plan = plan_compaction(lines, dream_cursor=horizon, max_entries=max_entries)
                    if not plan.changes_anything:
                        return CompactionResult(kept=total)
                    if snap.fd is not None and not writers_gone(snap.fd):
                        # Replacing the file under a writer that keeps it open would leave what it
                        # writes later in the replaced file, which nobody reads: compaction can wait.
                        return CompactionResult(
                            kept=total,
                            note=f"compaction skipped: another program keeps {layout.HISTORY} open for writing; "
                            "the next run compacts it (nothing was moved)",
                        )
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
                        data = prefix.encode() + raw_bytes(plan.archive[month])
                        fsutil.append_bytes(path, data, site="archive.append")
                        written.append(f"{layout.ARCHIVE_DIR}/{path.name}")
                    self._rewrite_locked(snap, raw_bytes(plan.keep))
                    fsutil.remove(marker, site="archive.marker")
            except OSError as exc:
                raise HistoryError(f"compaction of {layout.HISTORY} failed: {fsutil.describe_os_error(exc)}") from exc
            return CompactionResult(
                archived=len(plan.archived_cursors),
                archive_files=tuple(written),
                kept=total - len(plan.archived_cursors),
                note="; ".join(self.rewrite_notes) or None,
            )
