"""``dream why`` and ``dream blame`` for a reader in one scope (docs/provenance.md#scopes).

A path below ``scopes/`` that the reader's scope cannot see is refused before anything is read
(exit 2, a message naming the path and the reader's scope, never the file's text); ``--text``
looks only in files the reader sees; and a source entry whose session key belongs to a scope
the reader cannot see is shown as "an entry of another scope", without its content, session or
session file (a fact learnt only from such entries loses its text the same way).
"""

from __future__ import annotations

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
    """``dream why`` as ``who``: another scope's path refused, ``--text`` over visible files."""
    if target is not None and text is None and rt.has_workspace():
        path, _, number = target.rpartition(":")
        if path and number.strip().isdigit():
            check_visible(who, path, rt.root)
    found = why(rt, target, text, visible=who.sees)
    return [hide_other_scopes(item, who) for item in found]


def blame_for(rt: Runtime, who: ReaderScope, path: str, rev: str = "HEAD") -> list[LineWhy]:
    """``dream blame`` as ``who``: another scope's file refused."""
    if rt.has_workspace():
        check_visible(who, path, rt.root)
    return [hide_other_scopes(line, who) for line in blame_of(rt, path, rev)]


def why_at_for(workspace: Path, who: ReaderScope, path: str, line: int) -> LineWhy:
    """MCP ``dream_why`` as the server's scope."""
    check_visible(who, path, workspace)
    return hide_other_scopes(why_at(workspace, path, line), who)
