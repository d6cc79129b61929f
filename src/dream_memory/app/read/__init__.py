"""The read side's use cases: resolve, entity, section, search (docs/reference/read-side.md).

One library behind two thin faces: the CLI (``dream resolve|entity|section|search``) and the MCP
server. Both get the same result objects from a ``ReadStore`` and render them with the same
``to_text()`` / ``to_json()``, so an agent over MCP and a person in a terminal see the same thing.

The package, along its seams: ``results`` (the result values), ``text`` (text helpers and
names), ``store`` (``ReadStore``: index, resolve, entity, section), ``search`` (the search run)
and ``service`` (one-call library entry points). No module here reads a file itself: the bytes
come from a ``core.ports.StoreTree`` (``adapters.store_tree``) and the search index from
``adapters.search_index.facade``. The guarantees are listed in ``app.read.store``.
"""

from dream_memory.app.read.results import (
    PROVISIONAL_NOTICE,
    ReadResult,
    ResolveResult,
    SearchResult,
    SearchResultItem,
)
from dream_memory.app.read.service import read_entity, read_section, resolve_path, search_store
from dream_memory.app.read.store import CACHE_MIN_FILES, ReadStore
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
    "SECTION_ALIASES",
    "ReadResult",
    "ReadStore",
    "ResolveResult",
    "SearchResult",
    "SearchResultItem",
    "hint_for",
    "looks_binary",
    "read_entity",
    "read_section",
    "resolve_path",
    "search_store",
]
