"""What an append knows of a writer that appends to history.jsonl without our lock (nanobot's
``MemoryStore.append_history``): when it was last proven active (appending.py waits for such a
writer's next line).

Kept on the monotonic clock: on the wall clock, a clock stepped back (NTP, a resumed VM) made an
old sighting look recent for the length of the step, and every append then waited the longest
wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# A writer without our lock proven active this recently may be between reading the file and
# writing its next line: an append beside it waits this long, at most, for that line. Counted
# from the wait's start, not from the writer's last line: a nanobot idle for a while and then
# stopped between its read and its write is the usual case (it appends once per turn), and a
# wait shortened for an old last line let such a nanobot share a cursor (issue 16, session 46).
RECENT_NS = 2_000_000_000


class LocklessWriter:
    """Sightings of a writer without our lock, for one HistoryLog object."""

    def __init__(self, *, monotonic_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._monotonic_ns = monotonic_ns
        self._seen: int | None = None

    def saw(self) -> None:
        """Proof of the writer now: its line landed while we held the lock, or history.jsonl
        changed between two holds."""
        self._seen = self._monotonic_ns()

    def lately(self) -> bool:
        """Whether the writer was proven active within RECENT_NS."""
        return self._seen is not None and self._monotonic_ns() - self._seen < RECENT_NS
