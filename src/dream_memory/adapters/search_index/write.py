"""Writing the search index: a new index built aside and moved into place whole, and the files
a search read from the store written back to an existing one (so it is refreshed from changed
files only). Every write happens in one SQLite transaction with the file table it describes.
"""

from __future__ import annotations

import contextlib
import functools
import re
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from dream_memory.adapters.search_index.files import (
    DOCS_PER_FILE,
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
# The vocabulary only grows on refreshes (words no file holds any more stay in it, costing an
# empty look-up). Kept for the callers of the former single module: the vocabulary is exact again
# whenever the index is rebuilt (see DEAD_SHARE).
VOCAB_RECOUNT_SHARE = 4
# The word index holds no copy of the texts (FTS5 ``content=''``: the postings are what ranking
# needs, and the texts were two thirds of the index), and SQLite before 3.43 cannot delete a
# document from such an index without its old text. So a changed or removed file's postings stay
# behind under its old id, which no file row names any more: the index never answers from them
# (``facade`` keeps only ids of the file table) and ids are never reused (AUTOINCREMENT). Once
# the leftovers outnumber DEAD_SHARE times the files (the index has grown to about twice its
# built size), the next search reads the store and builds the index anew; a file that must leave
# no trace (a newly excluded entity) drops the index whole at once.
DEAD_SHARE = 1

# Each of a file's pieces but the last (see ``files.DOCS_PER_FILE``) is longer than this many
# characters, about 110 words of Markdown, so in a file of up to 12 such pieces (9,600
# characters) a word's position in its piece mostly fits FTS5's one-byte varint (below 126); a
# longer file's pieces are longer, and its later positions take two bytes again. Shorter
# pieces split more of a file's repeated words across pieces (each piece costs the word a
# document entry); measured on bench/bench_read.py's store, docs/read-side.md has the figures.
PIECE_CHARS = 800

# Every ASCII character but the whitespace ``bytes.split()`` splits on is a token character.
_WHITESPACE = " \t\n\r\x0b\x0c"
_TOKEN_CHARS = "".join(chr(c) for c in range(1, 128) if not chr(c).isalnum() and chr(c) not in _WHITESPACE)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_TOKENIZE = "ascii tokenchars " + _sql_string(_TOKEN_CHARS)
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY AUTOINCREMENT, rel BLOB UNIQUE NOT NULL, size INTEGER, mtime INTEGER,"
    " ctime INTEGER, ino INTEGER, indexed_ns INTEGER, headings BLOB, skip TEXT, direct INTEGER)",
    f"CREATE VIRTUAL TABLE texts USING fts5(body, content='', columnsize=0, tokenize = {_sql_string(_TOKENIZE)})",
    "CREATE VIRTUAL TABLE text_tokens USING fts5vocab(texts, instance)",
    "CREATE VIRTUAL TABLE text_vocab USING fts5vocab(texts, row)",
    # FTS5 writes its postings as segments of about 1 MB and merges them as they pile up; with
    # its defaults (merge 4 at a time, forced at 16 per level) a first build of 80 MB spends half
    # its time (0.6 of 1.3 s at 10,000 files) rewriting the same postings level after level.
    # Merging 16 at a time (forced at 64) rewrites each posting about half as often: the build
    # takes 1.0 s, the index is 3% smaller, later write-backs merge in smaller steps too, and a
    # look-up costs what it did (bench/bench_read.py; docs/read-side.md). Stored in the index,
    # so every later write keeps to it. Never merging while building (automerge 0) is faster
    # still (0.65 s) but leaves ~60 segments that every look-up walks, and the first forced
    # merge (a 0.5 s stall) falls on a later search.
    "INSERT INTO texts (texts, rank) VALUES ('automerge', 16)",
    "INSERT INTO texts (texts, rank) VALUES ('crisismerge', 64)",
)


# FTS5 keeps the postings of recent inserts in memory and writes them out as a new segment when
# they pass this size (1 MB by default); fewer, larger segments leave less to merge. At 10,000
# files / 80 MB, 8 MB took the first search from 2.25 to 1.84 s and the whole index from 40.0 to
# 38.9 MB (bench/bench_read.py's store; FTS5's own inserts: 1.19 to 0.89 s). Kept in the index,
# like the merge settings; memory held is this much more than FTS5's default, during writes only.
HASH_BYTES = 8 << 20


