"""``HistoryLog``: memory/history.jsonl with its cursors, archive and legacy migration; each part
of it lives in a module of its own (base, appending, compaction, migration)."""

from __future__ import annotations

import os
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.appending import Appending
from dream_memory.adapters.history_log.base import _ARCHIVE_TEMPS, _LOCKED_TEMPS, _PENDING_ARCHIVE, MigrationResult
from dream_memory.adapters.history_log.compaction import Compaction
from dream_memory.adapters.history_log.migration import Migration
from dream_memory.adapters.history_log.replaced import ReplacedFiles


class HistoryLog(Appending, Compaction, Migration, ReplacedFiles):
    """The workspace's history.jsonl, its cursors and its archive."""

    # --- crash recovery ------------------------------------------------------------------------

    def _recover_locked(self) -> MigrationResult | None:
        """Finish what a killed writer left half done. Runs under the lock before every change,
        so the next writing command of any kind leaves no duplicate, orphan or temp file."""
        # One listing per folder: this runs on every append, under the lock.
        listings = {folder: _listing(folder) for folder in (self.path.parent, self.archive_dir)}
        # Before finishing a compaction, which replaces history.jsonl: a name a rewrite killed
        # before its rename left is history.jsonl itself, and must still be seen as such.
        self._carry_replaced(listings[self.path.parent])
        if (self.archive_dir / _PENDING_ARCHIVE).exists():
            self._finish_pending_archive()
        for folder, prefixes in ((self.path.parent, _LOCKED_TEMPS), (self.archive_dir, _ARCHIVE_TEMPS)):
            for name in listings[folder]:
                if name.endswith(".tmp") and name.startswith(prefixes):
                    fsutil.remove(folder / name, site="temp.cleanup")
        marker = self._read_marker()
        return None if marker is None else self._resume_migration(marker)


def _listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []
