"""A request to stop a run, set from outside it (a signal handler the face installs) and read by
the run between model calls: the run ends at a point the journal and the cursor agree on.
"""

from __future__ import annotations

# Signal numbers by name, for messages (the same on every POSIX system; core imports no system
# module).
_NAMES = {2: "SIGINT", 15: "SIGTERM"}


class StopFlag:
    """Set once (the first signal wins); ``requested`` is what the run checks."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def request(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal_name(self.signum)


def signal_name(signum: int | None) -> str:
    if signum is None:
        return "a stop request"
    return _NAMES.get(signum, f"signal {signum}")
