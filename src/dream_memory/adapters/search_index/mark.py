"""The record of an index as dream-memory last wrote it: its files' identity, size and times, kept
beside it in ``<index>.written``. An index whose files no longer match the record was changed by
something else (or a write of ours was killed before recording it) and is built again
(``location.SearchIndex.open``): a cache is cheaper to rebuild than to prove right.

Closing the last connection to an index folds its write-ahead log into the database, which
changes the files but not the content: a connection that closes an index matching the record
records the result again, so a long-lived reader letting go of its connection does not make the
next search build the whole index again.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3


def stamp(path: Path) -> str | None:
    """The index files as they are now (an empty write-ahead log and none are the same)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}-wal")
        log = f"{wal.st_ino} {wal.st_size} {wal.st_mtime_ns} {wal.st_ctime_ns}" if wal.st_size else "-"
    except OSError:
        log = "-"
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {log}"


def mark_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.written")


def trusted(path: Path) -> bool:
    """True when the index files are as dream-memory last recorded them."""
    seen = stamp(path)
    return seen is not None and seen == recorded(path)


def recorded(path: Path) -> str | None:
    try:
        return mark_path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None


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
