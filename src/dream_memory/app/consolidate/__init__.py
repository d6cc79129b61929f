"""The Consolidator: fold the oldest safe slice of long sessions into history.jsonl (``run`` the
run, ``slice`` one session, ``summarize`` the model call, ``pending`` finishing an interrupted
slice, ``select`` which sessions, ``report``, ``options``)."""

from dream_memory.app.consolidate.options import ConsolidateContext, ConsolidateOptions
from dream_memory.app.consolidate.report import (
    OUTCOME_CONSOLIDATED,
    OUTCOME_DRY_RUN,
    OUTCOME_FAILED,
    OUTCOME_NOT_ATTEMPTED,
    OUTCOME_SKIPPED,
    STATUS_DRY_RUN,
    STATUS_FAILED,
    STATUS_LOCKED,
    STATUS_NOTHING,
    STATUS_OK,
    ConsolidateReport,
    SessionReport,
)
from dream_memory.app.consolidate.run import consolidate_sessions
from dream_memory.app.consolidate.select import select_sessions

__all__ = [
    "OUTCOME_CONSOLIDATED",
    "OUTCOME_DRY_RUN",
    "OUTCOME_FAILED",
    "OUTCOME_NOT_ATTEMPTED",
    "OUTCOME_SKIPPED",
    "STATUS_DRY_RUN",
    "STATUS_FAILED",
    "STATUS_LOCKED",
    "STATUS_NOTHING",
    "STATUS_OK",
    "ConsolidateContext",
    "ConsolidateOptions",
    "ConsolidateReport",
    "SessionReport",
    "consolidate_sessions",
    "select_sessions",
]
