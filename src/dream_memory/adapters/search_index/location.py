"""Where one store's search index lives (a file under the user's cache folder, never in the
store), and how it is opened, built, removed and pruned; a folder that is not the user's own
private one (``trust``) is none of these, unless it is the user's own to make private again.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
import weakref
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.search_index import mark, trust
from dream_memory.adapters.search_index.files import (
    SCHEMA_VERSION,
    FileTable,
    IndexedText,
    IndexRows,
    get_meta,
    rel_blob,
)
from dream_memory.adapters.search_index.match import OpenIndex
from dream_memory.adapters.search_index.write import fill_new
from dream_memory.core.index_table import root_contains

if TYPE_CHECKING:
    import sqlite3


def _within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or under it, by file identity (so a case-insensitive file
    system cannot hide the relation behind another spelling)."""
    try:
        target = os.stat(root)
    except OSError:
        return root_contains(root, path)
    current = path
    while True:
        with contextlib.suppress(OSError):
            st = os.stat(current)
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
        parent = os.path.dirname(current)
        if parent == current:
            return root_contains(root, path)
        current = parent


class SearchIndex:
    """Where one store's search index lives, and how it is opened or built."""

    def __init__(self, path: Path, store_real: str) -> None:
        self.path = path
        self.store_real = store_real
        self.busy = False
        self.unsupported = False
        self._refused: str | None = None
        self._checked = False
        self.warnings: list[str] = []  # what the user should hear of this index (a folder repaired)

    @property
    def refused(self) -> str | None:
        """Why the index's folder is not trusted, or None. Looked at once per search: only the
        user or root can make a trusted folder untrusted. A folder of the user's own that others
        may write is first made private, its index files removed (``trust.secure``): they are
        built again rather than every search reading the files until the user runs chmod."""
        if not self._checked:
            secured = trust.secure(str(self.path.parent))
            self._refused = secured.problem
            if secured.repaired is not None:
                self.warnings.append(secured.repaired)
            self._checked = True
        return self._refused

    @classmethod
    def for_store(cls, cache_root: Path, store_real: str) -> SearchIndex | None:
        """The index of ``store_real`` under ``cache_root``; None when that folder lies inside
        the store or the store inside it (a cache there would be a write to the store)."""
        root_real = os.path.realpath(cache_root)
        if _within(root_real, store_real) or _within(store_real, root_real):
            return None
        # zlib, not hashlib: loading OpenSSL costs a read's start-up several milliseconds. A
        # collision would only make two stores take turns rebuilding: open() checks the store.
        raw = store_real.encode("utf-8", errors="surrogateescape")
        key = f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}{zlib.crc32(raw[::-1]):08x}"
        return cls(Path(root_real) / f"search-v{SCHEMA_VERSION}" / f"{key}.sqlite", store_real)

    def open(self, kept: KeptIndex | None = None) -> OpenIndex | None:
        """The index, or None when there is none usable (a corrupt one is removed). With ``kept``
        (a long-lived reader's), the connection it holds is reused while the index is the same
        file and no other connection has written it since."""
        st = self._present()
        if st is None:
            return None
        import sqlite3

        if kept is not None:
            reused = kept.reuse(self.path, st)
            if reused is not None:
                return reused
        if not mark.trusted(self.path):
            # Written by something other than dream-memory, or a write of ours whose record was
            # never made (a kill in between): not trusted, built again. FTS5's own integrity
            # check cannot stand in: with no copy of the texts it cannot prove a posting list
            # right, and a flipped byte there can name fewer files with no error.
            self.remove()
            return None
        db: sqlite3.Connection | None = None
        try:
            # A kept connection may serve a search in another thread (an MCP server's worker):
            # ``KeptIndex`` lets one search at a time use it.
            db = sqlite3.connect(self.path, timeout=0.2, isolation_level=None, check_same_thread=kept is None)
            _pragmas(db)
            # Read before the snapshot starts: a commit in between makes the next search reload.
            version = data_version(db) if kept is not None else 0
            # One snapshot for the whole search: the file table, the vocabulary and the postings
            # must agree even while another search writes (a file re-indexed under a new id).
            db.execute("BEGIN")
            opened = load_index(db, self.store_real, self.path)
            if kept is not None:
                kept.hold(self.path, st, opened, version)
            return opened
        except sqlite3.OperationalError as exc:
            if db is not None:
                db.close()
            text = str(exc).lower()
            if "no such table" in text or "no such column" in text:
                self.remove()  # an SQLite file, but not an index of ours: built again
            elif "no such module" in text:
                self.unsupported = True  # an SQLite without FTS5: no index, ever
            else:
                self.busy = True  # locked by a writer, or unreadable now (I/O, descriptors): skip it
            return None
        except (sqlite3.Error, ValueError, TypeError, KeyError, AttributeError):
            if db is not None:
                db.close()
            self.remove()  # corrupt, or of another store or version: built again
            return None

    def _present(self) -> os.stat_result | None:
        """The index file's stat, when it is a regular file in a trusted folder (another user's
        index answers nothing here, nor is it removed)."""
        if self.refused is not None:
            return None
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def build(self, fresh: Sequence[IndexedText], index_rows: IndexRows | None) -> bool:
        """A new index of ``fresh``, built aside and moved into place whole. False when the cache
        folder cannot be written or SQLite has no FTS5 (the search went fine anyway)."""
        import secrets
        import sqlite3

        if self.refused is not None:
            return False
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
        try:
            self._refused = trust.make_private(str(self.path.parent))
            if self._refused is not None:
                return False  # another user made the folder first: nothing of ours goes there
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # 0600 before SQLite opens it
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                fill_new(db, fresh, self.store_real, index_rows)
            finally:
                db.close()
            # Built without a journal or syncs (a crash mid-build leaves only the .tmp, pruned
            # later): the bytes reach the disk before the name does, so a power cut leaves the old
            # index, none, or this one whole, never a new name over half-written pages.
            _fsync(tmp)
            if self.path.exists():
                os.unlink(tmp)  # another search built it meanwhile: keep theirs
                return False
            self.remove()  # a write-ahead log left by a removed index must not meet the new one
            os.replace(tmp, self.path)
            self.mark_written()
            self._prune()
            return True
        except (OSError, sqlite3.Error, ValueError, OverflowError):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False

    def mark_written(self) -> None:
        """Record the index files as they are now as written by dream-memory."""
        mark.record(self.path)

    def remove(self) -> None:
        if self.refused is not None:
            return  # not ours to clean
        mark.forget(self.path)
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def _prune(self) -> None:
        """Remove what an interrupted build left behind (an hour old: a build may be running),
        and this store's caches of earlier versions with their records (search-v1: folded text in
        one blob; search-v2: the word index with a copy of every text; search-v3: one document
        per file; search-v4: invalid UTF-8 indexed as text)."""
        import hashlib
        import shutil

        old = self.path.parent.parent / "search-v1"
        v1_key = hashlib.sha256(rel_blob(self.store_real)).hexdigest()[:32]
        shutil.rmtree(old / v1_key, ignore_errors=True)
        with contextlib.suppress(OSError):
            old.rmdir()  # only when no other store's old cache is left in it
        for version in range(2, SCHEMA_VERSION):
            folder = self.path.parent.parent / f"search-v{version}"
            for suffix in ("", "-wal", "-shm", "-journal", ".written"):
                with contextlib.suppress(OSError):
                    os.unlink(folder / f"{self.path.name}{suffix}")
            with contextlib.suppress(OSError):
                folder.rmdir()
        stale_before = time.time() - 3600
        for entry in os.scandir(self.path.parent):
            with contextlib.suppress(OSError):
                if entry.name.endswith(".tmp") and entry.stat().st_mtime < stale_before:
                    os.unlink(entry.path)


