"""Who else has history.jsonl open for writing, asked of the kernel (Linux leases): a rewrite
drains what such a writer appends to the replaced file, and a compaction waits for it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import signal
import time

_F_SETLEASE = getattr(fcntl, "F_SETLEASE", None)
_F_SETSIG = getattr(fcntl, "F_SETSIG", 10)  # Linux, where F_SETLEASE exists


def open_for_writing_elsewhere(fd: int) -> bool | None:
    """Whether some process has the file behind ``fd`` open for writing; None when this system
    cannot tell (no kernel leases there).

    Linux grants a read lease only on a file that nobody has open for writing; it is given back
    at once. Asked of a file renamed away (a rewrite's drain), and of history.jsonl itself before
    a compaction replaces it (``writers_gone``).
    """
    if _F_SETLEASE is None:
        return None
    try:
        # A writer opening the file while the lease is held breaks it, and the kernel signals the
        # holder: SIGIO by default, which ends a process that does not handle it. SIGURG is
        # ignored unless handled, so the probe is safe on a file others can still open by name.
        fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno in (errno.EAGAIN, errno.EBUSY) else None
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
    return False


# How long a compaction waits for a writer that has history.jsonl open to close it (an append
# holds it for microseconds) before it leaves the file as it is for this run.
WRITER_WAIT_SECONDS = 1.0


def writers_gone(fd: int, wait: float = WRITER_WAIT_SECONDS) -> bool:
    """False when some process still has the file behind ``fd`` open for writing after ``wait``
    seconds; True when nobody has, or this system cannot tell (the rewrite's drain then covers
    the writers it can see)."""
    deadline = time.monotonic() + wait
    while open_for_writing_elsewhere(fd) is True:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
