"""The fault injector: crash or starve dream-memory at a chosen write, on purpose.

Every durable write of the package passes ``fsutil.set_fault_injector``'s hook with a site name
(``history.append``, ``git.lock.ref``, ...), and git's own lock files are reached while dulwich
holds them (the lock written, not yet renamed). ``fault_hook(at_write(kill_self, site, nth))``
SIGKILLs the process just before that write; ``disk_full`` fails it as a full disk would;
``trace_writes`` lists the sites a command passes. ``dream_memory.testing.invariants`` checks
what must hold afterwards.

The fault soak that uses both (hundreds of random trials, docs/reliability.md) lives in the
repository's tests (``tests/faults/soak/``), not in the package.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dream_memory.adapters import fsutil

__all__ = ["Injector", "at_write", "disk_full", "fault_hook", "git_lock_sites", "kill_self", "trace_writes"]

Injector = Callable[[str, Path], None]


def kill_self(path: Path) -> None:
    """A crash: the process SIGKILLs itself (nothing after this line runs, no cleanup)."""
    os.kill(os.getpid(), signal.SIGKILL)


def disk_full(path: Path) -> None:
    """The write fails as on a full disk."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def at_write(action: Callable[[Path], None], site: str | None = None, nth: int = 1) -> Injector:
    """An injector for ``fsutil.set_fault_injector`` / ``fault_hook``: ``action(path)`` just before
    the ``nth`` write (1-based) at ``site``, or at any site when ``site`` is None."""
    seen = itertools.count(1)

    def inject(name: str, path: Path) -> None:
        if (site is None or name == site) and next(seen) == nth:
            action(path)

    return inject


def _git_lock_site(path: Path) -> str:
    text = path.as_posix()
    if "/objects/" in text:
        return "git.lock.object"
    if "/refs/" in text or text.endswith(("/HEAD", "/packed-refs")):
        return "git.lock.ref"
    if text.endswith("/index"):
        return "git.lock.index"
    return "git.lock.other"


@contextlib.contextmanager
def git_lock_sites(injector: Injector) -> Iterator[None]:
    """Also call ``injector`` while dulwich holds a git lock file (written, not yet renamed over
    its target): a kill there leaves the ``.lock`` behind, as a crash of git itself would. An
    error raised there aborts the write (the lock is removed), as a failing write would."""
    import dulwich.file

    original = dulwich.file._GitFile.close

    def close(self: Any) -> None:
        if not self._closed:
            path = Path(os.fsdecode(self._filename))
            try:
                injector(_git_lock_site(path), path)
            except BaseException:
                self.abort()
                raise
        original(self)

    dulwich.file._GitFile.close = close  # type: ignore[method-assign]
    try:
        yield
    finally:
        dulwich.file._GitFile.close = original  # type: ignore[method-assign]


@contextlib.contextmanager
def fault_hook(injector: Injector) -> Iterator[None]:
    """Install ``injector`` at every write site (package and git locks) for the block."""
    fsutil.set_fault_injector(injector)
    try:
        with git_lock_sites(injector):
            yield
    finally:
        fsutil.set_fault_injector(None)


def trace_writes(run: Callable[[], Any]) -> tuple[list[tuple[str, str]], Any]:
    """Run ``run`` recording every write site it passes (site, path); returns (sites, result)."""
    sites: list[tuple[str, str]] = []
    with fault_hook(lambda site, path: sites.append((site, str(path)))):
        result = run()
    return sites, result
