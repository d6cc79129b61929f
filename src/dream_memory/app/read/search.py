"""``dream search`` over one store: the sources, what the search index answers, the files read
and scored, the index written back, and the best sources shown.

Every source is scored by the one rule of ``core.search.score``, whether its per-term counts come
from the index or from its text; the index can make a search faster, never different.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from dream_memory.app.read.results import SearchResult, SearchResultItem
from dream_memory.app.read.text import DURABLE_NAMES, MAX_SEARCH_FILE_BYTES, SNIFF_BYTES, history_text, looks_binary
from dream_memory.core import layout
from dream_memory.core.index_table import name_key, safe_relative
from dream_memory.core.paths import serve_problem
from dream_memory.core.ports import SearchCache, Source, StoreTree, TooLarge
from dream_memory.core.search import (
    MAX_RESULTS_LIMIT,
    Query,
    Score,
    fold_bytes,
    heading_lines,
    preview_lines,
    score,
    term_counts,
    top,
)
from dream_memory.errors import Refused

if TYPE_CHECKING:
    import os

    from dream_memory.adapters.store_watch import StoreWatch
    from dream_memory.app.read.store import ReadStore

Candidate = tuple[Score, str, tuple[str, str]]  # (score, path, (name, kind))


def run_search(store: ReadStore, cache: SearchCache, q: Query, limit: int, *, history: bool) -> SearchResult:
    """Sources matching ``q``, best first; excluded entities are skipped before the limit."""
    recorded = cache.rows()
    rows = recorded if recorded is not None else [(r.entity, r.file) for r in store.index.rows]
    refused: dict[str, str] = {}  # index rows naming a file the read side never serves
    sources = search_sources(store, history, rows, cache.stats, refused)
    answer = cache.answer(q, sources)
    best, matched = _best_answered(store, answer.scored, q)
    candidates = list(best)
    # "path: reason" for files not searched, reported in source order however they were met.
    skip_reasons = dict(answer.skips)
    visible = store.scope.sees_entry if store.scope.filters_history else None
    candidates += _read_and_score(store.tree, q, answer.to_read, cache, skip_reasons, visible=visible)
    skipped = [f"{s[0]}: {skip_reasons[s[0]]}" for s in sources if s[0] in skip_reasons]
    skipped += [f"{rel}: {reason}" for rel, reason in sorted(refused.items())]
    # index.md's rows are never kept while an exclude is set (they would name it).
    excluded = _excluded_predicate(store, rows) if store.excludes else None
    indexed, rebuilt = cache.record(rows, keep_rows=not store.excludes, excluded=excluded)
    store.last_search_stats = {
        "sources": len(sources),
        "from_cache": len(sources) - len(answer.to_read),
        "read": len(answer.to_read),
        "indexed": indexed,
        "rebuilt": int(rebuilt),
    }
    return SearchResult(
        query=q.text,
        terms=q.terms,
        max_results=limit,
        matched=matched + len(candidates) - len(best),
        results=_items(store.tree, q, top(candidates, limit), visible),
        skipped=tuple(skipped),
        revision=store.revision,
        history=history,
        warnings=cache.warnings,
    )


# Per store watch: scored lists the search index handed out (it hands the same list object out
# again only while the sources, the index and the query terms are all unchanged:
# facade.IndexCache), with the best MAX_RESULTS_LIMIT candidates scored from each and how many
# matched. The best of the whole search are then the best of those and of the files read: the
# order is total (ties go by path), and a source is either answered by the index or read.
_KEPT_BEST: weakref.WeakKeyDictionary[StoreWatch, dict[int, tuple[object, list[Candidate], int]]] = (
    weakref.WeakKeyDictionary()
)
_KEPT_BEST_QUERIES = 16


def _best_answered(
    store: ReadStore, scored: list[tuple[Source, list[int], list[bool]]], q: Query
) -> tuple[list[Candidate], int]:
    """The best candidates among the sources the index answered, and how many of them matched."""
    watch = store.watch
    if watch is None or not scored:
        found = _score_answered(scored, q)
        return found, len(found)
    kept = _KEPT_BEST.setdefault(watch, {})
    known = kept.get(id(scored))
    if known is not None and known[0] is scored:
        return known[1], known[2]
    found = _score_answered(scored, q)
    if len(kept) >= _KEPT_BEST_QUERIES:
        kept.clear()
    best = top(found, MAX_RESULTS_LIMIT)
    kept[id(scored)] = (scored, best, len(found))  # holding the list: its id stays its own
    return best, len(found)


def _score_answered(scored: list[tuple[Source, list[int], list[bool]]], q: Query) -> list[Candidate]:
    """Sources the index answered, scored from its counts (a common word gets here once per file
    of the store)."""
    found: list[Candidate] = []
    for (rel, name, kind, _), counts, in_headings in scored:
        result = score(counts, in_headings, name, q)
        if result is not None:
            found.append((result, rel, (name, kind)))
    return found


def _read_and_score(
    tree: StoreTree,
    q: Query,
    to_read: list[tuple[Source, bool]],
    cache: SearchCache,
    skip_reasons: dict[str, str],
    *,
    visible: Callable[[str | None], bool] | None,
) -> list[Candidate]:
    """Read and score the sources the index did not answer; those marked hand their folded text
    (or why they are not searchable) back to the index."""
    found: list[Candidate] = []
    too_large = f"larger than {MAX_SEARCH_FILE_BYTES // (1024 * 1024)} MiB"
    for (rel, name, kind, listed), index_it in to_read:
        try:
            data = tree.read(rel, MAX_SEARCH_FILE_BYTES, listed=listed)
        except TooLarge:
            skip_reasons[rel] = too_large
            if index_it:
                cache.remember(rel, None, skip=too_large)
            continue
        except Refused as exc:
            skip_reasons[rel] = exc.message
            continue
        if data is None:
            continue
        # entity and section refuse what looks binary in its first block; search skips it too,
        # and also skips a file with a NUL further on (its words would be cut at the NUL).
        # history.jsonl is not theirs to refuse: the history log keeps a line another tool wrote
        # in another encoding, and every other line of the file stays searchable.
        if b"\0" in data or (kind != "history" and looks_binary(data[:SNIFF_BYTES])):
            skip_reasons[rel] = "binary"
            if index_it:
                cache.remember(rel, None, skip="binary")
            continue
        # history.jsonl is JSON: entries are rendered first, so escapes do not hide words.
        folded = fold_bytes(history_text(data, visible).encode("utf-8") if kind == "history" else data)
        headings = heading_lines(folded)
        if index_it:
            cache.remember(rel, folded, headings)
        result = score(*term_counts(folded, q, headings), name, q)
        if result is not None:
            found.append((result, rel, (name, kind)))
    return found


def _items(
    tree: StoreTree, q: Query, best: list[Candidate], visible: Callable[[str | None], bool] | None
) -> tuple[SearchResultItem, ...]:
    """The sources shown, with their preview lines (only these are decoded)."""
    items: list[SearchResultItem] = []
    for found, rel, (name, kind) in best:
        data = tree.read(rel, MAX_SEARCH_FILE_BYTES) or b""
        text = history_text(data, visible) if kind == "history" else data.decode("utf-8", errors="replace")
        items.append(
            SearchResultItem(
                path=rel,
                name=name,
                kind=kind,
                terms_covered=found.terms_covered,
                terms_total=len(q.terms),
                name_hits=found.name_hits,
                hit_count=found.hit_count,
                lines=preview_lines(text, q),
            )
        )
    return tuple(items)


def _excluded_predicate(store: ReadStore, rows: list[tuple[str, str]]) -> Callable[[str], bool]:
    """``rel`` -> belongs to an excluded entity; the excluded files are worked out on first use."""
    files: set[str] | None = None

    def excluded(rel: str) -> bool:
        nonlocal files
        if files is None:
            files = store.excluded_files(rows)
        return store.is_excluded_path(rel, files)

    return excluded


# --- the sources -----------------------------------------------------------------------------------


class _KeptSources(NamedTuple):
    """One watched search's sources, and what they were built from."""

    generation: int  # the watch's, unchanged across that search's listings
    history: bool
    scope: object
    rows: list[tuple[str, str]]
    sources: list[Source]
    refused: dict[str, str]


