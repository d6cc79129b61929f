"""SIGTERM and SIGINT as a stop request: the one handler every long-running face installs.

The first signal sets the run's ``StopFlag`` (the run stops after the model call in flight, lands
or rolls back its batch, and reports ``interrupted``); a second one ends the process at once with
128 + its number. That needs no clean-up: the kernel drops the Dream lock with the process and the
next run finishes or rolls back a half-written commit from the journal.

The model call in flight gets ``wait`` seconds to answer (retry waits included); past that it is
abandoned (``StopNow`` raised inside it, its batch rolled back), so a stop fits the grace periods
schedulers give (docker stop 10 s, GitHub 7.5 s to its second signal, Kubernetes 30 s) even
behind a model that takes minutes per call.

The handler ends the process itself instead of relying on the default action: as PID 1 in a
container (no init) the default SIGTERM action does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import NoReturn

from dream_memory.core.stop import StopFlag, StopNow, signal_name

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long the model call in flight may still take once a stop is requested.
STOP_WAIT_SECONDS = 2.0


@contextlib.contextmanager
def stop_on_signals(
    flag: StopFlag | None = None, *, wait: float = STOP_WAIT_SECONDS, line: Callable[[str], str] | None = None
) -> Iterator[StopFlag]:
    """Within the block SIGINT and SIGTERM request a stop on the yielded flag; the handlers that
    were there before come back after it. Outside the main thread (where Python cannot install
    handlers) the flag is yielded as it is, for the caller to set. ``line`` turns a message into
    the stderr line the face writes (its log format; default: the text and a newline)."""
    flag = flag or StopFlag()
    render = line or (lambda text: text + "\n")

    def _say(text: str) -> None:
        _write(render(text))

    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if flag.requested:
            _say(f"dream: {signal_name(signum)} again: stopping now; the next run recovers")
            os._exit(128 + signum)
        flag.request(signum)
        _say(
            f"dream: {signal_name(signum)} received: stopping after the current model call "
            f"(at most {wait:g} s more; send it again to stop at once)"
        )
        signal.setitimer(signal.ITIMER_REAL, wait)

    def out_of_time(signum: int, frame: FrameType | None) -> None:
        if flag.in_call:  # never in the middle of landing a batch: that finishes on its own
            _say(f"dream: the model call did not answer within {wait:g} s of the stop; abandoning it")
            raise StopNow

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, out_of_time)
    try:
        yield flag
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def end_on_signals(then: str | Callable[[], str]) -> Iterator[None]:
    """Within the block SIGINT and SIGTERM end the process at once, 128 + the signal's number,
    after a line saying it was stopped and ``then`` (what to run next). For work with no model
    call to wait for whose every step is idempotent (``dream forget``): ending it anywhere is what
    a SIGKILL does, which the next run of the same command finishes; the line is what the user
    needs to know that; a callable ``then`` is asked at the signal (what is left depends on how
    far the work got). Outside the main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> NoReturn:
        left = then if isinstance(then, str) else then()
        _write(f"dream: {signal_name(signum)} received: stopped part way; {left}\n")
        os._exit(128 + signum)

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _write(text: str) -> None:
    # os.write, not print: the handler may run while sys.stderr's buffer is mid-write, and a
    # buffered writer entered twice raises.
    with contextlib.suppress(OSError):
        os.write(2, text.encode("utf-8", errors="replace"))


def exit_at_once(code: int) -> NoReturn:
    """End a stopped run the moment its report is out. Interpreter shutdown after a stop can take
    seconds (the model library's exit hooks, the abandoned call's connection): measured 3.6 s
    behind a hung model, which made ``docker stop`` take 4 s against its 3 s bound. Nothing is
    left to do by then: the batch in flight is rolled back, the report is printed and written,
    and the kernel drops the Dream lock with the process."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