def _set_hash_size(db: sqlite3.Connection) -> None:
    """``HASH_BYTES``, where this SQLite's FTS5 knows the setting (an older one builds the same
    index with its default, more slowly)."""
    import sqlite3

    with contextlib.suppress(sqlite3.OperationalError):
        db.execute("INSERT INTO texts (texts, rank) VALUES ('hashsize', ?)", (HASH_BYTES,))


def fill_new(
    db: sqlite3.Connection, fresh: Sequence[IndexedText], store_real: str, index_rows: IndexRows | None
) -> None:
    """The schema and every row of a new index in ``db`` (a fresh file, no journal)."""
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    for statement in SCHEMA:
        db.execute(statement)
    _set_hash_size(db)
    db.execute("BEGIN")
    table = FileTable([], array("q"), {})
    file_rows: list[tuple[object, ...]] = []
    texts: list[tuple[int, str]] = []
    # A new index numbers its files itself (AUTOINCREMENT carries on after them), so both tables
    # are filled by one executemany each instead of two statements per file.
    for fid, item in enumerate(filter(storable, fresh), 1):
        row, fields, text = _prepared(item, fid)
        file_rows.append(row)
        table.add(item.rel, fields, item.skip)
        if text is not None:
            texts.extend(documents(fid, text))
    db.executemany(_INSERT_FILE, file_rows)
    db.executemany("INSERT INTO texts (rowid, body) VALUES (?, ?)", texts)
    table.write(db)
    put_meta(db, "version", str(SCHEMA_VERSION))
    put_meta(db, "store", store_real)
    put_meta(db, "index", index_meta(index_rows))
    put_meta(db, "vocab", _exact_vocab(db))
    put_meta(db, "dead", "0")
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")


def update(
    opened: OpenIndex,
    fresh: Sequence[IndexedText],
    keep: set[str],
    index_rows: IndexRows | None,
) -> bool | None:
    """Re-index the files read from the store and forget files no longer searched (``keep``
    holds every rel still searched); record index.md's rows (None: keep none, and the old ones
    are vacuumed away). A file whose words must leave no trace (a newly excluded entity) is not
    this function's: the word index cannot delete a document, so ``facade`` drops the index
    whole. False when the index is busy or could not be written; None when there was nothing
    to write (nothing was)."""
    import sqlite3

    fresh = [item for item in fresh if storable(item)]
    gone = [rel for rel in opened.files.rels if rel not in keep]
    if not fresh and not gone and index_rows == opened.index_rows:
        return None
    db = opened.db
    try:
        # The search read one snapshot; another search may have written since. Writes go by rel
        # and re-read what they extend (the file table, the vocabulary).
        if db.in_transaction:
            db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        try:
            purging = _rewrite(db, opened, fresh, gone, index_rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if purging:
            # index.md's rows leave their text in freed pages and the write-ahead log until
            # vacuumed and truncated (a search still reading holds the log until it closes).
            # If either fails, False on purpose: the write then goes unrecorded, so the next
            # search distrusts the index and builds it again, without those rows.
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
) -> bool:
    """The rows of one update, inside its transaction. True when index.md's recorded rows were
    dropped (their text is then vacuumed away)."""
    table = FileTable.read(db)
    changed = [*gone, *(item.rel for item in fresh)]
    dead = sum(_delete(db, rel) for rel in changed)
    table.remove(changed)
    vocab_add: set[bytes] = set()
    for item in fresh:
        fields, indexed = _insert(db, item)
        table.add(item.rel, fields, item.skip)
        if indexed is not None:
            vocab_add.update(indexed.split())
    table.write(db)
    purging = False
    if index_rows != opened.index_rows:
        put_meta(db, "index", index_meta(index_rows))
        purging = opened.index_rows is not None and index_rows is None
    if vocab_add:
        known = set(bytes(get_meta(db, "vocab") or b"").split(b"\n"))
        if not vocab_add <= known:
            put_meta(db, "vocab", b"".join(t + b"\n" for t in sorted(known | vocab_add) if t))
    put_meta(db, "dead", str(dead_documents(db) + dead))
    return purging


