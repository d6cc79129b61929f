"""``dream why`` and ``dream blame`` for a reader in one scope (docs/provenance.md#scopes).

A path below ``scopes/`` that the reader's scope cannot see is refused before anything is read
(exit 2, a message naming the path and the reader's scope, never the file's text); ``--text``
looks only in files the reader sees; and a source entry whose session key belongs to a scope
the reader cannot see is shown as "an entry of another scope", without its content, session or
session file (a fact learnt only from such entries loses its text the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.app.provenance import LineWhy, SourceEntry, blame_of, why, why_at
from dream_memory.app.read.scoping import OTHER_SCOPE_ENTRY, ReaderScope
from dream_memory.app.why_paths import check_path
from dream_memory.errors import UsageError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime

OTHER_SCOPE_FACT = "(a fact learnt from entries of another scope)"


def check_visible(who: ReaderScope, path: str, root: Path | None) -> str:
    """The memory file ``path`` names, or exit 2 when it is another scope's."""
    rel = check_path(path, root)
    problem = who.problem(rel)
    if problem is not None:
        raise UsageError(
            problem, hint=f"this reader reads as {who.label()}; give --scope or --session-key to change it"
        )
    return rel


def hide_entry(entry: SourceEntry) -> SourceEntry:
    return SourceEntry(entry.cursor, entry.timestamp, None, None, OTHER_SCOPE_ENTRY)


def hide_other_scopes(found: LineWhy, who: ReaderScope) -> LineWhy:
    """``found`` with the entries (and facts) of scopes ``who`` cannot see stripped of content."""
    if not who.filters_history:
        return found
    hidden = {s.cursor for s in found.sources if not who.sees_entry(s.session_key)}
    if not hidden:
        return found
    sources = tuple(hide_entry(s) if s.cursor in hidden else s for s in found.sources)
    facts: list[dict[str, Any]] = []
    for fact in found.facts:
        cited = fact.get("sources")
        hide = isinstance(cited, list) and cited and set(cited) <= hidden
        facts.append({**fact, "name": None, "text": OTHER_SCOPE_FACT} if hide else fact)
    return replace(found, sources=sources, facts=tuple(facts))


def why_for(rt: Runtime, who: ReaderScope, target: str | None, text: str | None) -> list[LineWhy]:
    """``dream why`` as ``who``: another scope's path and an excluded entity's file refused,
    ``--text`` over the files that are neither."""
    excludes = rt.read_settings.excludes if rt.has_workspace() else frozenset()
    if target is not None and text is None and rt.has_workspace():
        path, _, number = target.rpartition(":")
        if path and number.strip().isdigit():
            _check_served(rt.root, check_visible(who, path, rt.root), excludes)
    with _Withheld(rt.root if rt.has_workspace() else None, excludes) as withheld:
        found = why(rt, target, text, visible=lambda rel: who.sees(rel) and not withheld(rel))
    return [hide_other_scopes(item, who) for item in found]


def blame_for(rt: Runtime, who: ReaderScope, path: str, rev: str = "HEAD") -> list[LineWhy]:
    """``dream blame`` as ``who``: another scope's file, or an excluded entity's, refused."""
    if rt.has_workspace():
        _check_served(rt.root, check_visible(who, path, rt.root), rt.read_settings.excludes)
    return [hide_other_scopes(line, who) for line in blame_of(rt, path, rev)]


def why_at_for(
    workspace: Path, who: ReaderScope, path: str, line: int, excludes: frozenset[str] = frozenset()
) -> LineWhy:
    """MCP ``dream_why`` as the server's scope, with its excludes."""
    _check_served(workspace, check_visible(who, path, workspace), excludes)
    return hide_other_scopes(why_at(workspace, path, line), who)


class _Withheld:
    """Whether a memory file belongs to an entity DREAM_MEMORY_EXCLUDE names: by its path (any
    spelling ``check_path`` accepts, an index row naming it), or as the same file under another
    name (a link). The read side's own rules (``ReadStore``), so `why` and `blame` withhold what
    `entity`, `section` and `search` withhold."""

    def __init__(self, root: Path | None, excludes: frozenset[str]) -> None:
        from dream_memory.app.read.store import ReadStore

        self.store = ReadStore(root, excludes=excludes) if root is not None and excludes else None

    def __enter__(self) -> Callable[[str], bool]:
        return self.withheld

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()

    def withheld(self, rel: str) -> bool:
        store = self.store
        if store is None:
            return False
        if store.is_excluded_path(rel):
            return True
        ident = store.tree.identity(rel)
        return ident is not None and ident in store.excluded_identities()


def _check_served(root: Path, rel: str, excludes: frozenset[str]) -> None:
    """Exit 2 when ``rel`` belongs to an excluded entity."""
    with _Withheld(root, excludes) as withheld:
        if withheld(rel):
            raise UsageError(
                f"{rel} belongs to an entity excluded by DREAM_MEMORY_EXCLUDE; it is not served",
                hint="the exclusion is this reader's configuration (DREAM_MEMORY_EXCLUDE)",
            )
