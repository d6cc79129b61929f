"""Durable file I/O: every write in the package goes through here.

A rewrite is a temp file in the same folder, fsync, rename over the target, fsync of the folder,
so a crash leaves either the old file or the new one, never a mix or an empty file. Appends are a
single ``write`` on an ``O_APPEND`` descriptor followed by fsync.

``set_fault_injector`` lets the fault suite raise (for example ``OSError(ENOSPC)``) at any write
site; it is None in normal operation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from dream_memory.errors import WorkspaceError, WorkspaceUnusable

FaultInjector = Callable[[str, Path], None]
# A one-slot holder rather than a rebound global: the hook is read on every write.
_fault_injector: list[FaultInjector | None] = [None]


def set_fault_injector(injector: FaultInjector | None) -> None:
    """Install a callable run before every write (site name, path); used by the fault suite only.

    The crash tests install one in a child process that SIGKILLs itself at a chosen site, so a
    "crash" lands exactly between two durable steps.
    """
    _fault_injector[0] = injector


def _before_write(site: str, path: Path) -> None:
    injector = _fault_injector[0]
    if injector is not None:
        injector(site, path)


def checkpoint(site: str, path: Path) -> None:
    """A write this module does not perform itself (a git ref, the git index) still passes the
    fault hook, so a crash can be placed right before it."""
    _before_write(site, path)


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | str, *, site: str = "rewrite") -> None:
    """Replace ``path`` with ``data`` atomically and durably; creates parent folders."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = _default_mode()
    _before_write(site, path)
    import tempfile  # here, not at the top: the read path never writes, and never loads it

    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


# The temp names of atomic_write (mkstemp: 8 of [a-z0-9_]) and of adapters.rooted (8 hex digits).
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
# An atomic write holds its temp file for milliseconds; one this old was left by a killed writer.
STALE_TEMP_SECONDS = 300.0


def remove_stale_temps(folder: Path, *, deep: bool, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove the temp files of atomic writes a killed process left in ``folder`` (and below it
    with ``deep``): only names these writers make, only regular files, only ones untouched for
    ``older_than`` seconds, so a write in progress (under any lock) keeps its file. Their content
    never replaced anything: the file they were meant for still holds its previous version."""
    cutoff = time.time() - older_than
    removed: list[Path] = []
    for where, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != ".git"] if deep else []
        for name in files:
            path = Path(where) / name
            if not _TEMP_NAME.match(name):
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mtime <= cutoff:
                remove(path, site="stale_temp")
                removed.append(path)
    return removed


def append_bytes(path: Path, data: bytes, *, site: str = "append") -> None:
    """Append with one write on an O_APPEND descriptor, then fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _before_write(site, path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NOFOLLOW, _default_mode())
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def ends_with_newline(path: Path) -> bool:
    """True for an empty or missing file, or one whose last byte is a newline."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return True
            handle.seek(size - 1)
            return handle.read(1) == b"\n"
    except FileNotFoundError:
        return True


def remove(path: Path, *, site: str = "remove") -> None:
    _before_write(site, path)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fsync_dir(path.parent)


def link(src: Path, dst: Path, *, site: str = "link") -> None:
    """A second name for ``src``'s file, durable once this returns (FileExistsError if taken)."""
    _before_write(site, dst)
    os.link(src, dst, follow_symlinks=False)
    fsync_dir(dst.parent)


def rename(src: Path, dst: Path, *, site: str = "rename") -> None:
    _before_write(site, dst)
    os.replace(src, dst)
    fsync_dir(dst.parent)


# The workspace's own files (history, cursors, locks) are opened without following a symbolic
# link in their last component: a link committed in a cloned repository, or planted beside the
# workspace, must not make Dream truncate, append to or read a file outside it.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_own(path: Path) -> bytes:
    """The bytes of one of the workspace's own files, never through a symbolic link (ELOOP)."""
    fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def read_text(path: Path) -> str | None:
    """The file's text as UTF-8 (undecodable bytes replaced), or None if missing."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(exc, "read", path) from exc


def mtime(path: Path) -> float:
    """When ``path`` was last written (OSError when it cannot be looked at)."""
    return path.stat().st_mtime


def touch(path: Path) -> None:
    """``path``'s mtime set to now; a file that cannot be touched keeps its time."""
    with contextlib.suppress(OSError):
        os.utime(path)


def describe_os_error(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    if exc.errno == errno.EDQUOT:
        return "the disk quota is exceeded"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "the filesystem is read-only"
    if exc.errno == errno.EISDIR:
        return "it is a folder, where a file belongs"
    if exc.errno == errno.ENOTDIR:
        return "a file stands where a folder belongs"
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link, and dream does not follow links to its own files"
    return exc.strerror or str(exc)


# Problems that running again will not fix: the workspace must be changed first (exit 2).
_UNUSABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.EISDIR, errno.ENOTDIR, errno.ELOOP})


def _owner_hint(where: str) -> str:
    path = Path(where)
    # A relative path's parents end at the current folder, which says nothing about the workspace.
    for candidate in (path, *path.parents) if path.is_absolute() else ():
        try:
            owner = candidate.stat().st_uid
        except OSError:
            continue
        if owner != os.geteuid():
            return (
                f"dream runs as uid {os.geteuid()} but {candidate} belongs to uid {owner}: run dream as that "
                f"user, or give uid {os.geteuid()} the workspace (chown -R)"
            )
        break
    return f"give the user running dream (uid {os.geteuid()}) read and write access to {where} (chmod / chown)"


def _hint(exc: OSError, where: str) -> str | None:
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return _owner_hint(where)
    if code == errno.EROFS:
        return "dream writes memory, history and git objects in the workspace: mount it read-write"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "free some space; nothing is lost: the next run continues where this one stopped"
    if code == errno.EISDIR:
        return f"remove the folder {where} (dream keeps a file there and creates it itself)"
    if code == errno.ENOTDIR:
        return f"move away the file that stands where {where} needs a folder"
    if code == errno.ELOOP:
        return f"replace the link {where} with a regular file (or remove it, if dream creates it)"
    return None


def os_error(exc: OSError, doing: str, path: Path | str | None = None) -> WorkspaceError:
    """The package's error for an OSError at a workspace path: names the path, the cause and what
    to do; exit 2 when the workspace must be fixed first (permissions, read-only, a folder in the
    way), exit 1 when running again may work (a full disk)."""
    where = str(path if path is not None else exc.filename or "the workspace")
    message = f"cannot {doing} {where}: {describe_os_error(exc)}"
    kind = WorkspaceUnusable if exc.errno in _UNUSABLE else WorkspaceError
    return kind(message, hint=_hint(exc, where))


def touch_for_append(path: Path) -> None:
    """Create ``path`` (and its folder) if missing, keeping what is there: proves it can be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8"):
        pass


def write_in_place(path: Path, text: str) -> None:
    """Write ``text`` into ``path`` itself (not by rename: it may be a pipe, /dev/stderr or a symlink)."""
    path.write_text(text, encoding="utf-8")
