"""The search index's values and its file table: what is recorded about each indexed file.

Everything here is shared by the read side (``match``) and the write side (``write``) of the
index; nothing here opens a database.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import sqlite3

# 3: the word index keeps no copy of the texts (contentless FTS5: 0.36x the size of version 2),
# file ids are never reused, and a changed file's old postings stay behind unreferenced until
# the index is rebuilt (``write.DEAD_SHARE``).
# 4: each file is indexed as up to ``DOCS_PER_FILE`` documents (``write.pieces``).
# 5: a file whose first 8 KiB are not UTF-8 (history.jsonl aside) is recorded as skipped
# (binary), as entity and section refuse it; version 4 indexed its text.
SCHEMA_VERSION = 5

# A file's text is indexed as pieces cut at whitespace, document ``id * DOCS_PER_FILE + n`` for
# its n-th piece, so the document's file id is ``doc / DOCS_PER_FILE`` in SQL. Why pieces: FTS5
# stores each word's positions, and a position below 126 takes one byte where one further into a
# file takes two; most words occur once per file, so that byte is a quarter of the index.
DOCS_PER_FILE = 12

StatKey = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode

# Fields per file in the packed file table: id, size, mtime_ns, ctime_ns, inode, indexed_ns, direct.
FIELDS = 7
_INT64 = range(-(1 << 63), 1 << 63)


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def rel_blob(rel: str) -> bytes:
    """A rel as stored: file names need not be UTF-8 (they come back from the OS as surrogates)."""
    return rel.encode("utf-8", errors="surrogateescape")


def i64(value: int) -> int:
    """An inode as SQLite and int64 arrays hold it (inodes may use all 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


class IndexRows(NamedTuple):
    """index.md's (entity, file) rows as parsed, with its stat and when it was read: the next
    search reuses them instead of parsing index.md while the stat is the same and not racy."""

    key: StatKey
    rows: list[tuple[str, str]]
    read_ns: int


class IndexedText(NamedTuple):
    """A file read from the store in this search, to be (re-)indexed: its folded text, or None
    with the reason it is not searchable (binary, too large)."""

    rel: str
    key: StatKey
    read_ns: int
    folded: bytes | None
    headings: bytes = b""
    skip: str | None = None


def storable(item: IndexedText) -> bool:
    """SQLite integers are 64-bit: a file stamped after the year 2262 is read, never indexed."""
    return all(value in _INT64 for value in (*item.key[:3], item.read_ns))


class FileTable:
    """The recorded files, kept packed in the index's meta table and loaded in one piece per
    search (10,000 rows fetched as SQLite tuples cost more than the rest of a search): the rels,
    one flat int64 array of their fields (``FIELDS`` per file), each rel's offset into it, and
    the skip reasons. Every write edits it inside the same transaction as the rows it describes."""

    def __init__(self, rels: list[str], fields: array[int], skips: dict[str, str]) -> None:
        if len(fields) != FIELDS * len(rels):
            raise ValueError("index file table is inconsistent")
        self.rels = rels
        self.fields = fields
        self.skips = skips
        self.where = dict(zip(rels, range(0, len(fields), FIELDS), strict=True))

    @classmethod
    def read(cls, db: sqlite3.Connection) -> FileTable:
        if get_meta(db, "byteorder") != sys.byteorder:
            raise ValueError("index written on a machine of another byte order")
        names = bytes(get_meta(db, "file_names") or b"")
        fields: array[int] = array("q")
        fields.frombytes(bytes(get_meta(db, "file_fields") or b""))
        rels = names.decode("utf-8", errors="surrogateescape").split("\0") if names else []
        return cls(rels, fields, json.loads(get_meta(db, "file_skips") or "{}"))

    def write(self, db: sqlite3.Connection) -> None:
        put_meta(db, "file_names", "\0".join(self.rels).encode("utf-8", errors="surrogateescape"))
        put_meta(db, "file_fields", self.fields.tobytes())
        put_meta(db, "file_skips", json.dumps(self.skips))
        put_meta(db, "byteorder", sys.byteorder)

    def __len__(self) -> int:
        return len(self.rels)

    def remove(self, rels: Iterable[str]) -> None:
        """Forget these files (from the end backwards: each removal is one C-level move)."""
        for at in sorted({self.where[rel] for rel in rels if rel in self.where}, reverse=True):
            del self.rels[at // FIELDS]
            del self.fields[at : at + FIELDS]
        for rel in rels:
            self.skips.pop(rel, None)
        self.where = dict(zip(self.rels, range(0, len(self.fields), FIELDS), strict=True))

    def add(self, rel: str, fields: Sequence[int], skip: str | None) -> None:
        self.where[rel] = len(self.fields)
        self.rels.append(rel)
        self.fields.extend(fields)
        if skip:
            self.skips[rel] = skip

    def unchanged(self, rel: str, st: os.stat_result) -> int | None:
        """The offset of ``rel``'s fields when its recorded stat is ``st``'s."""
        at = self.where.get(rel)
        if at is None:
            return None
        f = self.fields
        if f[at + 2] != st.st_mtime_ns or f[at + 3] != st.st_ctime_ns or f[at + 1] != st.st_size:
            return None
        return at if f[at + 4] == i64(st.st_ino) else None


def put_meta(db: sqlite3.Connection, key: str, value: str | bytes) -> None:
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def get_meta(db: sqlite3.Connection, key: str) -> Any:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def index_meta(index_rows: IndexRows | None) -> str:
    if index_rows is None:
        return json.dumps({"key": None, "rows": None})
    return json.dumps({"key": index_rows.key, "rows": index_rows.rows, "read_ns": index_rows.read_ns})
