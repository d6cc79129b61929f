"""SIGTERM and SIGINT as a stop request: the one handler every long-running face installs.

The first signal sets the run's ``StopFlag`` (the run stops after the model call in flight, lands
or rolls back its batch, and reports ``interrupted``); a second one ends the process at once with
128 + its number. That needs no clean-up: the kernel drops the Dream lock with the process and the
next run finishes or rolls back a half-written commit from the journal.

The handler ends the process itself instead of relying on the default action: as PID 1 in a
container (no init) the default SIGTERM action does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from dream_memory.core.stop import StopFlag, signal_name

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_signals(flag: StopFlag | None = None) -> Iterator[StopFlag]:
    """Within the block SIGINT and SIGTERM request a stop on the yielded flag; the handlers that
    were there before come back after it. Outside the main thread (where Python cannot install
    handlers) the flag is yielded as it is, for the caller to set."""
    flag = flag or StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if flag.requested:
            _say(f"dream: {signal_name(signum)} again: stopping now; the next run recovers\n")
            os._exit(128 + signum)
        flag.request(signum)
        _say(
            f"dream: {signal_name(signum)} received: stopping after the current model call "
            "(send it again to stop at once)\n"
        )

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield flag
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _say(text: str) -> None:
    # os.write, not print: the handler may run while sys.stderr's buffer is mid-write, and a
    # buffered writer entered twice raises.
    with contextlib.suppress(OSError):
        os.write(2, text.encode("utf-8", errors="replace"))
