"""memory/history.jsonl on disk: locked appends, tolerant reads, compaction into memory/archive/,
and the one-time migration of a legacy memory/HISTORY.md (``HistoryLog``; see base.py for how it
stays whole beside writers that take no lock)."""

from dream_memory.adapters.history_log.base import (
    DEFAULT_LOCK_TIMEOUT,
    DRAIN_LIMIT_SECONDS,
    CompactionResult,
    HistoryScan,
    MigrationResult,
)
from dream_memory.adapters.history_log.log import HistoryLog

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DRAIN_LIMIT_SECONDS",
    "CompactionResult",
    "HistoryLog",
    "HistoryScan",
    "MigrationResult",
]
