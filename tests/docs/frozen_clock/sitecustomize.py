"""Loaded by every Python process a doc page's shell starts (``PYTHONPATH`` points here).

An entry's timestamp and weekday are part of what Dream sends the model, so a page's token
figures would change with the hour and the day it runs (a 2520 shown on a Wednesday is 2519 on a
Thursday). The pages' shell therefore runs on one fixed moment: ``SystemClock.now`` answers
2026-04-10 09:00 UTC (a Friday) in every process. Only that adapter is touched, so the monotonic
durations and every other program keep the real clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

FROZEN = datetime(2026, 4, 10, 9, 0, tzinfo=UTC)


def _now(_self: object) -> datetime:
    return FROZEN


try:
    from dream_memory.adapters.clock import SystemClock  # ~10 ms: the package imports nothing heavy
except ImportError:  # a Python without dream-memory (another tool the page runs)
    pass
else:
    setattr(SystemClock, "now", _now)  # noqa: B010 (a method replaced on the class, for every instance)
