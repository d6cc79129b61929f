"""The read side's store: a read-only view of one store folder, now or at a git revision, with
excludes applied (docs/reference/read-side.md). ``resolve``, ``entity``, ``section`` and ``index_page``
live here; ``search`` is in ``app.read.search``.

Guarantees, each enforced here rather than left to the faces:

- Read-only by construction: every byte comes from a ``core.ports.StoreTree`` (``adapters.
  store_tree``), which opens store files ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK`` after their real
  path is checked, and nothing is ever created in the store. The one write a read can make is
  the optional search index (``adapters.search_index``), under the user's cache folder, and it
  refuses a cache folder inside the store.
- Paths never leave the store root: File cells and section names are checked lexically (no ``..``,
  no absolute path), then the real path (symlinks followed) must still lie inside the store.
- Bounded: entity and section text is cut at 200 lines / 16 KiB (``core.bounded``), and files
  are read line by line, so a huge file is never read whole; search shows at most three lines of
  at most 240 characters per source, for at most 50 sources.
- Excludes (``DREAM_MEMORY_EXCLUDE``) hide entities from every surface: entity reads are refused,
  search skips their files before the result limit is applied, resolve never returns them, and
  the index as served has their rows removed. This holds for ``--at`` reads too.
- Text from observations.md (unverified ingest output) always comes behind a first line starting
  with ``> Provisional:``.
- Scopes (``app.read.scoping``): a file below ``scopes/`` that the reader's scope cannot see is
  never served, listed, searched or resolved, under any name (a File cell, a symlink or a hard
  link to it is refused like the file itself); a private scope also reads its own two files.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.search_index.facade import open_search_cache
from dream_memory.adapters.search_index.location import KeptIndex
from dream_memory.adapters.store_tree import absolute_path, real_path
from dream_memory.adapters.store_tree import open_tree as _open_tree
from dream_memory.adapters.store_watch import StoreWatch
from dream_memory.app.read.results import PROVISIONAL_NOTICE, ReadResult, ResolveResult, SearchResult
from dream_memory.app.read.scoping import SHARED_READER, ReaderScope
from dream_memory.app.read.text import (
    EXCLUDE_VARIABLE,
    MAX_SEARCH_FILE_BYTES,
    SECTION_ALIASES,
    SNIFF_BYTES,
    check_name,
    looks_binary,
    stream_lines,
)
from dream_memory.app.read.withholding import Withholding
from dream_memory.core import layout
from dream_memory.core.bounded import MAX_BYTES, bound_lines, cli_hint, split_lines
from dream_memory.core.index_table import (
    IndexRow,
    IndexTable,
    filtered_index_text,
    name_key,
    parse_index,
    resolve,
    safe_relative,
)
from dream_memory.core.paths import describe, serve_problem
from dream_memory.core.ports import SearchCache, StoreTree, TooLarge
from dream_memory.core.search import DEFAULT_MAX_RESULTS, Query, as_query, check_max_results
from dream_memory.core.terminal import one_line
from dream_memory.errors import InputError, NotFound, Refused, UsageError, Withheld

if TYPE_CHECKING:
    from dream_memory.app.read.as_of import AsOfCommit

__all__ = ["CACHE_MIN_FILES", "ReadStore", "StoreWatch"]

# A long-lived reader's search index, kept open per store watch (weak: it goes with the watch).
_KEPT_INDEXES: weakref.WeakKeyDictionary[StoreWatch, KeptIndex] = weakref.WeakKeyDictionary()

# Below this many searchable files, reading them directly is as fast as the index: none is kept.
CACHE_MIN_FILES = 500


@dataclass
class ReadStore(Withholding):
    """A read-only view of one store folder, now or at a git revision, with excludes applied.

    ``home`` expands ``~`` in the index's Repos cells (default: the current user's home).
    ``cache_dir`` (e.g. ``~/.cache/dream-memory``) lets search keep a ``SearchIndex`` there for
    stores of at least ``cache_min_files`` files; None (the default) searches without one.
    ``open_tree`` and ``open_cache`` are where the bytes and the search index come from (the
    adapters' by default; the runtime or a test may pass others).
    """

    root: Path
    excludes: frozenset[str] = frozenset()
    at: str | None = None
    # A date or time (``--as-of``): read at the last commit made by then (``app.read.as_of``).
    as_of: str | None = None
    home: str | None = None
    # Who reads: the shared scope unless the caller named one (docs/read-side.md#scopes).
    scope: ReaderScope = SHARED_READER
    cache_dir: Path | None = None
    cache_min_files: int = CACHE_MIN_FILES
    open_tree: Callable[[Path, str | None], StoreTree] = field(default=_open_tree, repr=False)
    open_cache: Callable[..., SearchCache] = field(default=open_search_cache, repr=False)
    # A long-lived reader's watch on the store (``dream mcp``): search skips the lstat per file
    # between changes (adapters.store_watch); the caller owns it and closes it.
    watch: StoreWatch | None = field(default=None, repr=False)
    _tree: StoreTree = field(init=False, repr=False)
    _index: tuple[IndexTable, str] | None = field(init=False, default=None, repr=False)
    _index_text: str | None = field(init=False, default=None, repr=False)
    _excluded_ids: set[object] | None = field(init=False, default=None, repr=False)
    _private_ids: tuple[set[object], set[object]] | None = field(init=False, default=None, repr=False)
    as_of_commit: AsOfCommit | None = field(init=False, default=None)
    # How the last search was answered: files answered by the index, files read, files (re-)indexed,
    # whether the index was built.
    last_search_stats: dict[str, int] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.excludes = frozenset(name_key(e) for e in self.excludes if e.strip())
        if self.as_of is not None:
            if self.at is not None:
                raise UsageError("give either --at or --as-of, not both", hint="--at names a commit, --as-of a date")
            # Imported here: date parsing is not on the path of a read of the store as it is now.
            from dream_memory.app.read.as_of import commit_as_of

            self.as_of_commit = commit_as_of(Path(self.root), self.as_of)
            self.at = self.as_of_commit.sha
        self._tree = self.open_tree(Path(self.root), self.at)
        self.root = Path(self._tree.root)
        if self.home is None:
            self.home = str(Path.home())

    @property
    def tree(self) -> StoreTree:
        """Where this store's bytes come from (the folder now, or a revision)."""
        return self._tree

    @property
    def revision(self) -> str | None:
        return self._tree.revision

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        """The tree's ``list_markdown``, answered by the watch when one is given."""
        if self.watch is not None:
            return self.watch.list_markdown(self._tree, folder, stats)
        return self._tree.list_markdown(folder, stats)

    def close(self) -> None:
        self._tree.close()

    def __enter__(self) -> ReadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the index ---------------------------------------------------------------------------

    def _index_text_now(self) -> str:
        if self._index_text is None:
            try:
                data = self._tree.read(layout.INDEX, MAX_SEARCH_FILE_BYTES)
            except TooLarge:
                raise Refused(f"{layout.INDEX} is larger than {MAX_SEARCH_FILE_BYTES} bytes; not read") from None
            self._index_text = "" if data is None else data.decode("utf-8", errors="replace")
        return self._index_text

    def _index_source(self) -> tuple[IndexTable, str]:
        if self._index is None:
            text = self._index_text_now()
            self._index = (parse_index(text, home=self.home), text)
        return self._index

    @property
    def index(self) -> IndexTable:
        return self._index_source()[0]

    @property
    def index_problems(self) -> tuple[str, ...]:
        """Rows of index.md that could not be used, if index.md was parsed (search may not need to)."""
        return self._index[0].problems if self._index is not None else ()

    def _find_row(self, name: str) -> IndexRow | None:
        """The index row of one entity, parsing only the lines that mention it when possible."""
        if self._index is not None:
            return self._index[0].find(name)
        text = self._index_text_now()
        row = parse_index(text, home=self.home, only=name).find(name)
        return row if row is not None else self.index.find(name)

    # --- resolve ----------------------------------------------------------------------------

    def resolve(self, path: str) -> ResolveResult:
        """The entity whose repo root contains ``path`` (made absolute; ``~`` expanded)."""
        if not path.strip() or "\0" in path:
            raise InputError("give a path to resolve")
        raw = path.strip()
        if raw == "~" or raw.startswith("~/"):
            raw = (self.home or "").rstrip("/") + raw[1:]
        absolute = absolute_path(raw)
        table = self.index
        if not table.rows:
            raise NotFound(
                f"no entity resolves {absolute}: {self.root / layout.INDEX} has no Entity/File/Repos table rows"
            )
        # An entity whose File is another scope's never resolves: a broader root answers instead.
        withheld = self.excludes | self._unseen(table.rows)
        found = resolve(table.rows, absolute, excluded=withheld)
        if found is None:
            real = real_path(absolute)
            if real != absolute:
                found = resolve(table.rows, real, excluded=withheld)
        if found is None:
            raise NotFound(
                f"no entity resolves {absolute}: no Repos root in {layout.INDEX} contains it",
                hint="roots match whole path components; dream search finds entities by text",
            )
        if found.file:
            self._checked_file(found.entity, found.file, found.line_no)
        return ResolveResult(
            path=absolute,
            entity=found.entity,
            file=found.file,
            root=found.root,
            index_line=found.line_no,
            ties=found.ties,
            revision=self.revision,
        )

    # --- entity / section ---------------------------------------------------------------------

    def _checked_file(self, entity: str, cell: str, line_no: int) -> str:
        rel = safe_relative(cell)
        if rel is None:
            raise Refused(
                f"{layout.INDEX} line {line_no}: the File cell of entity {entity!r} points outside the store",
                hint="File must be a path relative to the store, without '..'",
            )
        problem = serve_problem(rel)
        if problem is not None:
            raise Refused(
                f"{layout.INDEX} line {line_no}: the File cell of entity {entity!r} names {describe(rel)} "
                f"({problem}); it is not served",
                hint="File must name a markdown file of the store, such as entities/NAME.md",
            )
        if not self.scope.sees(rel):
            raise Withheld(
                f"{layout.INDEX} line {line_no}: the File cell of entity {entity!r} names a file of another "
                "scope; it is not served",
                hint=f"this reader reads as {self.scope.label()}",
            )
        return rel

    def _entity_file(self, name: str) -> tuple[str, str]:
        """(display name, store-relative file) for an entity, or NotFound/Refused."""
        clean = check_name(name, "entity")
        if self.is_excluded_name(clean):
            raise Withheld(
                f"entity {clean!r} is excluded by {EXCLUDE_VARIABLE}; it is not served",
                hint=f"remove it from {EXCLUDE_VARIABLE} to read it",
            )
        row: IndexRow | None = self._find_row(clean)
        if row is not None and row.file:
            return row.entity, self._checked_file(row.entity, row.file, row.line_no)
        fallback = safe_relative(f"{layout.ENTITIES_DIR}/{clean}.md")
        if fallback is not None and serve_problem(fallback) is None:
            if self._tree.has_file(fallback):
                return (row.entity if row else clean), fallback
            self._refuse_not_a_file(fallback)
        known = self.entity_names()[:12]
        where = (
            f"{layout.INDEX} has a row for it but no File"
            if row
            else f"not in {layout.INDEX} nor {layout.ENTITIES_DIR}/"
        )
        raise NotFound(
            f"no entity named {clean!r} ({where})",
            hint=("known entities: " + ", ".join(map(one_line, known))) if known else "the store has no entities yet",
        )

    def _page(self, kind: str, name: str, rel: str, *, offset_line: int, hint: Callable[[int], str]) -> ReadResult:
        if offset_line < 1:
            raise InputError.naming(lambda o: (f"{o('--offset-line')} starts at 1", None))
        if self.is_excluded_path(rel):
            raise Withheld(f"{rel} belongs to an entity excluded by {EXCLUDE_VARIABLE}; it is not served")
        stream = self._tree.open_stream(rel)
        if stream is None:
            self._refuse_not_a_file(rel)
            raise NotFound(f"{kind} {name!r}: {rel} does not exist" + self._at_suffix())
        provisional = rel == layout.OBSERVATIONS
        with stream:
            if self.excludes:
                self._refuse_same_file(rel, self._tree.identity_of(rel, stream))
            if self.hidden_identities() or not self.scope.sees(rel):
                self._refuse_hidden(rel, self._tree.identity_of(rel, stream))
            head = stream.read(SNIFF_BYTES)
            if looks_binary(head):
                raise Refused(f"{rel} is not a UTF-8 text file; the read side serves text only")
            page = bound_lines(
                stream_lines(stream, head, MAX_BYTES + 1),
                offset_line=offset_line,
                header=PROVISIONAL_NOTICE if provisional else "",
                hint=hint,
            )
        if page.last_line == 0 and offset_line > 1:  # a miss, in every face: never an empty page
            raise NotFound(
                f"{rel} has no line {offset_line}{self._at_suffix()}", hint=f"{hint(1)} reads it from the start"
            )
        return ReadResult.from_page(kind, name, rel, page, provisional=provisional, revision=self.revision)

    def _refuse_not_a_file(self, rel: str) -> None:
        """Something that is there but not a regular file is refused as what it is, never
        reported as missing."""
        what = self._tree.kind_of(rel)
        if what is None:
            return
        why = (
            "a read at a revision never follows a symlink"
            if what == "a symlink"
            else "the read side reads regular files only"
        )
        raise Refused(f"{rel} is {what}{self._at_suffix()}, not a regular file; {why}")

    def _at_suffix(self) -> str:
        return f" at {self.revision[:12]}" if self.revision else ""

    def entity(self, name: str, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """An entity's file, bounded; refused when the entity is excluded."""
        display, rel = self._entity_file(name)
        return self._page("entity", display, rel, offset_line=offset_line, hint=hint)

    def section_file(self, name: str) -> tuple[str, str]:
        clean = check_name(name, "section")
        alias = SECTION_ALIASES.get(clean.casefold()) or self.scope.private_section(clean)
        if alias is not None:
            return clean.casefold(), alias
        base = clean[:-3] if clean.endswith(".md") else clean
        rel = safe_relative(f"{layout.SECTIONS_DIR}/{base}.md") if safe_relative(base) == base else None
        if rel is None or serve_problem(rel) is not None:
            raise Refused(f"section name {clean!r} would leave the {layout.SECTIONS_DIR}/ folder; it is not served")
        if not self._tree.has_file(rel):
            self._refuse_not_a_file(rel)
            names = self.section_names()
            raise NotFound(
                f"no section named {clean!r} ({rel} does not exist{self._at_suffix()})",
                hint="sections: " + ", ".join(map(one_line, names[:16])),
            )
        return base, rel

    def section(self, name: str, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """``sections/NAME.md``, or SOUL.md / USER.md / memory/MEMORY.md / observations.md for
        soul / user / memory / observations; bounded."""
        display, rel = self.section_file(name)
        return self._page("section", display, rel, offset_line=offset_line, hint=hint)

    def index_page(self, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """index.md as served: the rows of excluded entities and other scopes' removed, bounded."""
        table, text = self._index_source()
        shown = filtered_index_text(text, table, self.excludes | self._unseen(table.rows))
        page = bound_lines(split_lines(shown), offset_line=offset_line, hint=hint)
        return ReadResult.from_page("index", "index", layout.INDEX, page, revision=self.revision)

    # --- search -----------------------------------------------------------------------------

    def search(
        self, query: Query | str, *, max_results: int = DEFAULT_MAX_RESULTS, history: bool = False
    ) -> SearchResult:
        """Sources matching ``query``, best first; excluded entities are skipped before the limit."""
        from dream_memory.app.read.search import run_search

        q = as_query(query)
        limit = check_max_results(max_results)
        if self._tree.revision is None:
            # A reader kept open between searches (a watched one, say) sees index.md, the
            # excluded files and the scoped files as they are now, as a new reader would.
            self._index = None
            self._index_text = None
            self._excluded_ids = None
            self._private_ids = None
        if self.watch is not None and self.watch.active and self._tree.revision is None:
            # A long-lived reader keeps the index open between its searches (KeptIndex).
            kept = _KEPT_INDEXES.get(self.watch)
            if kept is None:
                kept = _KEPT_INDEXES[self.watch] = KeptIndex()
            cache = self.open_cache(self.cache_dir, self._tree, min_files=self.cache_min_files, kept=kept)
        else:
            cache = self.open_cache(self.cache_dir, self._tree, min_files=self.cache_min_files)
        try:
            return run_search(self, cache, q, limit, history=history)
        finally:
            cache.close()
