"""Reading the search index: which files it may answer for as they are now, and how often each
query term occurs in them (the word-index argument is in the package docstring).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from dream_memory.adapters.search_index import mark
from dream_memory.adapters.search_index.files import DOCS_PER_FILE, FileTable, IndexRows, StatKey, get_meta, i64

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

# A file changed this close before it was indexed may change again within the same timestamp tick
# ("racy git"): it is read directly until it is indexed again.
RACY_NS = 2_000_000_000
# Vocabulary tokens holding one term, and postings per search, beyond which reading the files
# is cheaper than asking the index (a term like "e" is in most tokens).
MAX_TOKENS_PER_TERM = 1_000
MIN_POSTINGS_BUDGET = 50_000
POSTINGS_PER_FILE_BUDGET = 20

SourceT = TypeVar("SourceT", bound=tuple[Any, ...])


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

    def __init__(
        self, db: sqlite3.Connection, files: FileTable, index_rows: IndexRows | None, path: Path | None = None
    ) -> None:
        self.db = db
        self.path = path
        self.files = files
        self.index_rows = index_rows
        self.failure: Exception | None = None  # an SQLite error met while answering
        self._vocab: bytes | None = None

    def close(self) -> None:
        mark.close(self.db, self.path)

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
                    and (ino == st.st_ino or ino == i64(st.st_ino))
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
            self._vocab = b"\n" + bytes(get_meta(self.db, "vocab") or b"")
        return self._vocab

    def _token_files(self, token: bytes) -> list[tuple[int, int]]:
        """(file id, occurrences) of one token: its positions counted per file, over the file's
        pieces (``files.DOCS_PER_FILE``)."""
        return self.db.execute(
            f"SELECT doc / {DOCS_PER_FILE}, COUNT(*) FROM text_tokens WHERE term = ? GROUP BY 1",
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
