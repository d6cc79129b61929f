"""The read side's use cases: resolve, entity, section, search (docs/reference/read-side.md).

One library behind two thin faces: the CLI (``dream resolve|entity|section|search``) and the MCP
server. Both get the same result objects from a ``ReadStore`` and render them with the same
``to_text()`` / ``to_json()``, so an agent over MCP and a person in a terminal see the same thing.

The package, along its seams: ``results`` (the result values), ``text`` (text helpers and
names), ``store`` (``ReadStore``: index, resolve, entity, section), ``search`` (the search run),
``scoping`` (who reads: the caller's scope) and ``service`` (one-call library entry points). No
module here reads a file itself: the bytes come from a ``core.ports.StoreTree``
(``adapters.store_tree``) and the search index from ``adapters.search_index.facade``. The
guarantees are listed in ``app.read.store``.
"""

from dream_memory.app.read.results import (
    PROVISIONAL_NOTICE,
    ReadResult,
    ResolveResult,
    SearchResult,
    SearchResultItem,
)
from dream_memory.app.read.scoping import (
    SCOPE_VARIABLE,
    SESSION_KEY_VARIABLE,
    ReaderScope,
    as_reader_scope,
    caller_scope,
)
from dream_memory.app.read.service import read_entity, read_section, resolve_path, search_store
from dream_memory.app.read.store import CACHE_MIN_FILES, ReadStore, StoreWatch
from dream_memory.app.read.text import (
    DURABLE_NAMES,
    EXCLUDE_VARIABLE,
    MAX_NAME_CHARS,
    MAX_SEARCH_FILE_BYTES,
    SECTION_ALIASES,
    hint_for,
    looks_binary,
)

__all__ = [
    "CACHE_MIN_FILES",
    "DURABLE_NAMES",
    "EXCLUDE_VARIABLE",
    "MAX_NAME_CHARS",
    "MAX_SEARCH_FILE_BYTES",
    "PROVISIONAL_NOTICE",
    "SCOPE_VARIABLE",
    "SECTION_ALIASES",
    "SESSION_KEY_VARIABLE",
    "ReadResult",
    "ReadStore",
    "ReaderScope",
    "ResolveResult",
    "SearchResult",
    "SearchResultItem",
    "StoreWatch",
    "as_reader_scope",
    "caller_scope",
    "hint_for",
    "looks_binary",
    "read_entity",
    "read_section",
    "resolve_path",
    "search_store",
]
