"""The composition root: builds adapters for one workspace from resolved settings.

Entrypoints (the CLI, the MCP server, the Python API) ask this object for what a use case needs;
use cases receive adapters and ports as arguments and never build them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.settings import Settings

if TYPE_CHECKING:
    from dream_memory.adapters.git import GitStore
    from dream_memory.adapters.history_log import HistoryLog, MigrationResult
    from dream_memory.core.ports import Clock


def stderr_logger(message: str) -> None:
    print(f"dream: {message}", file=sys.stderr)


@dataclass
class Wiring:
    settings: Settings
    clock: Clock = field(default=None)  # type: ignore[assignment]
    log: Callable[[str], None] = stderr_logger

    def __post_init__(self) -> None:
        if self.clock is None:
            from dream_memory.adapters.clock import SystemClock

            self.clock = SystemClock()

    @property
    def root(self) -> Path:
        return self.settings.workspace

    @cached_property
    def history(self) -> HistoryLog:
        from dream_memory.adapters.history_log import HistoryLog

        return HistoryLog(self.root, clock=self.clock, on_problem=lambda msg: self.log(f"warning: {msg}"))

    def git(self, *, create: bool = True) -> GitStore | None:
        from dream_memory.adapters.git import GitStore

        return GitStore.open(self.root, author=self.settings.dream.git_author, clock=self.clock, create=create)

    def ensure_workspace(self) -> list[str]:
        """What every writing command does first: templates for what is missing, then any
        pending legacy HISTORY.md migration."""
        from dream_memory.adapters.workspace import init_workspace

        created = init_workspace(self.root)
        migrated = self.history.migrate_legacy()
        if migrated is not None:
            self._report_migration(migrated)
        return created

    def _report_migration(self, result: MigrationResult) -> None:
        how = "already consolidated" if result.mode == "initial" else "as new entries for Dream"
        self.log(
            f"migrated {result.entries} entries from memory/HISTORY.md ({how}), "
            f"cursors {result.first_cursor}..{result.last_cursor}; kept the old file as {result.backup}"
        )
