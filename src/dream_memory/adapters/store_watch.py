"""Watching a store's listed folders (``entities/``, ``sections/``) with Linux inotify, so a
long-lived reader (``dream mcp``, a ``ReadStore`` given a ``StoreWatch``) skips the ``lstat`` per
file that proves the search index fresh, between changes (docs/read-side.md#speed).

Why the listing it answers is the one a full listing would give: the kernel queues an inotify
event inside the system call that changes a name or a file (write, truncate, chmod, utime, link,
create, unlink, rename), before that call returns. A search first drains the queue, then
``lstat``s again only the names the events named: a change completed before the search started
is seen as the per-file ``lstat`` would see it (same size, same second included: the event does
not depend on what changed), and a change after the drain is seen by the next search. A folder is
watched before it is listed, so no change falls between the two.

Each listed file is also watched itself, before it is looked at: a change made under another
name (a hard link elsewhere, made before or after the watch started) raises no event in the
store's folder, only on the file's inode, which every name shares; making such a link changes the
link count, an ``IN_ATTRIB`` on that inode too. A name an event named is watched again before its
``lstat`` (it may hold another inode now). A file whose own watch the kernel refuses for that
file alone (no read permission, say) is ``lstat``ed every search instead.

Whatever the events cannot vouch for is listed again with one ``lstat`` per file, never answered
from memory: a queue overflow (``IN_Q_OVERFLOW``), an event on a folder itself or on a subfolder
(created, removed, renamed, replaced, its mode changed), the watched folder replaced (its inode
differs), a watch the kernel refused (``ENOSPC`` past ``max_user_watches``, ``ENOMEM``: the watch
stops for good), a symlinked file (its target's folder is not watched), and no inotify at all
(not Linux).

Not seen by inotify, and so not by this watcher: writes through a shared memory mapping (``mmap``)
and changes made on another machine of a network file system. One-shot ``dream search`` never
uses it.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Protocol

from dream_memory.adapters.store_tree import WorkTree
from dream_memory.core.ports import StoreTree

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
# A file's own watch: its inode changed, under whichever name (IN_ATTRIB includes the link count).
# IN_DONT_FOLLOW: a symlink swapped in is watched itself, never its target.
FILE_MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DONT_FOLLOW
# Refusals of one file's watch that say the watch cannot go on at all (past max_user_watches).
_FATAL_WATCH_ERRORS = frozenset({errno.ENOSPC, errno.ENOMEM})
# Events that say nothing about one file's name: the folder's whole listing is redone.
_FOLDER_EVENTS = IN_ISDIR | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
_READ_BYTES = 64 * 1024


class Inotify(Protocol):
    """The calls a watcher needs (``LibcInotify``; a test passes one that fails)."""

    def add_watch(self, path: str, mask: int) -> int: ...

    def rm_watch(self, wd: int) -> None: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


class LibcInotify:
    """inotify through libc (``ctypes``): no package ships it in the standard library."""

    def __init__(self) -> None:
        import ctypes

        # CDLL(None): the symbols already loaded into Python, libc's among them (no library search,
        # which would start a subprocess).
        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._add.restype = ctypes.c_int
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = (ctypes.c_int, ctypes.c_int)
        self._rm.restype = ctypes.c_int
        self._errno = ctypes.get_errno
        init = libc.inotify_init1
        init.argtypes = (ctypes.c_int,)
        init.restype = ctypes.c_int
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.fd = fd
        # A server dropped without close (tests build many) must not keep its instance: the
        # kernel allows a user only 128.
        self._closer = weakref.finalize(self, os.close, fd)

    def add_watch(self, path: str, mask: int) -> int:
        wd = int(self._add(self.fd, os.fsencode(path), mask))
        if wd < 0:
            err = self._errno()
            raise OSError(err, os.strerror(err), path)
        return wd

    def rm_watch(self, wd: int) -> None:
        # EINVAL: the kernel dropped it already (its inode deleted), which is all that was asked.
        self._rm(self.fd, wd)

    def read(self) -> bytes:
        try:
            return os.read(self.fd, _READ_BYTES)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        self._closer()


def open_inotify() -> Inotify | None:
    """An inotify instance, or None where there is none (not Linux, no libc symbol, a limit)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return LibcInotify()
    except (OSError, AttributeError):
        return None


def _stat_differs(old: os.stat_result, new: os.stat_result) -> bool:
    return (old.st_size, old.st_mtime_ns, old.st_ctime_ns, old.st_ino, old.st_mode, old.st_nlink) != (
        new.st_size,
        new.st_mtime_ns,
        new.st_ctime_ns,
        new.st_ino,
        new.st_mode,
        new.st_nlink,
    )


class _Folder:
    """One watched folder's listing: each markdown file's lstat, and what the next search must
    look at again."""

    def __init__(self, ident: tuple[int, int]) -> None:
        self.ident = ident
        self.stats: dict[str, os.stat_result] = {}
        self.found: list[str] = []
        self.dirs: dict[str, int] = {}  # folder (store-relative, no trailing slash) -> descriptor
        self.wds: set[int] = set()
        self.dirty: set[str] = set()
        self.file_wds: dict[str, int] = {}  # file -> its own watch (shared by its hard links)
        self.unwatched: set[str] = set()  # files whose own watch was refused: lstat'ed every search
        self.valid = True

    def close(self) -> None:
        for fd in self.dirs.values():
            os.close(fd)
        self.dirs.clear()