# Per store watch (a long-lived reader): the last search's sources. Weak: a watch dropped takes
# its entry with it.
_KEPT: weakref.WeakKeyDictionary[StoreWatch, _KeptSources] = weakref.WeakKeyDictionary()

# Both are pure functions of the cell's text, checked for every index row by every search: a
# long-lived reader (``dream mcp``) pays them once per distinct row, not once per search.
_safe_relative = functools.lru_cache(maxsize=1 << 16)(safe_relative)
_serve_problem = functools.lru_cache(maxsize=1 << 16)(serve_problem)
# The File cell of nearly every row a store holds: ASCII letters, digits, ``_`` and ``-`` in
# components below entities/ or sections/, ending in ``.md``. Such a cell is its own clean
# relative path and a file the read side serves (nothing in it is absolute, hidden, ``..``, a
# control, a ``.git`` spelling or raw history: ``core.paths.serve_problem``'s rules), which a
# one-shot search would otherwise work out for all 5,000 rows of a large index.md (a test checks
# that the two agree).
PLAIN_FILE = re.compile(r"(?:entities|sections)(?:/[A-Za-z0-9_][A-Za-z0-9_-]*)+\.md")


def _files_of_rows(store: ReadStore, rows: list[tuple[str, str]], refused: dict[str, str]) -> dict[str, str]:
    """File -> entity of the index rows whose file the read side serves (the first row wins);
    rows naming a file it never serves go to ``refused`` (path: reason)."""
    by_file: dict[str, str] = {}
    plain = PLAIN_FILE.fullmatch
    for entity, file in rows:
        simple = plain(file) is not None
        rel = file if simple else _safe_relative(file) if file else None
        # Another scope's file is no source of this reader's at all: not even listed as skipped.
        if rel and name_key(entity) not in store.excludes and store.scope.sees(rel):
            problem = None if simple else _serve_problem(rel)
            if problem is None:
                by_file.setdefault(rel, entity)
            else:
                refused[rel] = f"not served ({problem})"
    return by_file


