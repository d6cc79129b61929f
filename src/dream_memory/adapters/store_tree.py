"""Where the read side's bytes come from (``core.ports.StoreTree``): a store folder as it is on
disk, or the store as committed at one git revision. The read side's use cases (``app.read``)
never open, list or stat a file themselves; they get a tree from ``open_tree``.

Read-only by construction: files are opened ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK`` through
``adapters.rooted.Beneath``, so a symlink is followed only while it stays inside the store, and a
file it leads to must itself be one the read side serves. A revision is read through a git
repository opened read-only (``adapters.git.open_readonly``): no author, no clock, no write.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

from dream_memory.adapters.rooted import Beneath, OutsideRoot
from dream_memory.core import layout
from dream_memory.core.paths import kind_of_mode, serve_problem
from dream_memory.core.ports import StoreTree, TooLarge
from dream_memory.errors import InputError, Refused, UsageError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_CHUNK = 256 * 1024


def open_tree(root: Path | str, at: str | None = None) -> StoreTree:
    """The store folder ``root`` as it is now, or as committed at revision ``at``.

    ``InputError`` when the folder does not exist; ``UsageError`` when ``at`` is given and the
    folder is not inside a git repository; ``UnknownRevision`` for a revision git does not know."""
    folder = os.path.abspath(root)
    if not os.path.isdir(folder):
        raise InputError(
            f"the store folder {folder} does not exist",
            hint="set --store, DREAM_MEMORY_STORE or --workspace to a folder holding index.md",
        )
    return WorkTree(folder) if at is None else RevisionTree(folder, at)


def absolute_path(path: str) -> str:
    """``path`` made absolute against the current folder (a path given to ``dream resolve``)."""
    return os.path.abspath(path)


def real_path(path: str) -> str:
    """``path`` with every symlink on it followed (as far as it exists)."""
    return os.path.realpath(path)


def _read_fd(fd: int, rel: str, limit: int) -> bytes:
    """All bytes of a regular file; a short read is the end (so a small file costs one read)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, _READ_CHUNK)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooLarge(rel)
        if len(chunk) < _READ_CHUNK:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class WorkTree:
    """The store folder as it is on disk, reached through ``adapters.rooted.Beneath``: a symlink
    is followed only while it stays inside the store, and a file it leads to must itself be one
    the read side serves (never ``.git/``, raw history or a hidden file)."""

    revision: str | None = None

    def __init__(self, root: Path | str) -> None:
        self.root = os.path.abspath(root)
        self.beneath = Beneath(self.root)
        self.real_root: str | None = self.beneath.real_root

    def close(self) -> None:
        self.beneath.close()

    def _open_fd(self, rel: str) -> int | None:
        """A read-only descriptor of a regular file inside the store, None when missing."""
        try:
            found = self.beneath.open(rel)
        except OutsideRoot as exc:
            raise Refused(f"{rel} leads outside the store ({exc.why}); it is not served") from None
        except OSError as exc:
            raise Refused(f"{rel} cannot be opened for reading ({exc.strerror})") from exc
        if found is None:
            return None
        fd, real = found
        if real != rel:
            # A symlink inside the store: where it leads must be servable too.
            problem = serve_problem(real, markdown=False) if real != layout.HISTORY else None
            if problem is not None:
                os.close(fd)
                raise Refused(f"{rel} leads to {real} ({problem}); it is not served")
        return fd

    def has_file(self, rel: str) -> bool:
        try:
            found = self.beneath.resolve(rel)
        except OutsideRoot:
            return True  # it exists; reading it will refuse with the reason
        return found is not None and stat.S_ISREG(found[1].st_mode)

    def open_stream(self, rel: str) -> IO[bytes] | None:
        fd = self._open_fd(rel)
        return None if fd is None else os.fdopen(fd, "rb")

    def kind_of(self, rel: str) -> str | None:
        try:
            found = self.beneath.resolve(rel)
        except OutsideRoot:
            return None  # opening it refuses it with that reason
        return None if found is None else kind_of_mode(found[1].st_mode)

    def identity_of(self, rel: str, stream: IO[bytes]) -> object:
        st = os.fstat(stream.fileno())
        return (st.st_dev, st.st_ino)

    def identity(self, rel: str, listed: os.stat_result | None = None) -> object | None:
        """Device and inode: hard links and symlinks share them."""
        if listed is not None:
            return (listed.st_dev, listed.st_ino)
        try:
            fd = self._open_fd(rel)
        except Refused:
            return None
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return (st.st_dev, st.st_ino)

    def read(self, rel: str, limit: int, *, listed: bool = False) -> bytes | None:
        if listed:
            # Hot path of search (thousands of files just listed as regular files): one openat
            # relative to the folder's descriptor, no symlink followed. Anything else (a symlink
            # swapped in, a file gone) takes the checked path below.
            folder, _, name = rel.rpartition("/")
            fd = self.beneath.open_listed(tuple(folder.split("/")) if folder else (), name)
            if fd is not None:
                try:
                    return _read_fd(fd, rel, limit)
                except (IsADirectoryError, BlockingIOError):
                    return None  # replaced by a folder or a FIFO since it was listed
                finally:
                    os.close(fd)
        checked = self._open_fd(rel)
        if checked is None:
            return None
        try:
            if not stat.S_ISREG(os.fstat(checked).st_mode):
                return None
            return _read_fd(checked, rel, limit)
        finally:
            os.close(checked)

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        """``*.md`` files under ``folder`` (store-relative), sorted; dotfiles skipped, symlinked
        folders not followed, symlinked files kept only when they stay inside the store.
        ``stats`` receives the lstat of each regular file (the search index's freshness proof)."""
        found, _ = self.list_markdown_watched(folder, stats)
        return found

    def folder_identity(self, folder: str) -> tuple[int, int] | None:
        """(device, inode) of ``folder`` as reached now (no symlink followed), None when missing."""
        fd = self.beneath.dir_fd(tuple(folder.split("/")))
        if fd is None:
            return None
        st = os.fstat(fd)
        return st.st_dev, st.st_ino

    def list_markdown_watched(
        self,
        folder: str,
        stats: dict[str, os.stat_result] | None = None,
        on_folder: Callable[[int, str], None] | None = None,
    ) -> tuple[list[str], bool]:
        """``list_markdown``, calling ``on_folder(descriptor, prefix)`` for each folder before it
        is listed (a watcher watches it from then on, so no change falls between the watch and
        the listing); also whether a symlinked file was listed (its target is not watched)."""
        found: list[str] = []
        cached = self.beneath.dir_fd(tuple(folder.split("/")))
        if cached is None:
            return found, False  # missing, not a folder, or a symlink: not descended into
        stack: list[tuple[str, int]] = [(folder, os.dup(cached))]  # ours: the cache may close its own
        links = False
        while stack:
            current, fd = stack.pop()
            try:
                if on_folder is not None:
                    on_folder(fd, current + "/")
                links = self._list_folder(fd, current + "/", found, stats, stack) or links
            finally:
                os.close(fd)
        found.sort()
        return found, links

    def _list_folder(
        self,
        fd: int,
        prefix: str,
        found: list[str],
        stats: dict[str, os.stat_result] | None,
        stack: list[tuple[str, int]],
    ) -> bool:
        """One folder of ``list_markdown``: its markdown files to ``found``, its subfolders
        (opened) to ``stack``. The search over 10,000 files runs this loop once per file."""
        lstat = os.lstat
        links = False
        # listdir plus one lstat per name relative to the folder's descriptor: the cheapest way
        # Python has to both list and stat (search needs the stat of every file).
        try:
            for name in os.listdir(fd):
                if name.startswith("."):
                    continue
                try:
                    st = lstat(name, dir_fd=fd)
                except OSError:
                    continue
                mode = st.st_mode
                if stat.S_ISREG(mode):
                    if name.endswith(".md"):
                        rel = prefix + name
                        found.append(rel)
                        if stats is not None:
                            stats[rel] = st
                elif stat.S_ISDIR(mode):
                    try:
                        stack.append((prefix + name, os.open(name, _DIR_FLAGS, dir_fd=fd)))
                    except OSError:
                        continue
                elif stat.S_ISLNK(mode) and name.endswith(".md") and self.has_file(prefix + name):
                    found.append(prefix + name)
                    links = True
        except OSError:
            pass
        return links


