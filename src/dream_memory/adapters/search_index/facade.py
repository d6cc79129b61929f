"""The search index as a search sees it (``core.ports.SearchCache``): the one thing the read side
imports from this package.

``open_search_cache`` makes the decisions a search would otherwise make by hand: no cache folder
or a store read at a revision (no index), a cache folder inside the store (refused), an index
another search holds locked (answer from the files), a store too small to keep one (drop it
whole), an index to build versus one to update, and a damaged index met while answering (removed
on close, built again next time).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from dream_memory.adapters.search_index import mark, trust
from dream_memory.adapters.search_index.files import IndexedText, IndexRows, StatKey, stat_key
from dream_memory.adapters.search_index.location import KeptIndex, SearchIndex
from dream_memory.adapters.search_index.match import OpenIndex
from dream_memory.adapters.search_index.write import DEAD_SHARE, dead_documents, update
from dream_memory.core import layout
from dream_memory.core.ports import CachedAnswer, SearchCache, Source, StoreTree
from dream_memory.core.search import Query


def open_search_cache(
    cache_dir: Path | None, tree: StoreTree, *, min_files: int, kept: KeptIndex | None = None
) -> SearchCache:
    """The search index of ``tree``'s store under ``cache_dir``; a cache that answers nothing when
    there is no cache folder, the store is read at a revision, or the folder lies in the store.
    ``kept``: a long-lived reader's index kept open between its searches (``KeptIndex``); a
    search that finds it in use by another (a concurrent call) opens the index on its own."""
    if cache_dir is None or tree.real_root is None:
        return NoSearchCache()
    index = SearchIndex.for_store(cache_dir, tree.real_root)
    if index is None:
        return NoSearchCache()
    if kept is not None and not kept.lock.acquire(blocking=False):
        kept = None
    try:
        return IndexCache(index, os.path.join(tree.root, layout.INDEX), min_files=min_files, kept=kept)
    except BaseException:
        if kept is not None:
            kept.lock.release()
        raise


class NoSearchCache:
    """Every source is read from the store, and nothing is recorded."""

    stats: dict[str, os.stat_result] | None = None
    warnings: tuple[str, ...] = ()

    def rows(self) -> list[tuple[str, str]] | None:
        return None

    def answer(self, query: Query, sources: Sequence[Source]) -> CachedAnswer:
        return CachedAnswer([], [(source, False) for source in sources], {})

    def remember(self, rel: str, folded: bytes | None, headings: bytes = b"", *, skip: str | None = None) -> None:
        return None

    def record(
        self, rows: list[tuple[str, str]], *, keep_rows: bool, excluded: Callable[[str], bool] | None
    ) -> tuple[int, bool]:
        return 0, False

    def close(self) -> None:
        return None


def _mostly_leftovers(opened: OpenIndex) -> bool:
    """True when the files whose documents the word index still holds but no longer uses (files
    changed or removed since it was built) outnumber DEAD_SHARE times the files: rebuilding beats
    carrying them."""
    import sqlite3

    try:
        dead = dead_documents(opened.db)
    except (sqlite3.Error, ValueError):
        return True
    return dead > DEAD_SHARE * max(len(opened.files), 1)


def _index_key(path: str) -> StatKey | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return stat_key(st) if stat.S_ISREG(st.st_mode) else None


class _Partition(NamedTuple):
    """What one set of sources comes to against an unchanged index, whatever the query: kept by a
    long-lived reader for its next search while neither the sources nor the index change."""

    sources: Sequence[Source]
    answered: dict[int, Source]
    to_read: list[tuple[Source, bool]]
    known_skips: dict[str, str]
    keep: set[str]
    # Folded query terms -> (the sources answered, with their counts; phrase files to read). The
    # same list object is handed out again for the same terms: a caller may keep what it
    # derives from it (``app.read.search``) for as long as it gets that object back.
    by_terms: dict[tuple[bytes, ...], tuple[list[tuple[Source, list[int], list[bool]]], list[tuple[Source, bool]]]]


# Queries remembered per kept partition: a common word's answer holds one entry per file (about
# 2 MB at 10,000 files), so a long-lived server holds at most a few tens of MB for them.
_KEPT_QUERIES = 16


class IndexCache:
    """One search's use of a store's ``SearchIndex``: opened at the start, written back at the end.

    With a ``KeptIndex``, the index stays open after the search unless it wrote to it, and what
    the search worked out from its sources is kept with it (``_Partition``). The next search
    reuses that only when the index is unchanged (``KeptIndex.reuse``) and its caller passes the
    very same sources object again, which the read side does only while its store watch proves
    every listed file's stat unchanged (``app.read.search``)."""

    def __init__(self, index: SearchIndex, index_md: str, *, min_files: int, kept: KeptIndex | None = None) -> None:
        self.index = index
        self._kept = kept
        self._wrote = False
        self._stamped = False  # wrote an index still as recorded: record it again once closed
        self._hit = False
        self._partition: _Partition | None = None
        self.min_files = min_files
        self.stats: dict[str, os.stat_result] | None = {}
        self._stats: dict[str, os.stat_result] = self.stats
        self._index_key = _index_key(index_md)
        self.opened: OpenIndex | None = index.open(kept)
        self._reused = kept is not None and kept.reused
        self._first_opened = self.opened
        self._recorded: IndexRows | None = None
        self._rows_read_ns = 0
        self._read_ns = 0
        self._use = False
        self._keep: set[str] = set()
        self._fresh: list[IndexedText] = []

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.index.warnings)

    def rows(self) -> list[tuple[str, str]] | None:
        self._rows_read_ns = time.time_ns()
        self._recorded = self.opened.rows_for(self._index_key) if self.opened is not None else None
        return self._recorded.rows if self._recorded is not None else None

    def answer(self, query: Query, sources: Sequence[Source]) -> CachedAnswer:
        memo = self._kept.memo if self._kept is not None and self._reused else None
        if self.opened is not None and isinstance(memo, _Partition) and memo.sources is sources:
            # The last search's sources against the same index: it was used then (kept only if so).
            self._use = self._hit = True
            self._partition = memo
            self._keep = memo.keep
            self._read_ns = time.time_ns()
            return self._from_index(self.opened, query, memo)
        big_enough = len(sources) >= self.min_files
        self._use = big_enough and not self.index.busy and self.index.refused is None
        if big_enough and self.index.refused is not None:
            self.index.warnings.append(trust.not_used(self.index.refused))  # only where one would be used
        if self.opened is not None and not self._use:
            self.opened.close()
            self.opened = None
            if not big_enough:
                self.index.remove()  # the store shrank below the size that keeps an index: drop it whole
        elif self.opened is not None and _mostly_leftovers(self.opened):
            self._drop()  # every file is read in this search and the index built anew from them
        self._keep = {source[0] for source in sources if source[3]}
        # Files read from here on are recorded as read now: stamped before the first read, so
        # the racy-file rule can only err towards reading a file again.
        self._read_ns = time.time_ns()
        if self.opened is None:
            return CachedAnswer([], [(source, self._use and source[3]) for source in sources], {})
        self._partition = self._split(self.opened, sources)
        return self._from_index(self.opened, query, self._partition)

    def _split(self, opened: OpenIndex, sources: Sequence[Source]) -> _Partition:
        """The sources the index may answer for, and the others, to be read (those read because
        they changed are indexed again; those the index cannot hold are not)."""
        stats = self._stats
        answered, rest = opened.partition(sources, stats)
        to_read: list[tuple[Source, bool]] = []
        for source in rest:
            st = stats.get(source[0]) if source[3] else None
            to_read.append((source, st is not None and not opened.always_direct(source[0], st)))
        skips = opened.files.skips
        known_skips = {s[0]: skips[s[0]] for s in answered.values() if s[0] in skips} if skips else {}
        return _Partition(sources, answered, to_read, known_skips, self._keep, {})

    def _from_index(self, opened: OpenIndex, query: Query, part: _Partition) -> CachedAnswer:
        """Counts for the sources the index may answer for; the others are to be read."""
        answered = part.answered
        to_read = list(part.to_read)
        known_skips = dict(part.known_skips)
        terms = query.folded_terms
        known = part.by_terms.get(terms) if self._kept is not None else None
        if known is not None:
            return CachedAnswer(known[0], to_read + known[1], known_skips)
        matches = opened.match(terms) if answered else None
        if matches is None:
            # The index would be slower than the files (or was not needed): read them.
            to_read += [(source, False) for source in answered.values()]
            return CachedAnswer([], to_read, known_skips)
        per_terms = list(zip(matches.counts, matches.in_headings, strict=True))
        phrase_files = matches.phrase_files
        scored: list[tuple[Source, list[int], list[bool]]] = []
        phrases: list[tuple[Source, bool]] = []
        for fid in matches.files():
            hit = answered.get(fid)
            if hit is None:
                continue  # changed, excluded or gone: answered from the store, or not at all
            if fid in phrase_files:
                phrases.append((hit, False))  # a phrase is counted in the text
                continue
            scored.append((hit, [c.get(fid, 0) for c, _ in per_terms], [fid in h for _, h in per_terms]))
        if self._kept is not None:
            if len(part.by_terms) >= _KEPT_QUERIES:
                part.by_terms.clear()
            part.by_terms[terms] = (scored, phrases)
        return CachedAnswer(scored, to_read + phrases, known_skips)

    def remember(self, rel: str, folded: bytes | None, headings: bytes = b"", *, skip: str | None = None) -> None:
        st = self._stats.get(rel)
        if st is not None:
            self._fresh.append(IndexedText(rel, stat_key(st), self._read_ns, folded, headings, skip=skip))

    def record(
        self, rows: list[tuple[str, str]], *, keep_rows: bool, excluded: Callable[[str], bool] | None
    ) -> tuple[int, bool]:
        if not self._use:
            return 0, False
        kept: IndexRows | None = None
        if keep_rows and self._index_key is not None:
            kept = self._recorded or IndexRows(self._index_key, rows, self._rows_read_ns)
        if self.opened is None:
            built = not self.index.unsupported and self.index.build(self._fresh, kept)
            return (len(self._fresh) if built else 0), built
        if self._hit and not self._fresh and excluded is None and kept is self.opened.index_rows:
            # Nothing read to index, the same sources and rows as the last search, which found
            # nothing to write either (a search that writes gives up the kept index).
            return 0, False
        if excluded is not None and any(excluded(rel) for rel in self.opened.files.rels):
            # A newly excluded entity's words must leave no trace, and the word index cannot
            # delete a document in place: the index goes whole (the next search builds it).
            self._drop()
            return 0, False
        # Recorded after the write only if the files were still as recorded before it: a write
        # of ours must not vouch for a change made by another program since the search opened.
        trusted = mark.trusted(self.index.path)
        written = update(self.opened, self._fresh, self._keep, kept)
        if written is not None:
            self._wrote = True  # the kept file table and rows are stale: the next search reloads
            self._stamped = bool(written) and trusted
        return (len(self._fresh) if written else 0), False

    def _drop(self) -> None:
        """Close and remove the index (its write-ahead log too) for this search and the next."""
        if self._first_opened is not None:
            self._first_opened.close()
        self._first_opened = self.opened = None
        self.index.remove()

    def close(self) -> None:
        opened = self._first_opened
        kept = self._kept
        if kept is not None:
            try:
                if opened is not None and self.opened is opened and opened.failure is None and not self._wrote:
                    kept.keep(opened, self._partition)
                    return
                kept.release()
            finally:
                kept.lock.release()
        if opened is not None:
            opened.close()
            if opened.corrupt:
                self.index.remove()  # damaged in a way opening it did not show: built again
                return
        if self._stamped:
            # Stamped once closed: the last connection to close folds the write-ahead log in.
            self.index.mark_written()
