"""Replace a workspace file only if it still holds what the caller expects, checked as late as
a rename allows.

Dream writes a memory file after its commit has landed, and another program (a person's editor,
nanobot's ``write_user``) may have written the same file since Dream read it. The check is made
after the new content is in a durable temp file, right before the rename, so what is left
between the check and the rename is one read and one ``rename(2)``.

That remaining window cannot be closed from here: POSIX has no rename that fails when the
target changed, and the other writers take no lock (nanobot writes in place, truncating then
writing). A write that lands between the check and the rename, or an in-place write still under
way at the check (its rest then goes to the file the rename unlinks), is overwritten; every edit
that completed before the check is seen, and the caller merges onto it. A file found edited is
first given time to be written whole (``settled``: the same bytes for a quarter of a second), so
only a save that pauses longer than that between its writes can still be cut.
"""

from __future__ import annotations

import os
import stat
import time

from dream_memory.adapters.rooted import RootedDir, _is_link_error

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


def replace_if_unchanged(
    fs: RootedDir, rel: str, data: bytes | None, expect: bytes | None, *, sync_folder: bool = True
) -> bool:
    """Write ``data`` at ``rel`` (None deletes it) if the file still holds ``expect`` (None:
    missing or not a regular file, as ``RootedDir.read`` says) right before the rename or the
    unlink; False, with nothing written, when it does not."""
    if data is None:
        # A delete has no temp file to prepare: the read and the unlink are as close as they get.
        if fs.read(rel) != expect:
            return False
        fs.remove(rel, site="memory.remove")
        return True

    # The fsync of the temp file can take a while on a busy disk: the check comes after it.
    def changed(folder: int, name: str) -> bool:
        return _content(folder, name) != expect

    return fs.write(rel, data, site="memory.write", sync_folder=sync_folder, keep=changed)


# A file that holds the same bytes this long is no longer being written: an in-place save comes in
# write(2) calls microseconds apart (Python's buffered writes past 8 KiB, a save in chunks).
QUIET_SECONDS = 0.25
SETTLE_LIMIT_SECONDS = 5.0


def settled(
    fs: RootedDir, rel: str, seen: bytes | None, *, quiet: float = QUIET_SECONDS, limit: float = SETTLE_LIMIT_SECONDS
) -> tuple[bytes | None, bool]:
    """``rel`` once it has held the same bytes for ``quiet`` seconds, starting from ``seen`` (what
    the caller just read); and False when it was still changing after ``limit`` seconds. Read
    between two writes of an in-place save, a file is cut short: committed, or merged onto and
    renamed over, the cut is what stays, and the rest of the save goes to the unlinked file."""
    deadline = time.monotonic() + limit
    while True:
        time.sleep(quiet)
        now = fs.read(rel)
        if now == seen:
            return now, True
        if time.monotonic() >= deadline:
            return now, False
        seen = now


def _content(folder: int, name: str) -> bytes | None:
    """The file as ``RootedDir.read`` would return it, read through the folder already open."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if _is_link_error(exc):
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()
