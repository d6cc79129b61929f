"""File operations that stay below one root folder, whatever symlinks the folder holds.

Two guards, one for each side:

- ``RootedDir`` (writers: restore, run --branch, held batches, crash recovery, and the reads
  that decide what they write): every component is opened with ``O_NOFOLLOW`` relative to its
  parent's descriptor, so no symlink is ever followed, not even one swapped in between a check
  and the write. A symlink on the way is an error for a write or a delete, and "not a file" for
  a read: dream-memory versions what lies in the workspace itself, as git does ("beyond a
  symbolic link").
- ``Beneath`` (the read side and ``dream context``): symlinks are followed only while they stay
  below the root. Each link is read with ``readlink`` relative to its folder's descriptor and
  resolved by hand (``..`` pops our own stack of descriptors, never the kernel's), the way
  ``openat2(RESOLVE_BENEATH)`` would, so a link that leads out is refused instead of followed.

Paths are root-relative POSIX strings that already passed ``core.paths``; the root itself may
be a symlink (it is the folder the user chose).

One piece: both guards share the descriptor walk and its private helpers; split, every writer
that needs a check of its own (``swap``) would reach into another module's privates.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Generator
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.core.paths import describe, path_problem
from dream_memory.errors import WorkspaceError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted where a file should be must not hang the reader.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_MAX_LINKS = 40  # as the kernel's own limit on symlinks in one lookup
Keep = Callable[[int, str], bool]  # (folder descriptor, name) -> leave the file as it is
_BACKWARDS_BLOCK = 64 * 1024  # a file read from its end is read in blocks of this size


class OutsideRoot(Exception):
    """A path that would leave the root (through a symlink, or ``..`` above it)."""

    def __init__(self, rel: str, why: str) -> None:
        super().__init__(f"{rel}: {why}")
        self.rel = rel
        self.why = why


def _is_link_error(exc: OSError) -> bool:
    # ELOOP: O_NOFOLLOW met a symlink; ENOTDIR: O_DIRECTORY met a symlink or a file.
    return exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


class RootedDir:
    """Writes, deletes and reads below ``root`` without following any symlink."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _checked(self, rel: str) -> list[str]:
        problem = path_problem(rel)
        if problem is not None:
            raise WorkspaceError(f"refusing the path {describe(rel)}: {problem}")
        return rel.split("/")

    def _open_root(self) -> int:
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"cannot open the workspace {self.root}: {fsutil.describe_os_error(exc)}") from exc

    def _symlink_error(self, rel: str, upto: list[str]) -> WorkspaceError:
        where = "/".join(upto)
        return WorkspaceError(
            f"cannot write {rel}: {where} is a symlink (or not a folder); dream-memory never writes or deletes "
            "through a symlink, which could lead outside the workspace",
            hint=f"replace {where} with a real folder holding those files",
        )

    def _parent_fds(self, rel: str, parts: list[str], *, create: bool) -> list[int] | None:
        """Descriptors of the root and of every folder on the way to ``rel``'s file (the caller
        closes them); None when a folder is missing and ``create`` is off."""
        fds = [self._open_root()]
        try:
            for name in parts[:-1]:
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=fds[-1])
                except FileNotFoundError:
                    if not create:
                        _close_all(fds)
                        return None
                    try:
                        os.mkdir(name, 0o777, dir_fd=fds[-1])
                    except FileExistsError:
                        pass  # made meanwhile (or a symlink appeared): the open below decides
                    fd = os.open(name, _DIR_FLAGS, dir_fd=fds[-1])
                fds.append(fd)
        except OSError as exc:
            _close_all(fds)
            if _is_link_error(exc):
                raise self._symlink_error(rel, parts[: len(fds)]) from exc
            raise WorkspaceError(f"cannot reach {rel}: {fsutil.describe_os_error(exc)}") from exc
        return fds

    # --- writing ---------------------------------------------------------------------------

    def write(
        self, rel: str, data: bytes, *, site: str = "rewrite", sync_folder: bool = True, keep: Keep | None = None
    ) -> bool:
        """Replace ``rel`` atomically and durably (temp file, fsync, rename, folder fsync unless
        ``sync_folder`` is off: then ``sync_folders``); folders on the way are created. A symlink
        at ``rel`` itself is replaced, never followed. ``keep(folder_fd, name)``, asked once the
        temp file is durable, right before the rename: True leaves the file as it is (False)."""
        parts = self._checked(rel)
        fds = self._parent_fds(rel, parts, create=True)
        assert fds is not None
        folder, name = fds[-1], parts[-1]
        try:
            try:
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else _default_mode()
            except FileNotFoundError:
                mode = _default_mode()
            fsutil.checkpoint(site, self.root / rel)
            tmp = f".{name}.{os.urandom(4).hex()}.tmp"  # as secrets.token_hex, without its imports
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                    os.fchmod(handle.fileno(), mode)
                if keep is not None and keep(folder, name):
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

    def sync_folders(self, rels: list[str]) -> None:
        """fsync once each folder holding ``rels`` (reached without following symlinks)."""
        for parts in {tuple(self._checked(rel)[:-1]): None for rel in rels}:
            if fds := self._parent_fds("/".join((*parts, "x")), [*parts, "x"], create=False):
                _fsync_fd(fds[-1])
                _close_all(fds)

    def remove(self, rel: str, *, site: str = "remove", prune: bool = True) -> None:
        """Delete the file ``rel`` (a missing one is fine); with ``prune``, folders it leaves
        empty go too, up to but not including the root's own top-level folders."""
        parts = self._checked(rel)
        fds = self._parent_fds(rel, parts, create=False)
        if fds is None:
            return
        try:
            fsutil.checkpoint(site, self.root / rel)
            try:
                os.unlink(parts[-1], dir_fd=fds[-1])
            except FileNotFoundError:
                pass
            except IsADirectoryError as exc:
                raise WorkspaceError(f"cannot delete {rel}: it is a folder") from exc
            _fsync_fd(fds[-1])
            if prune:
                # fds[k] is the folder parts[k - 1]; the top-level folder (k == 1) stays.
                for k in range(len(fds) - 1, 1, -1):
                    try:
                        os.rmdir(parts[k - 1], dir_fd=fds[k - 1])
                    except OSError:
                        break
        finally:
            _close_all(fds)

    def check_reachable(self, rel: str) -> None:
        """Raise the error ``write``/``remove`` would raise for ``rel`` because of a symlink (or
        a file) on the way, before anything is committed; a missing folder is fine."""
        parts = self._checked(rel)
        fds = self._parent_fds(rel, parts, create=False)
        if fds is not None:
            _close_all(fds)

    # --- reading (what decides a write) ------------------------------------------------------

    def _readable_parents(self, rel: str, parts: list[str]) -> list[int] | None:
        """The open folders on the way to ``rel`` for a read; None when one is missing or a
        symlink (what lies beyond one is not in the workspace)."""
        try:
            return self._parent_fds(rel, parts, create=False)
        except WorkspaceError:
            return None

    def lstat(self, rel: str) -> os.stat_result | None:
        """The ``lstat`` of ``rel``; None when it or a folder on the way is missing, or when a
        folder on the way is a symlink (what lies beyond one is not in the workspace)."""
        parts = self._checked(rel)
        fds = self._readable_parents(rel, parts)
        if fds is None:
            return None
        try:
            return os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            _close_all(fds)

    def read(self, rel: str) -> bytes | None:
        """The bytes of the regular file ``rel``; None when missing, not a regular file, a
        symlink, or beyond a symlinked folder."""
        parts = self._checked(rel)
        fds = self._readable_parents(rel, parts)
        if fds is None:
            return None
        try:
            try:
                fd = os.open(parts[-1], _READ_FLAGS, dir_fd=fds[-1])
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                if _is_link_error(exc):
                    return None
                # No permission, a read-only mount: the workspace's to fix (exit 2, with the fix).
                raise fsutil.os_error(exc, "read", self.root / rel) from exc
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                os.close(fd)
                if stat.S_ISDIR(mode):  # os.fdopen's own error named the descriptor, not the file
                    where = self.root / rel
                    gone = IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(where))
                    raise fsutil.os_error(gone, "read", where)
                return None
            with os.fdopen(fd, "rb") as handle:
                return handle.read()
        finally:
            _close_all(fds)

    def is_file(self, rel: str) -> bool:
        st = self.lstat(rel)
        return st is not None and stat.S_ISREG(st.st_mode)

    def walk_files(self, top: str) -> list[str]:
        """Root-relative paths of the regular files below the folder ``top`` (no symlink
        followed, ``.git`` folders skipped), sorted."""
        parts = self._checked(top)
        found: list[str] = []
        try:
            fds = self._parent_fds(top + "/x", [*parts, "x"], create=False)
        except WorkspaceError:
            return found
        if fds is None:
            return found
        try:
            _walk(fds[-1], top, found)
        finally:
            _close_all(fds)
        return sorted(found)


