"""The read side as library calls, for callers without a face (Dream, ``dream context``, the
Python API): one store opened, one answer, the store closed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dream_memory.app.read.results import ReadResult, ResolveResult, SearchResult
from dream_memory.app.read.scoping import ReaderScope, as_reader_scope
from dream_memory.app.read.store import ReadStore
from dream_memory.core.search import DEFAULT_MAX_RESULTS, Query


def search_store(
    store: Path | str,
    query: Query | str,
    max_results: int = DEFAULT_MAX_RESULTS,
    excludes: Iterable[str] = (),
    *,
    history: bool = False,
    at: str | None = None,
    cache_dir: Path | None = None,
    scope: str | ReaderScope | None = None,
) -> SearchResult:
    """Search a store folder (for Dream, ``dream context`` and other callers without the CLI).

    ``cache_dir`` lets a large store keep a ``SearchIndex`` there (outside the store). ``scope``
    (a name or a ``ReaderScope``; default shared) is who reads: files of other scopes are never
    searched; with ``history``, pass a ``ReaderScope`` carrying the rules so entries are judged."""
    reader_scope = as_reader_scope(scope)
    with ReadStore(Path(store), excludes=frozenset(excludes), at=at, cache_dir=cache_dir, scope=reader_scope) as reader:
        return reader.search(query, max_results=max_results, history=history)


def read_entity(
    store: Path | str,
    name: str,
    excludes: Iterable[str] = (),
    *,
    offset_line: int = 1,
    as_of: str | None = None,
    scope: str | ReaderScope | None = None,
) -> ReadResult:
    """An entity's page, now or ``as_of`` a date (the last commit by then)."""
    with ReadStore(Path(store), excludes=frozenset(excludes), as_of=as_of, scope=as_reader_scope(scope)) as reader:
        return reader.entity(name, offset_line=offset_line)


def read_section(
    store: Path | str,
    name: str,
    excludes: Iterable[str] = (),
    *,
    offset_line: int = 1,
    as_of: str | None = None,
    scope: str | ReaderScope | None = None,
) -> ReadResult:
    """A section's page (soul, user, memory, observations, sections/NAME.md; a private scope's
    private-user and private-memory), now or ``as_of`` a date."""
    with ReadStore(Path(store), excludes=frozenset(excludes), as_of=as_of, scope=as_reader_scope(scope)) as reader:
        return reader.section(name, offset_line=offset_line)


def resolve_path(
    store: Path | str, path: str, excludes: Iterable[str] = (), *, scope: str | ReaderScope | None = None
) -> ResolveResult:
    with ReadStore(Path(store), excludes=frozenset(excludes), scope=as_reader_scope(scope)) as reader:
        return reader.resolve(path)
