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
that completed before the check is seen, and the caller merges onto it.
"""

from __future__ import annotations

import contextlib
import os
import stat

from dream_memory.adapters import fsutil
from dream_memory.adapters.rooted import RootedDir, _close_all, _default_mode, _fsync_fd, _is_link_error
from dream_memory.errors import WorkspaceError

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
    parts = fs._checked(rel)
    fds = fs._parent_fds(rel, parts, create=True)
    assert fds is not None
    folder, name = fds[-1], parts[-1]
    try:
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else _default_mode()
        except FileNotFoundError:
            mode = _default_mode()
        fsutil.checkpoint("memory.write", fs.root / rel)
        tmp = f".{name}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                os.fchmod(handle.fileno(), mode)
            # The fsync above can take a while on a busy disk: the check comes after it.
            if _content(folder, name) != expect:
                os.unlink(tmp, dir_fd=folder)
                return False
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
        if sync_folder:
            _fsync_fd(folder)
        return True
    except IsADirectoryError as exc:
        raise WorkspaceError(f"cannot write {rel}: a folder is in the way") from exc
    finally:
        _close_all(fds)


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
