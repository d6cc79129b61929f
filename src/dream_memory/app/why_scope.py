"""``dream why`` and ``dream blame`` for a reader in one scope (docs/provenance.md#scopes).

A path below ``scopes/`` that the reader's scope cannot see is refused before anything is read
(exit 2, a message naming the path and the reader's scope, never the file's text); ``--text``
looks only in files the reader sees; and a source entry whose session key belongs to a scope
the reader cannot see is shown as "an entry of another scope", without its content, session or
session file (a fact learnt only from such entries loses its text the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.app.provenance import LineWhy, SourceEntry, blame_of, why, why_at
from dream_memory.app.read.scoping import OTHER_SCOPE_ENTRY, ReaderScope
from dream_memory.app.why_paths import check_path, split_target
from dream_memory.errors import UsageError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime

OTHER_SCOPE_FACT = "(a fact learnt from entries of another scope)"


def check_visible(who: ReaderScope, path: str, root: Path | None) -> str:
    """The memory file ``path`` names, or exit 2 when it is another scope's."""
    rel = check_path(path, root)
    problem = who.problem(rel)
    if problem is not None:
        raise UsageError.naming(
            lambda o: (
                problem,
                f"this reader reads as {who.label()}; give {o('--scope')} or {o('--session-key')} to change it"
                if o("--scope")
                else f"this reader reads as {who.label()}, set when it started; no argument of a call changes it",
            )
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
    root = rt.root if rt.has_workspace() else None
    with _withheld(root, rt.read_settings.excludes if root is not None else frozenset()) as withheld:
        if target is not None and text is None and root is not None:
            parts = split_target(target)
            if parts is not None:
                _refuse_withheld(check_visible(who, parts[0], root), withheld)
        found = why(rt, target, text, visible=lambda rel: who.sees(rel) and not withheld(rel))
    return [hide_other_scopes(item, who) for item in found]


def blame_for(rt: Runtime, who: ReaderScope, path: str, rev: str = "HEAD") -> list[LineWhy]:
    """``dream blame`` as ``who``: another scope's file, or an excluded entity's, refused."""
    if rt.has_workspace():
        with _withheld(rt.root, rt.read_settings.excludes) as withheld:
            _refuse_withheld(check_visible(who, path, rt.root), withheld)
    return [hide_other_scopes(line, who) for line in blame_of(rt, path, rev)]


def why_at_for(
    workspace: Path, who: ReaderScope, path: str, line: int, excludes: frozenset[str] = frozenset()
) -> LineWhy:
    """MCP ``dream_why`` as the server's scope, with its excludes."""
    with _withheld(workspace, excludes) as withheld:
        _refuse_withheld(check_visible(who, path, workspace), withheld)
    return hide_other_scopes(why_at(workspace, path, line), who)


@contextmanager
def _withheld(root: Path | None, excludes: frozenset[str]) -> Iterator[Callable[[str], bool]]:
    """Whether a memory file belongs to an entity DREAM_MEMORY_EXCLUDE names, by the read side's
    own rule (``ReadStore.withholds``): `why` and `blame` withhold what `entity`, `section` and
    `search` withhold."""
    if root is None or not excludes:
        yield lambda rel: False
        return
    from dream_memory.app.read.store import ReadStore

    with ReadStore(root, excludes=excludes) as store:
        yield store.withholds


def _refuse_withheld(rel: str, withheld: Callable[[str], bool]) -> None:
    """Exit 2 when ``rel`` belongs to an excluded entity."""
    if withheld(rel):
        raise UsageError(
            f"{rel} belongs to an entity excluded by DREAM_MEMORY_EXCLUDE; it is not served",
            hint="the exclusion is this reader's configuration (DREAM_MEMORY_EXCLUDE)",
        )
