"""A request to stop a run, set from outside it (a signal handler the face installs) and read by
the run between model calls: the run ends at a point the journal and the cursor agree on.
"""

from __future__ import annotations

# Signal numbers by name, for messages (the same on every POSIX system; core imports no system
# module).
_NAMES = {2: "SIGINT", 15: "SIGTERM"}


class StopNow(BaseException):  # like KeyboardInterrupt: no library's `except Exception` may eat it
    """Raised inside a model call that outlived the wait after a stop request: the call is
    abandoned and its batch rolled back (only ever raised while ``StopFlag.in_call``)."""


class StopFlag:
    """Set once (the first signal wins); ``requested`` is what the run checks. ``in_call`` is
    true while a model call (with its retries) is in flight: only then may it be cut short."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.in_call = False

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