def dead_documents(db: sqlite3.Connection) -> int:
    """Files whose documents (a file's pieces) are left in the word index with no file row naming
    them any more (see DEAD_SHARE): counted per file, like the files they are compared with."""
    return int(get_meta(db, "dead") or 0)


def _delete(db: sqlite3.Connection, rel: str) -> int:
    """Forget one file's row; 1 when it had documents in the word index, left behind (its id is
    never given again, so nothing reaches those postings)."""
    row = db.execute("DELETE FROM files WHERE rel = ? RETURNING direct, skip", (rel_blob(rel),)).fetchone()
    return 1 if row is not None and not row[0] and not row[1] else 0


_INSERT_FILE = (
    "INSERT INTO files (id, rel, size, mtime, ctime, ino, indexed_ns, headings, skip, direct)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _prepared(item: IndexedText, fid: int | None) -> tuple[tuple[object, ...], list[int], bytes | None]:
    """One file's row for the file table (``fid`` None: numbered by SQLite), its packed fields
    (see ``FileTable``; the id filled in by the caller when SQLite numbers it), and its folded
    text when FTS5 holds it (None when the file is only recorded: skipped, or read directly
    every time)."""
    folded = item.folded
    # Only a text longer than FTS5's token limit can hold a token it would cut.
    direct = (
        folded is not None
        and len(folded) > MAX_TOKEN_BYTES
        and max(map(len, folded.split()), default=0) > MAX_TOKEN_BYTES
    )
    size, mtime, ctime, ino = item.key
    row = (fid, rel_blob(item.rel), size, mtime, ctime, i64(ino), item.read_ns, item.headings, item.skip, int(direct))
    fields = [fid or 0, size, mtime, ctime, i64(ino), item.read_ns, int(direct)]
    return row, fields, None if direct else folded


def pieces(text: str) -> list[str]:
    """``text`` cut at ASCII whitespace into at most ``DOCS_PER_FILE`` pieces, each but the last
    longer than ``PIECE_CHARS`` (longer still for a file past ``DOCS_PER_FILE * PIECE_CHARS``).
    No word is cut, so a word's count in the file is the sum of its counts in the pieces."""
    # A multiple of PIECE_CHARS, so that few patterns are ever compiled.
    size = PIECE_CHARS * max(1, -(-len(text) // (DOCS_PER_FILE * PIECE_CHARS)))
    if len(text) <= size:
        return [text]
    # One C-level pass: ``size`` characters, the rest of the word they end in, and one
    # whitespace. Every piece but the last is longer than ``size``, so there are at most
    # DOCS_PER_FILE of them.
    return _piece_re(size).findall(text)


@functools.lru_cache(maxsize=16)
def _piece_re(size: int) -> re.Pattern[str]:
    space = re.escape(_WHITESPACE)
    return re.compile(f"(?s).{{1,{size}}}[^{space}]*[{space}]?")


def documents(fid: int, folded: bytes) -> Iterator[tuple[int, str]]:
    """The word index's documents for file ``fid``: (document id, text) per piece of its text."""
    text = folded.decode("utf-8", errors="surrogateescape")
    return zip(range(fid * DOCS_PER_FILE, (fid + 1) * DOCS_PER_FILE), pieces(text), strict=False)


def _insert(db: sqlite3.Connection, item: IndexedText) -> tuple[list[int], bytes | None]:
    """Index one file in an existing index: its packed fields, and its folded text when FTS5
    holds it."""
    row, fields, text = _prepared(item, None)
    fid = int(db.execute(_INSERT_FILE, row).lastrowid or 0)
    fields[0] = fid
    if text is None:
        return fields, None
    db.executemany("INSERT INTO texts (rowid, body) VALUES (?, ?)", documents(fid, text))
    return fields, text


def _exact_vocab(db: sqlite3.Connection) -> bytes:
    return b"".join(
        term.encode("utf-8", errors="surrogateescape") + b"\n" for (term,) in db.execute("SELECT term FROM text_vocab")
    )
