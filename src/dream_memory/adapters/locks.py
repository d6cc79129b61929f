"""The workspace's own file locks, all plain ``flock`` on files that stay in place.

- ``memory/.dream.lock``: one Dream run per workspace, with the holder written down (pid, host,
  start time). The kernel drops an ``flock`` when its process dies, so a lock left by a killed run
  is simply taken over; the stale holder is reported.
- ``memory/.history.lock`` and the consolidation lock (``exclusive``): short holds with a bounded
  wait. A ``filelock.FileLock`` on the same path takes the same ``flock``, so an agent that locks
  the history with that library and dream-memory's writers exclude each other. filelock itself is
  kept only for nanobot's own session lock (adapters/sessions.py), the lock it defines: filelock 4
  added 8-17 ms of CPU to every ``dream append``, the commonest command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dream_memory.adapters import fsutil
from dream_memory.core import layout
from dream_memory.errors import DreamError, LockBusy

# The holder record is one short JSON line; more than this is not ours to parse.
_HOLDER_READ_BYTES = 4096


@dataclass(frozen=True)
class LockHolder:
    pid: int | None
    host: str | None
    started: str | None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "started": self.started}


def _parse_holder(text: str) -> LockHolder | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # any text may be in the file: it is only informative
        return None
    if not isinstance(data, dict):
        return None
    pid = data.get("pid")
    return LockHolder(pid if isinstance(pid, int) else None, data.get("host"), data.get("started"))


def this_process() -> dict[str, Any]:
    """Who is writing, as a journal or a lock records it: this process's pid and host."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def writer_alive(pid: object, host: object, written: Path) -> bool:
    """True when ``pid`` on ``host`` (as ``this_process`` recorded them) is another process of this
    machine that still runs and started before it wrote ``written``: it is mid-change, not crashed."""
    if not isinstance(pid, int) or host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        # a recycled pid: that process started after the file was written
        return Path(f"/proc/{pid}").stat().st_ctime <= written.stat().st_mtime + 1
    except OSError:
        return True


# `current_holder` probes with a shared lock for a few microseconds; a run starting at that very
# moment must not give up (exit 75) because of a `dream status`. A real holder holds for minutes.
_PROBE_GRACE_SECONDS = 0.25


# Waiters on a short hold poll every 50 ms. A 5 ms poll looked quicker for holds of a few
# milliseconds, but on 2 cores the polling waiters took the CPU from the holder: 8 writers made 65
# appends/s at 5 ms against 139 at 50 ms (`bench/bench_store.py`), and the eight-writers test used
# 2.6x the CPU.
_POLL_SECONDS = 0.05


def _flock(fd: int, mode: int, *, wait: float = _PROBE_GRACE_SECONDS, poll: float = 0.01) -> None:
    """``flock`` in ``mode``, tried every ``poll`` seconds for ``wait``; BlockingIOError after."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(poll, left))


def _open_lock_file(path: Path, doing: str) -> int:
    """The lock file's descriptor, its folder and the file made if missing, never through a link;
    the workspace error for ``doing`` when it cannot be opened (a read-only workspace, a folder or
    a link where it belongs). 0o666 through the umask, as filelock makes it: with DREAM_UMASK=0002
    a process of the same group under another uid (the agent beside Dream on a shared volume) can
    take it too."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | fsutil.NOFOLLOW, 0o666)
    except OSError as exc:
        raise fsutil.os_error(exc, doing, path) from exc


@contextlib.contextmanager
def exclusive(path: Path, *, timeout: float, busy: Callable[[], DreamError], doing: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the block, waiting at most ``timeout`` seconds;
    raises ``busy()`` after that, and the workspace error for ``doing`` (``fsutil.os_error``) when
    the file cannot be opened (``_open_lock_file``). The file is never truncated and never
    deleted, so every waiter locks the same inode.
    """
    fd = _open_lock_file(path, doing)
    try:
        try:
            _flock(fd, fcntl.LOCK_EX, wait=timeout, poll=_POLL_SECONDS)
        except BlockingIOError:
            raise busy() from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_path(workspace: Path) -> Path:
    return workspace / layout.DREAM_LOCK


def current_holder(workspace: Path) -> LockHolder | None:
    """Who holds the Dream lock right now, or None when nobody does (a stale file is not a holder)."""
    path = lock_path(workspace)
    try:
        fd = os.open(path, os.O_RDONLY | fsutil.NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise fsutil.os_error(exc, "read the Dream lock", path) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _parse_holder(_read_holder(fd)) or LockHolder(None, None, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, _HOLDER_READ_BYTES, 0).decode("utf-8", errors="replace")
    except OSError:  # a folder where the lock file belongs, say: the holder is unknown
        return ""


@contextlib.contextmanager
def dream_lock(workspace: Path, *, now: datetime) -> Iterator[LockHolder | None]:
    """Hold the Dream lock for the block; raises LockBusy at once when another run holds it.

    Yields the stale holder whose lock was taken over, if the file named one.
    """
    path = lock_path(workspace)
    fd = _open_lock_file(path, "take the Dream lock")
    try:
        try:
            _flock(fd, fcntl.LOCK_EX)
        except BlockingIOError:
            holder = _parse_holder(_read_holder(fd))
            raise LockBusy(
                f"the workspace is locked by another Dream run ({holder.describe() if holder else 'holder unknown'})",
                # Not only `dream run` meets it: review, restore and forget must be run again by hand.
                hint="nothing was done; run it again once that run ends (`dream status` names the holder); "
                "a scheduled Dream run picks its work up at its next time by itself",
            ) from None
        try:
            previous = os.pread(fd, _HOLDER_READ_BYTES, 0).decode("utf-8", errors="replace")
            stale = _parse_holder(previous) if previous.strip() else None
            me = {"pid": os.getpid(), "host": socket.gethostname(), "started": now.isoformat(timespec="seconds")}
            os.ftruncate(fd, 0)
            fsutil.checkpoint("dream_lock.write", path)
            os.pwrite(fd, json.dumps(me).encode("utf-8"), 0)
            os.fsync(fd)
        except OSError as exc:
            # A full disk: the holder cannot be written down, so nothing is done (the flock is
            # dropped with the descriptor); the command fails with a message, never a traceback.
            raise fsutil.os_error(exc, "write the Dream lock", path) from exc
        try:
            yield stale
        finally:
            with contextlib.suppress(OSError):  # the kernel drops the flock at close anyway
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def dream_lock_shared(workspace: Path) -> Iterator[None]:
    """For a dry run: raises LockBusy when a live run holds the Dream lock, and otherwise holds it
    shared for the block (no real run starts under a dry run's reading), writing nothing: a
    missing lock file is not created (then no run is live) and the holder record is left as it is.
    """
    path = lock_path(workspace)
    try:
        fd = os.open(path, os.O_RDONLY | fsutil.NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        yield None
        return
    except OSError as exc:
        raise fsutil.os_error(exc, "read the Dream lock", path) from exc
    try:
        try:
            _flock(fd, fcntl.LOCK_SH)
        except BlockingIOError:
            holder = _parse_holder(_read_holder(fd))
            raise LockBusy(
                f"the workspace is locked by another Dream run ({holder.describe() if holder else 'holder unknown'})",
                hint="nothing was done; try the dry run again when that run has ended",
            ) from None
        try:
            yield None
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
