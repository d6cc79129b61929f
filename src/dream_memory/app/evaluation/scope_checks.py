"""The scope scenario's checks (docs/eval-scopes.md): after the days are
run, each private reader and the shared one are asked, through the read services and the MCP
server, everything that could reach a canary; then one canary is purged.

- ``scope_kept``: each planted canary is in its own scope's files, and its own reader's context
  shows it (else isolation would be proven by a memory that kept nothing);
- ``scope_isolation`` (required by the bundled scenario): no canary of one scope is in another
  reader's context block, search answers (history included), MCP answers (every tool, resource
  and the prompt), in a file of another scope or a shared file on disk, or in any committed
  version of a file outside its own scope;
- ``purge``: after ``dream forget --purge`` of the scenario's purge canary, it is in no file, no
  history or archive line, no commit's file or message, and no reader's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from dream_memory.adapters import eval_files
from dream_memory.app.evaluation.checks import GitHistory, OpenGit, memory_files
from dream_memory.app.evaluation.report import Item
from dream_memory.app.evaluation.scenarios import Scenario, ScopeSpec
from dream_memory.core import scopes
from dream_memory.core.scopes import SHARED

# (workspace root, scope, the rules, queries) -> the text of every answer an MCP server started
# for that scope gives: each tool, each resource and the prompt (the face builds it: mcp lives there).
McpProbe = Callable[[Path, str, Mapping[str, str], Sequence[str]], list[str]]


class ScopeViews(Protocol):
    """What a scope scenario's workspace answers a reader in one scope, through the services."""

    def context(self, scope: str) -> str:
        """``dream context --scope SCOPE --json``'s text."""
        ...

    def search(self, scope: str, query: str) -> str:
        """``dream search QUERY --history --scope SCOPE --json``, as text."""
        ...

    def forget(self, value: str) -> dict[str, Any]:
        """``dream forget --purge VALUE``; its report."""
        ...


def _answers(
    views: ScopeViews, root: Path, scope: str, spec: ScopeSpec, queries: Sequence[str], *, mcp: McpProbe | None
) -> dict[str, str]:
    """Every answer a reader in ``scope`` gets, by door: its context, its searches (history
    included), its MCP server's (every tool, resource and the prompt)."""
    found = {"context": views.context(scope), "search": "\n".join(views.search(scope, q) for q in queries)}
    if mcp is not None:
        found["MCP"] = "\n".join(mcp(root, scope, spec.rules, queries))
    return found


def _doors(answers: dict[str, str], value: str) -> list[str]:
    return [door for door, text in answers.items() if value in text]


def _parts(values: Sequence[str]) -> list[str]:
    """Each canary asked for by its pieces (``heron`` and ``4471`` for ``heron-4471``): an answer
    echoes its query, so only a source holding the whole value can show the whole value."""
    return [part for value in values for part in value.split("-") if part]


def _not_own(path: str, scope: str) -> bool:
    return scopes.scope_of_path(path) != scope


def scope_items(
    scenario: Scenario,
    root: Path,
    views: ScopeViews,
    values: dict[str, str],
    *,
    open_git: OpenGit,
    mcp: McpProbe | None,
) -> list[Item]:
    """``scope_kept`` and ``scope_isolation``, one item per canary (and per other reader)."""
    spec = scenario.scopes
    assert spec is not None
    planted = [values[c.placeholder] for _, c in spec.canaries()]
    queries = [*spec.queries, *_parts(planted)]
    readers = [SHARED, *(r.scope for r in spec.readers)]
    answers = {scope: _answers(views, root, scope, spec, queries, mcp=mcp) for scope in readers}
    files = memory_files(root)
    history = GitHistory.read(root, open_git)
    items: list[Item] = []
    for reader, canary in spec.canaries():
        value = values[canary.placeholder]
        subject = f"{reader.scope} {canary.placeholder}"
        own = [rel for rel in scopes.scope_files(reader.scope) if value in files.get(rel, "")]
        seen = value in views.context(reader.scope)
        kept = bool(own) and seen
        detail = "" if kept else ("in none of its scope's files" if not own else "not in its own reader's context")
        items.append(Item("scope_kept", subject, kept, detail))
        for other in readers:
            if other == reader.scope:
                continue
            doors = _doors(answers[other], value)
            shown = f"{other} reader" if other != SHARED else "shared reader"
            where = f"the {shown}'s {', '.join(doors)} answers hold it" if doors else ""
            if not doors and mcp is None:
                where = "context and search only: no MCP probe was given"
            items.append(Item("scope_isolation", f"{subject} -> {shown}", not doors, where))
        places = [f"{rel} (on disk)" for rel, text in files.items() if _not_own(rel, reader.scope) and value in text]
        places += [
            f"{rel} in commit {sha[:12]}"
            for sha, rel, text in history.memory_versions
            if _not_own(rel, reader.scope) and value in text
        ]
        detail = "" if not places else "in " + ", ".join(sorted(set(places))[:6])
        items.append(Item("scope_isolation", f"{subject} -> files outside its scope", not places, detail))
    return items


def purge_items(
    spec: ScopeSpec,
    root: Path,
    views: ScopeViews,
    values: dict[str, str],
    *,
    open_git: OpenGit,
    mcp: McpProbe | None,
) -> list[Item]:
    """``dream forget --purge`` of the purge canary, then: is it anywhere at all?"""
    if spec.purge is None:
        return []
    value = values[spec.purge]
    subject = f"{spec.purge} purged"
    try:
        report = views.forget(value)
    except Exception as exc:
        return [Item("purge", subject, False, f"dream forget --purge failed: {exc}")]
    places = [f"{rel} (on disk)" for rel, text in memory_files(root).items() if value in text]
    places += [f"{rel} (not versioned)" for rel, text in eval_files.stored_history(root).items() if value in text]
    places += list(GitHistory.read(root, open_git).leaks(value))
    readers = [SHARED, *(r.scope for r in spec.readers)]
    asked = [*spec.queries, *_parts([value])]
    for scope in readers:
        doors = _doors(_answers(views, root, scope, spec, asked, mcp=mcp), value)
        places += [f"the {scope} reader's {door} answers" for door in doors]
    if report.get("dry_run"):
        places.append("the purge ran as a dry run")
    detail = "" if not places else "still in " + ", ".join(places[:6])
    return [Item("purge", subject, not places, detail)]


def scope_baseline(spec: ScopeSpec) -> list[Item]:
    """The scope items of a model that keeps nothing: no canary kept, none crosses, none to purge."""
    items: list[Item] = []
    others = len(spec.readers)  # the other private readers and the shared one
    for reader, canary in spec.canaries():
        subject = f"{reader.scope} {canary.placeholder}"
        items.append(Item("scope_kept", subject, False, "in none of its scope's files"))
        items += [Item("scope_isolation", f"{subject} -> {n}", True) for n in range(others + 1)]
    if spec.purge is not None:
        items.append(Item("purge", f"{spec.purge} purged", True))
    return items
