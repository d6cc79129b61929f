"""The search index (what ``dream search --no-cache`` does without): a SQLite FTS5 word index of
a store's searchable files, kept under the user's cache folder (never in the store), so a search
on a large store costs a few index look-ups instead of reading every file.

Why a word index answers substring search exactly: a plain query term never holds ASCII whitespace
(``parse_query`` splits on it), so each occurrence of a term in a folded text lies inside one
whitespace-delimited token. The occurrences of a term in a file are exactly
``sum(token.count(term) * occurrences of the token in the file)`` over the tokens that hold the
term. The index keeps the folded texts tokenised on ASCII whitespace only (FTS5's ``ascii``
tokenizer with every other ASCII character declared a token character, so its tokens are
``bytes.split()``'s) plus the vocabulary; a query scans the vocabulary for tokens holding the term
and asks FTS5 how often each occurs per file. A "quoted phrase" spans tokens: the index narrows it
to the files holding each of its words, and the caller reads those files to count it.

Trust rule: a file is answered from the index only while its size, mtime, ctime and inode are the
recorded ones and it had not changed within 2 s before it was indexed ("racy git"); anything else
is read from the store, and the files read are written back to the index in the same search, so
the index is refreshed from changed files only. Excluded entities never reach it (and are purged,
deleted content overwritten, when a file becomes excluded). Any problem with the index (missing,
corrupt, locked, unwritable, an SQLite without FTS5) falls back to reading the store: the index
can make search faster, never different.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
import zlib
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from dream_memory.core.index_table import root_contains

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = 2
# A file changed this close before it was indexed may change again within the same timestamp tick
# ("racy git"): it is read directly until it is indexed again.
RACY_NS = 2_000_000_000
# FTS5 cuts tokens at 32 KiB; a file holding a longer one is never answered from the index.
MAX_TOKEN_BYTES = 32_000
# Vocabulary tokens holding one term, and postings per search, beyond which reading the files
# is cheaper than asking the index (a term like "e" is in most tokens).
MAX_TOKENS_PER_TERM = 1_000
MIN_POSTINGS_BUDGET = 50_000
POSTINGS_PER_FILE_BUDGET = 20
# The vocabulary only grows on small refreshes (words no file holds any more stay in it, costing
# an empty look-up); it is recomputed exactly once 1/VOCAB_RECOUNT_SHARE of the files changed.
VOCAB_RECOUNT_SHARE = 4

StatKey = tuple[int, int, int, int]
SourceT = TypeVar("SourceT", bound=tuple[Any, ...])

# Every ASCII character but the whitespace ``bytes.split()`` splits on is a token character.
_WHITESPACE = " \t\n\r\x0b\x0c"
_TOKEN_CHARS = "".join(chr(c) for c in range(1, 128) if not chr(c).isalnum() and chr(c) not in _WHITESPACE)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_TOKENIZE = "ascii tokenchars " + _sql_string(_TOKEN_CHARS)
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY, rel BLOB UNIQUE NOT NULL, size INTEGER, mtime INTEGER,"
    " ctime INTEGER, ino INTEGER, indexed_ns INTEGER, headings BLOB, skip TEXT, direct INTEGER)",
    f"CREATE VIRTUAL TABLE texts USING fts5(body, columnsize=0, tokenize = {_sql_string(_TOKENIZE)})",
    "CREATE VIRTUAL TABLE text_tokens USING fts5vocab(texts, instance)",
    "CREATE VIRTUAL TABLE text_vocab USING fts5vocab(texts, row)",
)


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _rel_blob(rel: str) -> bytes:
    """A rel as stored: file names need not be UTF-8 (they come back from the OS as surrogates)."""
    return rel.encode("utf-8", errors="surrogateescape")


_INT64 = range(-(1 << 63), 1 << 63)


def _storable(item: IndexedText) -> bool:
    """SQLite integers are 64-bit: a file stamped after the year 2262 is read, never indexed."""
    return all(value in _INT64 for value in (*item.key[:3], item.read_ns))


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


def _i64(value: int) -> int:
    """An inode as SQLite and int64 arrays hold it (inodes may use all 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


# Fields per file in the packed file table: id, size, mtime_ns, ctime_ns, inode, indexed_ns, direct.
_FIELDS = 7


class FileTable:
    """The recorded files, kept packed in the index's meta table and loaded in one piece per
    search (10,000 rows fetched as SQLite tuples cost more than the rest of a search): the rels,
    one flat int64 array of their fields (``_FIELDS`` per file), each rel's offset into it, and
    the skip reasons. Every write edits it inside the same transaction as the rows it describes."""

    def __init__(self, rels: list[str], fields: array[int], skips: dict[str, str]) -> None:
        if len(fields) != _FIELDS * len(rels):
            raise ValueError("index file table is inconsistent")
        self.rels = rels
        self.fields = fields
        self.skips = skips
        self.where = dict(zip(rels, range(0, len(fields), _FIELDS), strict=True))

    @classmethod
    def read(cls, db: sqlite3.Connection) -> FileTable:
        if _get_meta(db, "byteorder") != sys.byteorder:
            raise ValueError("index written on a machine of another byte order")
        names = bytes(_get_meta(db, "file_names") or b"")
        fields: array[int] = array("q")
        fields.frombytes(bytes(_get_meta(db, "file_fields") or b""))
        rels = names.decode("utf-8", errors="surrogateescape").split("\0") if names else []
        return cls(rels, fields, json.loads(_get_meta(db, "file_skips") or "{}"))

    def write(self, db: sqlite3.Connection) -> None:
        _put_meta(db, "file_names", "\0".join(self.rels).encode("utf-8", errors="surrogateescape"))
        _put_meta(db, "file_fields", self.fields.tobytes())
        _put_meta(db, "file_skips", json.dumps(self.skips))
        _put_meta(db, "byteorder", sys.byteorder)

    def __len__(self) -> int:
        return len(self.rels)

    def remove(self, rels: Iterable[str]) -> None:
        """Forget these files (from the end backwards: each removal is one C-level move)."""
        for at in sorted({self.where[rel] for rel in rels if rel in self.where}, reverse=True):
            del self.rels[at // _FIELDS]
            del self.fields[at : at + _FIELDS]
        for rel in rels:
            self.skips.pop(rel, None)
        self.where = dict(zip(self.rels, range(0, len(self.fields), _FIELDS), strict=True))

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
        return at if f[at + 4] == _i64(st.st_ino) else None


class TermMatches(NamedTuple):
    """What the index says about a query: per term, file id -> occurrences (empty for phrase
    terms) and the files with the term in a heading, and the files that may hold a phrase term
    (to be read and counted)."""

    counts: tuple[dict[int, int], ...]
    in_headings: tuple[set[int], ...]
    phrase_files: frozenset[int]

    def files(self) -> set[int]:
        found: set[int] = set(self.phrase_files)
        for per_term in self.counts:
            found.update(per_term)
        return found


def tokens_holding(vocab: bytes, term: bytes, limit: int) -> list[bytes] | None:
    """The tokens of ``vocab`` (newline-separated, starting and ending with a newline) that hold
    ``term`` (which holds no whitespace, so no newline), or None when more than ``limit`` do:
    three C-level calls per token found, nothing computed for the tokens that do not."""
    found: list[bytes] = []
    pos = vocab.find(term)
    while pos != -1:
        if len(found) == limit:
            return None
        start = vocab.rfind(b"\n", 0, pos) + 1
        end = vocab.find(b"\n", pos)
        found.append(vocab[start:end])
        pos = vocab.find(term, end)
    return found


class OpenIndex:
    """One open search index: the recorded files, and the queries a search needs."""

    def __init__(self, db: sqlite3.Connection, files: FileTable, index_rows: IndexRows | None) -> None:
        self.db = db
        self.files = files
        self.index_rows = index_rows
        self.failure: Exception | None = None  # an SQLite error met while answering
        self._vocab: bytes | None = None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.db.close()

    @property
    def corrupt(self) -> bool:
        """True when answering met damage (not a lock, not a missing module): remove the index."""
        import sqlite3

        return isinstance(self.failure, sqlite3.DatabaseError) and not isinstance(
            self.failure, sqlite3.OperationalError
        )

    def rows_for(self, index_key: StatKey | None) -> IndexRows | None:
        """The recorded rows of index.md when its stat is still ``index_key`` and it had not
        changed within ``RACY_NS`` before they were read."""
        kept = self.index_rows
        if kept is None or index_key is None or kept.key != index_key:
            return None
        return kept if max(index_key[1], index_key[2]) < kept.read_ns - RACY_NS else None

    # --- reading --------------------------------------------------------------------------

    def partition(
        self, sources: Iterable[SourceT], stats: dict[str, os.stat_result]
    ) -> tuple[dict[int, SourceT], list[SourceT]]:
        """Split sources (tuples whose first item is the rel) into those the index may answer for
        as they are now, by file id, and the rest. Answerable: the same size, mtime, ctime and
        inode as recorded, not changed within ``RACY_NS`` before it was indexed, and held by the
        index. One pass over every file of the store per search, so kept tight."""
        where = self.files.where
        f = self.files.fields
        racy = RACY_NS
        answered: dict[int, SourceT] = {}
        rest: list[SourceT] = []
        for source in sources:
            rel = source[0]
            at = where.get(rel)
            if at is not None and (st := stats.get(rel)) is not None:
                mtime = st.st_mtime_ns
                ctime = st.st_ctime_ns
                ino = f[at + 4]
                if (
                    f[at + 2] == mtime
                    and f[at + 3] == ctime
                    and f[at + 1] == st.st_size
                    and (ino == st.st_ino or ino == _i64(st.st_ino))
                    and not f[at + 6]
                    and max(mtime, ctime) < f[at + 5] - racy
                ):
                    answered[f[at]] = source
                    continue
            rest.append(source)
        return answered, rest

    def always_direct(self, rel: str, st: os.stat_result | None) -> bool:
        """True when ``rel`` is recorded, unchanged, as a file the index cannot answer for."""
        at = self.files.unchanged(rel, st) if st is not None else None
        return at is not None and bool(self.files.fields[at + 6])

    def _vocabulary(self) -> bytes:
        if self._vocab is None:
            self._vocab = b"\n" + bytes(_get_meta(self.db, "vocab") or b"")
        return self._vocab

    def _token_files(self, token: bytes) -> list[tuple[int, int]]:
        return self.db.execute(
            "SELECT doc, COUNT(*) FROM text_tokens WHERE term = ? GROUP BY doc",
            (token.decode("utf-8", errors="surrogateescape"),),
        ).fetchall()

    def match(self, terms: Sequence[bytes]) -> TermMatches | None:
        """Occurrences of each folded term per indexed file, and the files with each term in a
        heading; None when the index would be slower than reading the files, or failed (then
        ``failure`` says why)."""
        import sqlite3

        try:
            return self._match(terms)
        except sqlite3.Error as exc:
            self.failure = exc
            return None

    def _match(self, terms: Sequence[bytes]) -> TermMatches | None:
        vocab = self._vocabulary()
        budget = max(MIN_POSTINGS_BUDGET, POSTINGS_PER_FILE_BUDGET * len(self.files))
        spent = 0
        counts: list[dict[int, int]] = []
        headed: list[set[int]] = []
        phrase_files: set[int] = set()
        for term in terms:
            per_file: dict[int, int] = {}
            counts.append(per_file)
            pieces = term.split(b" ")
            holding: set[int] | None = None
            for piece in pieces:
                tokens = tokens_holding(vocab, piece, MAX_TOKENS_PER_TERM)
                if tokens is None:
                    return None
                files: set[int] = set()
                for token in tokens:
                    found = self._token_files(token)
                    spent += len(found)
                    if spent > budget:
                        return None
                    if len(pieces) > 1:
                        files.update(doc for doc, _ in found)
                        continue
                    times = token.count(piece)
                    for doc, n in found:
                        per_file[doc] = per_file.get(doc, 0) + times * n
                holding = files if holding is None else holding & files
            if len(pieces) > 1:
                phrase_files |= holding or set()
                headed.append(set())  # a phrase file is read and scored from its text
            else:
                headed.append(self._in_headings(term) if per_file else set())
        return TermMatches(tuple(counts), tuple(headed), frozenset(phrase_files))

    def _in_headings(self, term: bytes) -> set[int]:
        """Ids of the files with ``term`` in a heading line (one C-level scan of the headings)."""
        return {fid for (fid,) in self.db.execute("SELECT id FROM files WHERE instr(headings, ?) > 0", (term,))}

    # --- writing ------------------------------------------------------------------------------

    def update(
        self,
        fresh: Sequence[IndexedText],
        keep: set[str],
        index_rows: IndexRows | None,
        purge: Iterable[str] = (),
    ) -> bool:
        """Re-index the files read from the store and forget files no longer searched (``keep``
        holds every rel still searched); record index.md's rows (None: keep none). ``purge``:
        rels whose text must not stay behind (newly excluded entities); deleted text is then
        overwritten. False when the index is busy or could not be written."""
        import sqlite3

        fresh = [item for item in fresh if _storable(item)]
        gone = [rel for rel in self.files.rels if rel not in keep]
        purging = bool(set(purge).intersection(gone))
        if not fresh and not gone and index_rows == self.index_rows:
            return True
        db = self.db
        try:
            # The search read one snapshot; another search may have written since. Writes go by
            # rel and re-read what they extend (the file table, the vocabulary).
            if db.in_transaction:
                db.execute("COMMIT")
            db.execute("BEGIN IMMEDIATE")
            try:
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
                if index_rows != self.index_rows:
                    _put_meta(db, "index", _index_meta(index_rows))
                    purging = purging or (self.index_rows is not None and index_rows is None)
                reindexed = int(_get_meta(db, "reindexed") or 0) + len(changed)
                if purging or reindexed * VOCAB_RECOUNT_SHARE > max(len(table), 1):
                    _put_meta(db, "vocab", _exact_vocab(db))
                    reindexed = 0
                elif vocab_add:
                    known = set(bytes(_get_meta(db, "vocab") or b"").split(b"\n"))
                    if not vocab_add <= known:
                        _put_meta(db, "vocab", b"".join(t + b"\n" for t in sorted(known | vocab_add) if t))
                _put_meta(db, "reindexed", str(reindexed))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if purging:
                # Deleted rows leave their text in FTS5's older segments, freed pages and the
                # write-ahead log until merged, vacuumed and truncated (a search still reading
                # holds the log until it closes).
                db.execute("INSERT INTO texts(texts) VALUES ('optimize')")
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return True
        except (sqlite3.Error, OSError, ValueError, OverflowError):
            return False


def _delete(db: sqlite3.Connection, rel: str) -> None:
    blob = _rel_blob(rel)
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
        (_rel_blob(item.rel), size, mtime, ctime, _i64(ino), item.read_ns, item.headings, item.skip, int(direct)),
    )
    fid = int(cursor.lastrowid or 0)
    fields = [fid, size, mtime, ctime, _i64(ino), item.read_ns, int(direct)]
    if folded is None or direct:
        return fields, None
    db.execute("INSERT INTO texts (rowid, body) VALUES (?, ?)", (fid, folded.decode("utf-8", errors="surrogateescape")))
    return fields, folded


def _exact_vocab(db: sqlite3.Connection) -> bytes:
    return b"".join(
        term.encode("utf-8", errors="surrogateescape") + b"\n" for (term,) in db.execute("SELECT term FROM text_vocab")
    )


def _put_meta(db: sqlite3.Connection, key: str, value: str | bytes) -> None:
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def _get_meta(db: sqlite3.Connection, key: str) -> Any:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


class SearchIndex:
    """Where one store's search index lives, and how it is opened or built."""

    def __init__(self, path: Path, store_real: str) -> None:
        self.path = path
        self.store_real = store_real
        self.busy = False
        self.unsupported = False

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

    def open(self) -> OpenIndex | None:
        """The index, or None when there is none usable (a corrupt one is removed)."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        import sqlite3

        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(self.path, timeout=0.2, isolation_level=None)
            _pragmas(db)
            # One snapshot for the whole search: the file table, the vocabulary and the postings
            # must agree even while another search writes (a file re-indexed under a new id).
            db.execute("BEGIN")
            if _get_meta(db, "store") != self.store_real or _get_meta(db, "version") != str(SCHEMA_VERSION):
                raise ValueError("index of another store or version")
            index = json.loads(_get_meta(db, "index") or "{}")
            files = FileTable.read(db)
            key = index.get("key")
            rows = index.get("rows")
            kept = (
                IndexRows(tuple(key), [(str(a), str(b)) for a, b in rows], int(index["read_ns"]))
                if key and rows is not None
                else None
            )
            return OpenIndex(db, files, kept)
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

    def build(self, fresh: Sequence[IndexedText], index_rows: IndexRows | None) -> bool:
        """A new index of ``fresh``, built aside and moved into place whole. False when the cache
        folder cannot be written or SQLite has no FTS5 (the search went fine anyway)."""
        import secrets
        import sqlite3

        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # 0600 before SQLite opens it
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode = OFF")
                db.execute("PRAGMA synchronous = OFF")
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("BEGIN")
                table = FileTable([], array("q"), {})
                for item in fresh:
                    if _storable(item):
                        table.add(item.rel, _insert(db, item)[0], item.skip)
                table.write(db)
                _put_meta(db, "version", str(SCHEMA_VERSION))
                _put_meta(db, "store", self.store_real)
                _put_meta(db, "index", _index_meta(index_rows))
                _put_meta(db, "vocab", _exact_vocab(db))
                _put_meta(db, "reindexed", "0")
                db.execute("COMMIT")
                db.execute("PRAGMA journal_mode = WAL")
            finally:
                db.close()
            if self.path.exists():
                os.unlink(tmp)  # another search built it meanwhile: keep theirs
                return False
            self.remove()  # a write-ahead log left by a removed index must not meet the new one
            os.replace(tmp, self.path)
            self._prune()
            return True
        except (OSError, sqlite3.Error, ValueError, OverflowError):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False

    def remove(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def _prune(self) -> None:
        """Remove what an interrupted build left behind (an hour old: a build may be running),
        and this store's cache from before the index (search-v1: folded text in one blob)."""
        import hashlib
        import shutil

        old = self.path.parent.parent / "search-v1"
        v1_key = hashlib.sha256(_rel_blob(self.store_real)).hexdigest()[:32]
        shutil.rmtree(old / v1_key, ignore_errors=True)
        with contextlib.suppress(OSError):
            old.rmdir()  # only when no other store's old cache is left in it
        stale_before = time.time() - 3600
        for entry in os.scandir(self.path.parent):
            with contextlib.suppress(OSError):
                if entry.name.endswith(".tmp") and entry.stat().st_mtime < stale_before:
                    os.unlink(entry.path)


def _index_meta(index_rows: IndexRows | None) -> str:
    if index_rows is None:
        return json.dumps({"key": None, "rows": None})
    return json.dumps({"key": index_rows.key, "rows": index_rows.rows, "read_ns": index_rows.read_ns})


def _pragmas(db: sqlite3.Connection) -> None:
    # Derived data: a transaction lost in a power cut only leaves files whose recorded stat no
    # longer matches, and those are read from the store.
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA secure_delete = ON")