def search_sources(
    store: ReadStore,
    history: bool,
    rows: list[tuple[str, str]],
    stats: dict[str, os.stat_result] | None,
    refused: dict[str, str],
) -> list[Source]:
    """(path, name, kind, listed) of every searchable file, excluded ones already left out."""
    hidden = store.hidden_identities()  # files of other scopes: links to them are withheld too
    if (store.excludes or hidden) and stats is None:
        stats = {}  # the identities of the listed files, to withhold links to excluded ones
    watch = store.watch if store.watch is not None and store.watch.active else None
    before = watch.generation if watch is not None else -1
    # The listed folders hold nearly every source of a large store.
    entities = store.list_markdown(layout.ENTITIES_DIR, stats)
    sections = store.list_markdown(layout.SECTIONS_DIR, stats)
    # While the watch vouches that neither listing nor any listed file's stat changed (its
    # generation the same before and after listing, and as when they were kept), the sources are
    # those of the last search with the same rows, and the search index may keep its own work on
    # them too (facade.IndexCache). Excludes and links to scoped files need each file's
    # identity checked afresh: never kept.
    keep = None
    unchanged = watch is not None and watch.generation == before
    if watch is not None and unchanged and not store.excludes and not hidden and not store.own_identities():
        keep = _KeptSources(before, history, store.scope, rows, [], {})
        last = _KEPT.get(watch)
        if last is not None and last[:3] == keep[:3] and (last.rows is rows or last.rows == rows):
            refused.update(last.refused)
            return last.sources
    sources = _build_sources(
        store, history, rows=rows, stats=stats, refused=refused, listed=(entities, sections), hidden=hidden
    )
    if keep is not None and watch is not None:
        _KEPT[watch] = keep._replace(sources=sources, refused=dict(refused))
    return sources


def _build_sources(
    store: ReadStore,
    history: bool,
    *,
    rows: list[tuple[str, str]],
    stats: dict[str, os.stat_result] | None,
    refused: dict[str, str],
    listed: tuple[list[str], list[str]],
    hidden: set[object],
) -> list[Source]:
    """The sources, from index.md's rows and the listings of entities/ and sections/."""
    entities, sections = listed
    excluded_files = store.excluded_files(rows)
    by_file = _files_of_rows(store, rows, refused)
    sources: list[Source] = []
    seen: set[str] = set()

    def add(rel: str, name: str, kind: str) -> None:
        if rel in seen or store.is_excluded_path(rel, excluded_files):
            return
        seen.add(rel)
        sources.append((rel, name, kind, False))

    for rel, name in DURABLE_NAMES.items():
        add(rel, name, "durable")
    add(layout.OBSERVATIONS, "observations", "observations")
    for name, rel in store.scope.own_sections().items():
        add(rel, name, "private")  # a private scope's own USER.md and MEMORY.md
    # The listed files are added inline (no excludes to check in the common case), not by add().
    if store.excludes:
        entities = [rel for rel in entities if not store.is_excluded_path(rel, excluded_files)]
        sections = [rel for rel in sections if not store.is_excluded_path(rel, excluded_files)]
    start = len(layout.ENTITIES_DIR) + 1
    sources += [(rel, by_file.get(rel, rel[start:-3]), "entity", True) for rel in entities if rel not in seen]
    seen.update(entities)
    start = len(layout.SECTIONS_DIR) + 1
    sources += [(rel, rel[start:-3], "section", True) for rel in sections if rel not in seen]
    seen.update(sections)
    for rel, name in sorted(by_file.items()):
        if rel not in seen and rel != layout.INDEX:
            add(rel, name, "entity")
    if history:
        add(layout.HISTORY, "history", "history")
    ids = (store.excluded_identities() if store.excludes else set()) | hidden
    own = store.own_identities()
    if ids or own:
        sources = _without_links(store.tree, sources, stats or {}, ids, own)
    return sources


def _without_links(
    tree: StoreTree, sources: list[Source], stats: dict[str, os.stat_result], ids: set[object], own: set[object]
) -> list[Source]:
    """``sources`` without the files whose identity is withheld (an excluded entity's, another
    scope's); a listed file that is the reader's own private file under a second name is read
    directly, never put in the search index every reader of the store shares."""
    kept: list[Source] = []
    for source in sources:
        rel, name, kind, listed = source
        ident = tree.identity(rel, stats.get(rel) if listed else None)
        if ident in ids:
            continue
        kept.append((rel, name, kind, False) if listed and ident in own else source)
    return kept