class RevisionTree:
    """The store as committed at one revision (symlinks are not regular files there: skipped)."""

    real_root: str | None = None  # nothing on disk is read: no search index either

    def __init__(self, root: str, rev: str) -> None:
        from dream_memory.adapters.git import open_readonly

        git = open_readonly(Path(root))
        if git is None:
            raise UsageError(
                f"--at needs a store versioned in git, and {root} is not inside a git repository",
                hint="drop --at to read the files as they are now",
            )
        try:
            self.revision: str | None = git.resolve(rev)
            self.files = git.files_at(self.revision)
        except BaseException:
            git.close()
            raise
        self.root = root
        self.git = git

    def close(self) -> None:
        self.git.close()

    def read(self, rel: str, limit: int, *, listed: bool = False) -> bytes | None:
        entry = self.files.get(rel)
        if entry is None:
            return None
        data = self.git.blob(entry[1])
        if len(data) > limit:
            raise TooLarge(rel)
        return data

    def open_stream(self, rel: str) -> IO[bytes] | None:
        entry = self.files.get(rel)
        return None if entry is None else io.BytesIO(self.git.blob(entry[1]))

    def has_file(self, rel: str) -> bool:
        return rel in self.files

    def kind_of(self, rel: str) -> str | None:
        # ``files`` holds only regular files: a symlink is committed as its target's path, and
        # following it would read a file the commit may not hold, so it is named, never read.
        if rel in self.files or self.revision is None:
            return None
        mode = self.git.mode_at(self.revision, rel)
        return None if mode is None else kind_of_mode(mode)

    def identity_of(self, rel: str, stream: IO[bytes]) -> object:
        return self.identity(rel)

    def identity(self, rel: str, listed: os.stat_result | None = None) -> object | None:
        """The blob: two paths holding the same content are one file here."""
        entry = self.files.get(rel)
        return None if entry is None else entry[1]

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        prefix = folder + "/"
        return sorted(
            p
            for p in self.files
            if p.startswith(prefix) and p.endswith(".md") and not any(part.startswith(".") for part in p.split("/"))
        )