def load_index(db: sqlite3.Connection, store_real: str, path: Path) -> OpenIndex:
    """The file table and index.md's recorded rows, read inside the transaction ``db`` is in."""
    if get_meta(db, "store") != store_real or get_meta(db, "version") != str(SCHEMA_VERSION):
        raise ValueError("index of another store or version")
    index = json.loads(get_meta(db, "index") or "{}")
    files = FileTable.read(db)
    key = index.get("key")
    rows = index.get("rows")
    kept = (
        IndexRows(tuple(key), [(str(a), str(b)) for a, b in rows], int(index["read_ns"]))
        if key and rows is not None
        else None
    )
    return OpenIndex(db, files, kept, path)


class KeptIndex:
    """A long-lived reader's open search index (``dream mcp``, a watched ``ReadStore``), kept
    between its searches with what was read from it (the file table, index.md's rows, the
    vocabulary), so a search that finds nothing changed does not read them again.

    Reused only while both hold: the index path is still the same file (another process that
    rebuilds it moves a new file into place; one that removes it unlinks it), and SQLite's
    ``PRAGMA data_version``, read inside the new search's snapshot, is the one read when the
    kept state was loaded, which SQLite guarantees changes whenever another connection commits
    to the database. A search that writes the index itself, or meets any error, gives up the
    kept connection; the next one opens the index afresh. ``memo`` is the facade's: what the
    last search over an unchanged index worked out from its sources (``IndexCache``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # The kept connection, in a list the finalizer below shares: a reader that is dropped or
        # still holds it at exit closes it through ``OpenIndex.close``, which records what
        # closing the last connection leaves. Closed by Python instead, the folded-in log left
        # the files unlike their record and the next search rebuilt the index. At exit a daemon
        # thread (the resident reader's socket) may still be searching with it: the finalizer
        # takes the lock first, and leaves the connection alone if it cannot.
        self._held: list[OpenIndex] = []
        weakref.finalize(self, _close_unused, self._held, self.lock)
        self.memo: object = None
        self._path: Path | None = None
        self._ident: tuple[int, int] | None = None
        self._version: int | None = None
        self.reused = False  # the last open() returned the kept state unchanged

    def reuse(self, path: Path, st: os.stat_result) -> OpenIndex | None:
        self.reused = False
        opened = self.opened
        if opened is None or path != self._path or (st.st_dev, st.st_ino) != self._ident or not mark.trusted(path):
            # Bytes written into the file by another program leave SQLite's data_version as it was.
            self.release()
            return None
        import sqlite3

        try:
            opened.db.execute("BEGIN")
            get_meta(opened.db, "dead")  # starts the snapshot: data_version is then read inside it
            if data_version(opened.db) != self._version:
                opened.db.execute("ROLLBACK")
                self.release()
                return None
        except (sqlite3.Error, ValueError, TypeError):
            self.release()
            return None
        opened.failure = None
        self.reused = True
        return opened

    def hold(self, path: Path, st: os.stat_result, opened: OpenIndex, version: int) -> None:
        self.release()
        self._version = version
        self._held.append(opened)
        self._path = path
        self._ident = (st.st_dev, st.st_ino)

    def keep(self, opened: OpenIndex, memo: object) -> None:
        """The search that used ``opened`` ends without having written it: keep it for the next."""
        if opened is not self.opened:
            opened.close()
            return
        import sqlite3

        try:
            if opened.db.in_transaction:
                opened.db.execute("COMMIT")  # ends the read snapshot: no log is held between searches
        except sqlite3.Error:
            self.release()
            return
        self.memo = memo

    @property
    def opened(self) -> OpenIndex | None:
        return self._held[0] if self._held else None

    def release(self) -> None:
        _close_held(self._held)
        self.memo = None
        self._path = self._ident = self._version = None
        self.reused = False


def _close_held(held: list[OpenIndex]) -> None:
    while held:
        held.pop().close()


def _close_unused(held: list[OpenIndex], lock: threading.Lock) -> None:
    """``KeptIndex``'s finalizer: close the kept connection unless a search holds it."""
    if lock.acquire(timeout=0.5):
        try:
            _close_held(held)
        finally:
            lock.release()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def data_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA data_version").fetchone()[0])


def _pragmas(db: sqlite3.Connection) -> None:
    # Derived data: a transaction lost in a power cut only leaves files whose recorded stat no
    # longer matches, and those are read from the store.
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA secure_delete = ON")
