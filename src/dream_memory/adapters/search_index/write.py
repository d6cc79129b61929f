"""Writing the search index: a new index built aside and moved into place whole, and the files
a search read from the store written back to an existing one (so it is refreshed from changed
files only). Every write happens in one SQLite transaction with the file table it describes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from dream_memory.adapters.search_index.files import (
    SCHEMA_VERSION,
    FileTable,
    IndexedText,
    IndexRows,
    get_meta,
    i64,
    index_meta,
    put_meta,
    rel_blob,
    storable,
)

if TYPE_CHECKING:
    import sqlite3

    from dream_memory.adapters.search_index.match import OpenIndex

# FTS5 cuts tokens at 32 KiB; a file holding a longer one is never answered from the index.
MAX_TOKEN_BYTES = 32_000
# The vocabulary only grows on small refreshes (words no file holds any more stay in it, costing
# an empty look-up); it is recomputed exactly once 1/VOCAB_RECOUNT_SHARE of the files changed.
VOCAB_RECOUNT_SHARE = 4

# Every ASCII character but the whitespace ``bytes.split()`` splits on is a token character.
_WHITESPACE = " \t\n\r\x0b\x0c"
_TOKEN_CHARS = "".join(chr(c) for c in range(1, 128) if not chr(c).isalnum() and chr(c) not in _WHITESPACE)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_TOKENIZE = "ascii tokenchars " + _sql_string(_TOKEN_CHARS)
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY, rel BLOB UNIQUE NOT NULL, size INTEGER, mtime INTEGER,"
    " ctime INTEGER, ino INTEGER, indexed_ns INTEGER, headings BLOB, skip TEXT, direct INTEGER)",
    f"CREATE VIRTUAL TABLE texts USING fts5(body, columnsize=0, tokenize = {_sql_string(_TOKENIZE)})",
    "CREATE VIRTUAL TABLE text_tokens USING fts5vocab(texts, instance)",
    "CREATE VIRTUAL TABLE text_vocab USING fts5vocab(texts, row)",
)


def fill_new(
    db: sqlite3.Connection, fresh: Sequence[IndexedText], store_real: str, index_rows: IndexRows | None
) -> None:
    """The schema and every row of a new index in ``db`` (a fresh file, no journal)."""
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    for statement in SCHEMA:
        db.execute(statement)
    db.execute("BEGIN")
    table = FileTable([], array("q"), {})
    for item in fresh:
        if storable(item):
            table.add(item.rel, _insert(db, item)[0], item.skip)
    table.write(db)
    put_meta(db, "version", str(SCHEMA_VERSION))
    put_meta(db, "store", store_real)
    put_meta(db, "index", index_meta(index_rows))
    put_meta(db, "vocab", _exact_vocab(db))
    put_meta(db, "reindexed", "0")
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")


def update(
    opened: OpenIndex,
    fresh: Sequence[IndexedText],
    keep: set[str],
    index_rows: IndexRows | None,
    purge: Iterable[str] = (),
) -> bool:
    """Re-index the files read from the store and forget files no longer searched (``keep``
    holds every rel still searched); record index.md's rows (None: keep none). ``purge``: rels
    whose text must not stay behind (newly excluded entities); deleted text is then
    overwritten. False when the index is busy or could not be written."""
    import sqlite3

    fresh = [item for item in fresh if storable(item)]
    gone = [rel for rel in opened.files.rels if rel not in keep]
    if not fresh and not gone and index_rows == opened.index_rows:
        return True
    purging = bool(set(purge).intersection(gone))
    db = opened.db
    try:
        # The search read one snapshot; another search may have written since. Writes go by rel
        # and re-read what they extend (the file table, the vocabulary).
        if db.in_transaction:
            db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        try:
            purging = _rewrite(db, opened, fresh, gone, index_rows, purging=purging)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if purging:
            # Deleted rows leave their text in FTS5's older segments, freed pages and the
            # write-ahead log until merged, vacuumed and truncated (a search still reading holds
            # the log until it closes).
            db.execute("INSERT INTO texts(texts) VALUES ('optimize')")
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True
    except (sqlite3.Error, OSError, ValueError, OverflowError):
        return False


def _rewrite(
    db: sqlite3.Connection,
    opened: OpenIndex,
    fresh: Sequence[IndexedText],
    gone: list[str],
    index_rows: IndexRows | None,
    *,
    purging: bool,
) -> bool:
    """The rows of one update, inside its transaction. ``purging``: deleted text must not stay
    behind; returned True also when index.md's recorded rows were dropped."""
    table = FileTable.read(db)
    changed = [*gone, *(item.rel for item in fresh)]
    for rel in changed:
        _delete(db, rel)
    table.remove(changed)
    vocab_add: set[bytes] = set()
    for item in fresh:
        fields, indexed = _insert(db, item)
        table.add(item.rel, fields, item.skip)
        if indexed is not None:
            vocab_add.update(indexed.split())
    table.write(db)
    if index_rows != opened.index_rows:
        put_meta(db, "index", index_meta(index_rows))
        purging = purging or (opened.index_rows is not None and index_rows is None)
    reindexed = int(get_meta(db, "reindexed") or 0) + len(changed)
    if purging or reindexed * VOCAB_RECOUNT_SHARE > max(len(table), 1):
        put_meta(db, "vocab", _exact_vocab(db))
        reindexed = 0
    elif vocab_add:
        known = set(bytes(get_meta(db, "vocab") or b"").split(b"\n"))
        if not vocab_add <= known:
            put_meta(db, "vocab", b"".join(t + b"\n" for t in sorted(known | vocab_add) if t))
    put_meta(db, "reindexed", str(reindexed))
    return purging


def _delete(db: sqlite3.Connection, rel: str) -> None:
    blob = rel_blob(rel)
    db.execute("DELETE FROM texts WHERE rowid IN (SELECT id FROM files WHERE rel = ?)", (blob,))
    db.execute("DELETE FROM files WHERE rel = ?", (blob,))


def _insert(db: sqlite3.Connection, item: IndexedText) -> tuple[list[int], bytes | None]:
    """Index one file: its packed fields (see ``FileTable``), and its folded text when FTS5 holds
    it (None when the file is only recorded: skipped, or read directly every time)."""
    folded = item.folded
    # Only a text longer than FTS5's token limit can hold a token it would cut.
    direct = (
        folded is not None
        and len(folded) > MAX_TOKEN_BYTES
        and max(map(len, folded.split()), default=0) > MAX_TOKEN_BYTES
    )
    size, mtime, ctime, ino = item.key
    cursor = db.execute(
        "INSERT INTO files (rel, size, mtime, ctime, ino, indexed_ns, headings, skip, direct)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (rel_blob(item.rel), size, mtime, ctime, i64(ino), item.read_ns, item.headings, item.skip, int(direct)),
    )
    fid = int(cursor.lastrowid or 0)
    fields = [fid, size, mtime, ctime, i64(ino), item.read_ns, int(direct)]
    if folded is None or direct:
        return fields, None
    db.execute("INSERT INTO texts (rowid, body) VALUES (?, ?)", (fid, folded.decode("utf-8", errors="surrogateescape")))
    return fields, folded


def _exact_vocab(db: sqlite3.Connection) -> bytes:
    return b"".join(
        term.encode("utf-8", errors="surrogateescape") + b"\n" for (term,) in db.execute("SELECT term FROM text_vocab")
    )
