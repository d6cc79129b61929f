"""The record of an index as dream-memory last wrote it: its files' identity, size and times, kept
beside it in ``<index>.written``. An index whose files no longer match the record was changed by
something else (or a write of ours was killed before recording it) and is built again
(``location.SearchIndex.open``): a cache is cheaper to rebuild than to prove right.

Closing the last connection to an index folds its write-ahead log into the database, which
changes the files but not the content: a connection that closes an index matching the record
records the result again, so a long-lived reader letting go of its connection does not make the
next search build the whole index again.

A file of the index that is not the user's own, or that others may write, has no stamp: it is
never trusted (``trust``), whatever its record says.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.search_index.trust import owned_private

if TYPE_CHECKING:
    import sqlite3

# A record is one line of six numbers (under 200 bytes); more is not a record of ours.
_RECORD_BYTES = 1000


def stamp(path: Path) -> str | None:
    """The index files as they are now (an empty write-ahead log and none are the same); None
    when the index is not the user's own (another user's, or writable by others)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}-wal")
    except OSError:
        log = "-"
    else:
        if not owned_private(wal):
            return None
        log = f"{wal.st_ino} {wal.st_size} {wal.st_mtime_ns} {wal.st_ctime_ns}" if wal.st_size else "-"
    if not owned_private(st):
        return None
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {log}"


def mark_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.written")


def trusted(path: Path) -> bool:
    """True when the index files are as dream-memory last recorded them."""
    seen = stamp(path)
    return seen is not None and seen == recorded(path)


def recorded(path: Path) -> str | None:
    """The record, when it is the user's own file (another user's would vouch for their index)."""
    try:
        fd = os.open(mark_path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not owned_private(os.fstat(fd)):
            return None
        return os.read(fd, _RECORD_BYTES).decode()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def record(path: Path, seen: str | None = None) -> None:
    """Record the index files as they are now (or as ``seen`` was taken) as dream-memory's.
    Best effort: without the record, the next open builds the index again."""
    seen = seen or stamp(path)
    if seen is None:
        return
    # Not fsutil.atomic_write: its two fsyncs would come with every search that writes the index,
    # and a record lost in a power cut costs one rebuild. Named like an interrupted build's
    # leftovers, so the same pruning removes it.
    tmp = path.with_name(f".{mark_path(path).name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, seen.encode())
        finally:
            os.close(fd)
        os.replace(tmp, mark_path(path))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(mark_path(path))


def close(db: sqlite3.Connection, path: Path | None) -> None:
    """Close ``db``; when the index matched its record before, record what closing left."""
    seen = stamp(path) if path is not None else None
    matched = seen is not None and path is not None and seen == recorded(path)
    with contextlib.suppress(Exception):
        db.close()
    if matched and path is not None and (now := stamp(path)) != seen:
        record(path, now)  # a search that only read leaves the cache folder as it was