def _walk(fd: int, prefix: str, found: list[str]) -> None:
    try:
        names = os.listdir(fd)
    except OSError:
        return
    for name in names:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        rel = f"{prefix}/{name}"
        if stat.S_ISREG(st.st_mode):
            found.append(rel)
        elif stat.S_ISDIR(st.st_mode) and name != ".git":
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                _walk(child, rel, found)
            finally:
                os.close(child)


class Beneath:
    """Opens files below ``root`` for reading, following symlinks only while they stay below it.

    Folder descriptors are kept (a few dozen at most) while the object lives, so reading many
    files of one folder costs one ``openat`` each; ``close()`` releases them.
    """

    _CACHE = 32

    def __init__(self, root: Path | str) -> None:
        self.root = str(root)
        self.real_root = os.path.realpath(self.root)
        self._roots = sorted({self.real_root, os.path.normpath(os.path.abspath(self.root))}, key=len, reverse=True)
        self._root_fd: int | None = None
        self._dirs: OrderedDict[tuple[str, ...], int] = OrderedDict()

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _root(self) -> int:
        if self._root_fd is None:
            self._root_fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        return self._root_fd

    def dir_fd(self, names: tuple[str, ...]) -> int | None:
        """The descriptor of the real folder ``names`` below the root (no symlink in it: the
        names come from a resolution), None when it is missing or not a folder."""
        if not names:
            return self._root()
        fd = self._dirs.get(names)
        if fd is not None:
            self._dirs.move_to_end(names)
            return fd
        parent = self.dir_fd(names[:-1])
        if parent is None:
            return None
        try:
            fd = os.open(names[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError:
            return None
        self._dirs[names] = fd
        if len(self._dirs) > self._CACHE:
            _, old = self._dirs.popitem(last=False)
            os.close(old)
        return fd

    def open_listed(self, folder: tuple[str, ...], name: str) -> int | None:
        """Fast path for a regular file just listed in ``folder``: one ``openat``; None when it
        is no longer a plain file there (the caller then takes ``open``)."""
        parent = self.dir_fd(folder)
        if parent is None:
            return None
        try:
            return os.open(name, _READ_FLAGS, dir_fd=parent)
        except OSError:
            return None

    def resolve(self, rel: str) -> tuple[str, os.stat_result] | None:  # noqa: C901, PLR0912 -- one component at a time as the kernel resolves a path ('.', '..', symlinks relative and absolute, the link limit), each case beside the others it must agree with
        """(real root-relative path, lstat) of what ``rel`` names after following the symlinks
        on the way; None when missing; OutsideRoot when a symlink leads out."""
        stack: list[str] = []
        pending = rel.split("/")[::-1]
        links = 0
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if not stack:
                    raise OutsideRoot(rel, "'..' above the root")
                stack.pop()
                continue
            parent = self.dir_fd(tuple(stack))
            if parent is None:
                return None
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                raise OutsideRoot(rel, f"cannot be looked up: {exc.strerror}") from exc
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise OutsideRoot(rel, "too many levels of symlinks")
                try:
                    target = os.readlink(name, dir_fd=parent)
                except OSError:
                    return None
                if target.startswith("/"):
                    # An absolute target is inside when it names the root by its real path or
                    # by the path it was given as (itself perhaps through a symlink).
                    norm = os.path.normpath(target)
                    base = next((r for r in self._roots if norm == r or norm.startswith(r.rstrip("/") + "/")), None)
                    if base is None:
                        raise OutsideRoot(rel, "a symlink leading out")
                    stack = []
                    target = os.path.relpath(norm, base)
                pending.extend(p for p in reversed(target.split("/")))
                continue
            if pending and not stat.S_ISDIR(st.st_mode):
                return None
            stack.append(name)
            if not pending:
                return "/".join(stack), st
        return None  # the root itself

    def open(self, rel: str) -> tuple[int, str] | None:
        """A read-only descriptor of the regular file ``rel`` names and its real root-relative
        path; None when missing or not a regular file; OutsideRoot when it leads out."""
        found = self.resolve(rel)
        if found is None:
            return None
        real, st = found
        if not stat.S_ISREG(st.st_mode):
            return None
        *folder, name = real.split("/")
        parent = self.dir_fd(tuple(folder))
        if parent is None:
            return None
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if _is_link_error(exc):
                raise OutsideRoot(rel, "replaced by a symlink while it was opened") from exc
            exc.filename = real  # opened by its last name in its folder: say which file it was
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd, real

    def head(
        self, rel: str, limit: int, check: Callable[[os.stat_result], None] | None = None
    ) -> tuple[bytes, int] | None:
        """(at most the first ``limit`` bytes, the file's size) of the regular file ``rel``
        names; None when missing or not a regular file; OutsideRoot when it leads out.
        ``check`` sees the opened file's stat before anything is read, and may raise."""
        found = self.open(rel)
        if found is None:
            return None
        fd, _ = found
        try:
            st = os.fstat(fd)
            if check is not None:
                check(st)
            size = st.st_size
            return _read_up_to(fd, min(limit, size)), size
        finally:
            os.close(fd)

    def names(self, folder: tuple[str, ...]) -> list[str]:
        """The names in the real folder ``folder`` (as ``dir_fd`` takes it), unsorted; empty
        when it is missing, not a folder or cannot be listed."""
        fd = self.dir_fd(folder)
        if fd is None:
            return []
        try:
            return os.listdir(fd)
        except OSError:
            return []

    def lines_from_end(self, rel: str, limit: int) -> Generator[bytes, None, None]:
        """The non-blank complete lines of the regular file ``rel`` from its end, newest first,
        reading at most about ``limit`` bytes; nothing when it is missing or not a regular file;
        OutsideRoot, before any line, when it leads out. The file is open only while iterating."""
        found = self.open(rel)
        if found is None:
            return
        fd, _ = found
        try:
            position = os.fstat(fd).st_size
            tail = b""
            spent = 0
            while position > 0 and spent < limit:
                step = min(_BACKWARDS_BLOCK, position)
                position -= step
                spent += step
                block = os.pread(fd, step, position) + tail
                lines = block.split(b"\n")
                tail = lines[0]  # may be the end of a line that starts before this block
                yield from reversed([line for line in lines[1:] if line.strip()])
            if position == 0 and tail.strip():
                yield tail
        finally:
            os.close(fd)


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(limit - total, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _fsync_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
