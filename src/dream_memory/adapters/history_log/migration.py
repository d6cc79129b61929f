"""The one-time migration of a legacy memory/HISTORY.md into history.jsonl, resumable after a
crash at any step (a marker names what is moving)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.base import LogBase, MigrationResult, raw_bytes
from dream_memory.core import jsontext, layout
from dream_memory.core.history import (
    HistoryEntry,
    format_timestamp,
    parse_legacy_history,
)
from dream_memory.errors import HistoryError


def _content_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Migration(LogBase):
    """HistoryLog's migration of memory/HISTORY.md."""

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
        """Fold memory/HISTORY.md into history.jsonl (docs/reference/files.md, "Legacy HISTORY.md");
        None when there is none.

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
                body = raw_bytes(kept) + "".join(e.to_json_line() + "\n" for e in entries).encode("utf-8")
                self._rewrite_locked(snap, body)
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
