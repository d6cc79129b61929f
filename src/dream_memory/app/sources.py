"""The read side's ``--sources`` (docs/provenance.md): ``dream entity/section --sources`` (each
shown line's origin) and ``dream context --sources`` ("(learned from ... on ...)" after Dream's
lines), on top of ``app.provenance``'s blame of the committed file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import GitStore
from dream_memory.app.provenance import LineWhy, blame_file, workspace_git
from dream_memory.app.read.scoping import OTHER_SCOPE_ENTRY, ReaderScope
from dream_memory.app.why_scope import hide_other_scopes
from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.provenance import KIND_DREAM
from dream_memory.errors import NotFound

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime


def line_sources(
    git: GitStore | None, root: Path, rel: str, lines: Sequence[str], who: ReaderScope | None = None
) -> list[LineWhy | None]:
    """For each of ``lines`` (a file as it is on disk now), the committed line it is, explained;
    None for a line not committed yet (or no repository). Lines are matched by text in order, so
    a file edited since its last commit keeps the sources of the lines it still holds. Entries
    of scopes ``who`` cannot see are stripped of their content and session (``app.why_scope``)."""
    if git is None or git.head() is None or not layout.is_content(rel):
        return [None] * len(lines)
    try:
        committed = blame_file(git, root, rel)
    except NotFound:
        return [None] * len(lines)
    if who is not None:
        committed = [hide_other_scopes(why, who) for why in committed]
    by_text: dict[str, list[LineWhy]] = {}
    for why in committed:
        by_text.setdefault(why.text, []).append(why)
    found: list[LineWhy | None] = []
    for line in lines:
        queue = by_text.get(line)
        found.append(queue.pop(0) if queue else None)
    return found


def learned(why: LineWhy | None) -> str | None:
    """ "learned from session telegram:42 on 2026-04-03 (entry 12)" for a Dream line with sources."""
    if why is None or why.kind != KIND_DREAM or not why.sources:
        return None
    first = why.sources[0]
    if first.where == OTHER_SCOPE_ENTRY:
        return f"learned from {OTHER_SCOPE_ENTRY}"
    where = f"session {first.session_key}" if first.session_key else "history"
    when = (first.timestamp or why.time)[:10]
    cursors = ", ".join(str(s.cursor) for s in why.sources)
    return f"learned from {where} on {when} (entr{'ies' if len(why.sources) > 1 else 'y'} {cursors})"


def annotate(git: GitStore | None, root: Path, rel: str, text: str, who: ReaderScope | None = None) -> str:
    """``text`` with "(learned from ... on ...)" after each Dream line that has sources."""
    lines = split_lines(text)
    out: list[str] = []
    for line, why in zip(lines, line_sources(git, root, rel, lines, who), strict=True):
        note = learned(why)
        out.append(f"{line}  ({note})" if note else line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def page_sources(
    rt: Runtime, rel: str, first_line: int, last_line: int, who: ReaderScope | None = None
) -> list[dict[str, Any]]:
    """``dream entity/section --sources``: the origin (kind, commit, entries) of each line of the
    page, lines ``first_line..last_line`` of the workspace's file ``rel``."""
    git, root = workspace_git(rt)
    try:
        text = fsutil.read_text(root / rel) or ""
        lines = split_lines(text)[first_line - 1 : last_line] if last_line >= first_line else []
        found = line_sources(git, root, rel, lines, who)
    finally:
        if git is not None:
            git.close()
    rows: list[dict[str, Any]] = []
    for offset, why in enumerate(found):
        row: dict[str, Any] = {
            "line": first_line + offset,
            "kind": None,
            "commit": None,
            "entries": [],
            "learned": None,
        }
        if why is not None:
            row.update(
                kind=why.kind,
                commit=why.commit,
                entries=[s.cursor for s in why.sources],
                learned=learned(why),
            )
        rows.append(row)
    return rows