class StoreWatch:
    """The listings of one store's folders, kept fresh by inotify (see the module docstring).

    ``list_markdown`` answers what ``WorkTree.list_markdown`` answers, stats included; it falls
    back to that full listing whenever the events cannot vouch for the answer.
    ``full_listings`` counts the listings made with one lstat per file (tests, the bench).
    ``generation`` grows whenever a listing may differ from the one before: an event named a
    file, a folder was listed in full, or the watch could not answer. Two reads of it that agree,
    with listings in between, prove those listings (and their stats) equal to the earlier ones:
    a long-lived reader keeps what it built from them (``app.read.search``) while it holds."""

    def __init__(self, root: str, *, inotify: Callable[[], Inotify | None] = open_inotify) -> None:
        self.root = os.path.realpath(root)
        self._inotify: Inotify | None = inotify()
        self._folders: dict[str, _Folder] = {}
        self._wds: dict[int, tuple[_Folder, str]] = {}  # watch -> (its folder's listing, prefix)
        self._files: dict[int, list[tuple[_Folder, str]]] = {}  # a file's own watch -> its names
        # Watches no listing holds any more, checked once a look is over (``_release``): a file or
        # folder moved out of the store keeps its inode, and the kernel its watch, for as long as
        # the server runs; past ``max_user_watches`` every search would lstat every file.
        self._dropped: set[int] = set()
        self._lock = threading.Lock()
        self.full_listings = 0
        self.generation = 0

    @property
    def active(self) -> bool:
        return self._inotify is not None

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        for folder in self._folders.values():
            folder.close()
        self._folders.clear()
        self._wds.clear()
        self._files.clear()
        self._dropped.clear()
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def list_markdown(self, tree: StoreTree, folder: str, stats: dict[str, os.stat_result] | None) -> list[str]:
        if not isinstance(tree, WorkTree) or tree.real_root != self.root:
            self.generation += 1
            return tree.list_markdown(folder, stats)
        with self._lock:
            if self._inotify is None:
                self.generation += 1
                return tree.list_markdown(folder, stats)
            self._drain()
            ident = tree.folder_identity(folder)
            state = self._folders.get(folder)
            if state is not None and state.valid and state.ident == ident:
                self._refresh(state)
            if ident is None:
                self.generation += 1  # (a folder gone is rare: nothing is vouched for)
                gone = self._folders.pop(folder, None)
                if gone is not None:  # (moved out of the store, its watches would stay behind)
                    self._forget(gone)
                    self._release()
                return []  # missing: the full listing would find nothing either
            if state is None or not state.valid or state.ident != ident:
                self.generation += 1
                state = self._list(tree, folder, ident)
                if state is None:
                    return tree.list_markdown(folder, stats)
            self._release()
            if stats is not None:
                stats.update(state.stats)
            return list(state.found)

    # --- events --------------------------------------------------------------------------------

    def _drain(self) -> None:
        assert self._inotify is not None
        while True:
            try:
                buf = self._inotify.read()
            except OSError:
                self._invalidate_all()
                return
            if not buf:
                return
            self.consume(buf)

    def consume(self, buf: bytes) -> None:
        """Apply a buffer of ``struct inotify_event`` records (what ``read`` returned)."""
        off = 0
        size = _EVENT.size
        while off + size <= len(buf):
            wd, mask, _cookie, length = _EVENT.unpack_from(buf, off)
            name = buf[off + size : off + size + length].split(b"\0", 1)[0]
            off += size + length
            if mask & IN_Q_OVERFLOW:
                self._invalidate_all()  # events were lost: nothing kept can be vouched for
                continue
            watched = self._wds.get(wd)
            if watched is None:
                self._file_event(wd, mask)
                continue
            state, prefix = watched
            if not name or mask & _FOLDER_EVENTS:
                state.valid = False
            elif name.endswith(b".md") and not name.startswith(b"."):
                state.dirty.add(prefix + os.fsdecode(name))

    def _file_event(self, wd: int, mask: int) -> None:
        """An event on a file's own watch (or on a folder no listing holds any more: moved out,
        listed again, which names nothing here): each name of that file is looked at again."""
        names = self._files.get(wd)
        if names is None:
            return
        for state, rel in names:
            state.dirty.add(rel)
        if mask & IN_IGNORED:  # the watch is gone (the file deleted): the next look watches anew
            for state, rel in names:
                state.file_wds.pop(rel, None)
            del self._files[wd]

    def _watch_file(self, state: _Folder, fd: int, rel: str) -> None:
        """Watch the file ``rel`` (in the folder open as ``fd``) itself, before it is looked at:
        a change after this raises an event whatever name it is made under. A refusal for this
        file alone leaves it to the lstat of every search; ``ENOSPC``/``ENOMEM`` are raised (the
        watch stops), ``ENOENT`` means it is gone (its folder's event says so)."""
        assert self._inotify is not None
        try:
            wd = self._inotify.add_watch(f"/proc/self/fd/{fd}/{rel.rpartition('/')[2]}", FILE_MASK)
        except OSError as e:
            if e.errno in _FATAL_WATCH_ERRORS:
                raise
            self._unmap_file(state, rel)
            if e.errno != errno.ENOENT:
                state.unwatched.add(rel)
            return
        state.unwatched.discard(rel)
        if state.file_wds.get(rel) != wd:
            self._unmap_file(state, rel)
            state.file_wds[rel] = wd
            self._files.setdefault(wd, []).append((state, rel))

    def _unmap_file(self, state: _Folder, rel: str) -> None:
        wd = state.file_wds.pop(rel, -1)
        names = self._files.get(wd)
        if names is None:
            return
        names[:] = [(s, r) for s, r in names if s is not state or r != rel]
        if not names:
            del self._files[wd]
            self._dropped.add(wd)

    def _release(self) -> None:
        """Remove from the kernel the watches dropped during this look that no listing took up
        again (a listing made again gets the same watch back for the same inode)."""
        assert self._inotify is not None
        for wd in self._dropped:
            if wd not in self._files and wd not in self._wds:
                self._inotify.rm_watch(wd)
        self._dropped.clear()

    def _forget(self, state: _Folder) -> None:
        """Drop a listing no search will use again: its folders' and files' watches (removed from
        the kernel by ``_release`` unless a new listing takes them up) and its descriptors."""
        for wd in state.wds:
            self._wds.pop(wd, None)
            self._dropped.add(wd)
        for rel in list(state.file_wds):
            self._unmap_file(state, rel)
        state.close()

    def _invalidate_all(self) -> None:
        for state in self._folders.values():
            state.valid = False

    def _refresh(self, state: _Folder) -> None:
        """lstat again the names events named (and the files without a watch of their own), each
        watched again first; a name that became a link, a folder or anything unexpected makes
        the folder be listed again."""
        names = state.dirty | state.unwatched
        if state.dirty:
            self.generation += 1  # an event named a file: whatever it did, listings may differ
        state.dirty = set()
        changed = False
        for rel in names:
            parent, _, name = rel.rpartition("/")
            fd = state.dirs.get(parent)
            if fd is None:
                state.valid = False
                return
            try:
                self._watch_file(state, fd, rel)  # before the look: a later change raises an event
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                st = None
            except OSError:
                state.valid = False
                return
            if st is not None and not stat.S_ISREG(st.st_mode):
                if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
                    state.valid = False
                    return
                st = None  # a FIFO or a device: the listing skips it too
            if st is None:
                changed = state.stats.pop(rel, None) is not None or changed
                state.unwatched.discard(rel)
                self._unmap_file(state, rel)
                continue
            changed = changed or rel not in state.stats
            old = state.stats.get(rel)
            if old is None or _stat_differs(old, st):
                self.generation += 1  # a file without a watch of its own, changed
            state.stats[rel] = st
        if changed:
            state.found = sorted(state.stats)

    # --- the full listing ----------------------------------------------------------------------

    def _list(self, tree: WorkTree, folder: str, ident: tuple[int, int]) -> _Folder | None:
        """List ``folder`` with one lstat per file, watching each of its folders first; None when
        it cannot be watched (the watch stops for good). A folder holding a symlinked file is
        answered but not kept (the link's target is not watched)."""
        old = self._folders.pop(folder, None)
        if old is not None:
            self._forget(old)
        state = _Folder(ident)
        inotify = self._inotify
        assert inotify is not None

        def watch(fd: int, prefix: str) -> None:
            wd = inotify.add_watch(f"/proc/self/fd/{fd}", WATCH_MASK)
            state.dirs[prefix[:-1]] = os.dup(fd)
            state.wds.add(wd)
            self._wds[wd] = (state, prefix)
            # Its files' own watches, before the listing looks at them (the folder's watch, already
            # there, tells of a file added since). d_type spares an lstat: a subfolder gets its
            # folder watch when it is listed, a symlinked file makes the listing not kept.
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        name = entry.name
                        if name.endswith(".md") and not name.startswith(".") and entry.is_file(follow_symlinks=False):
                            self._watch_file(state, fd, prefix + name)
            except OSError as e:
                if e.errno in _FATAL_WATCH_ERRORS:
                    raise
                unread.append(prefix)  # (EACCES, say) its files are not watched: not kept

        unread: list[str] = []
        self.full_listings += 1
        try:
            found, links = tree.list_markdown_watched(folder, state.stats, watch)
        except OSError:
            # ENOSPC (max_user_watches), ENOMEM, no /proc: every search lstats every file from now on.
            state.close()
            self._stop()
            return None
        if links or unread:
            # Answered from this listing, kept for no other search.
            self._forget(state)
            state.found = found
            state.valid = False
            return state
        state.found = found
        self._folders[folder] = state
        return state
