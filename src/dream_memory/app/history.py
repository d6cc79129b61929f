"""Use cases over history.jsonl: append one entry (``append``), and the workspace status (``status``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.adapters import fsutil, workspace
from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.locks import current_holder
from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry
from dream_memory.core.ports import NoRedaction, Redactor
from dream_memory.core.state import DreamState
from dream_memory.errors import InputError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime


def check_entry(text: str, session_key: str | None = None) -> str:
    """The content to store for ``text`` (trailing space trimmed); InputError (exit 2) when
    there is nothing to store. Checked before anything is created or locked."""
    content = text.rstrip()
    if not content.strip():
        raise InputError("nothing to append: the text is empty", hint="pass TEXT, or - to read it from stdin")
    if session_key is not None and not session_key.strip():
        raise InputError("--session-key must not be empty")
    return content


@dataclass(frozen=True)
class Appended:
    entry: HistoryEntry
    redactions: dict[str, int]  # secrets removed before the entry was written, per kind


def append_entry(
    history: HistoryLog, text: str, *, session_key: str | None = None, redactor: Redactor | None = None
) -> Appended:
    """Append one entry under the history lock: the text as given (trailing space trimmed), with
    anything secret-shaped replaced by ``[REDACTED:<kind>]`` before it reaches the disk."""
    content, counts = (redactor or NoRedaction()).redact(check_entry(text, session_key))
    return Appended(history.append(content, session_key=session_key), counts)


def last_dream_commit(git: GitStore | None) -> dict[str, Any] | None:
    if git is None or git.head() is None:
        return None
    for commit in git.first_parent_chain():
        message = commit.message.decode("utf-8", errors="replace")
        if message.startswith("dream:"):
            info = git.info(commit.id.decode("ascii"), with_files=False)
            return {"commit": info.sha, "subject": info.subject, "time": info.time}
    return None


def read_state(root: Path) -> DreamState:
    return DreamState.from_json(fsutil.read_text(root / layout.DREAM_STATE))


def workspace_status(
    root: Path, history: HistoryLog, git: GitStore | None, *, follow_external: bool = False
) -> dict[str, Any]:
    """What ``dream status`` shows (docs/reference/commands.md); reads only, never migrates or creates.

    ``dream_cursor`` is the cursor Dream trusts (the committed one, app/cursor.py) and
    ``cursor_check`` says how it compares with the file and why (``dream doctor`` reuses it)."""
    from dream_memory.app.cursor import dream_cursor_check

    scan = history.scan()
    counter = history.read_counter()
    check = dream_cursor_check(history, git, follow_external=follow_external)
    dream_cursor = check.value
    holder = current_holder(root)
    state = read_state(root)
    return {
        "workspace": str(root),
        "exists": workspace.is_folder(root),
        "cursor": max(counter or 0, scan.max_cursor),
        "dream_cursor": dream_cursor,
        "cursor_check": check.to_json(),
        # entries_after also counts archived entries above the cursor (after a --replay)
        "pending": len(history.entries_after(dream_cursor, scan)),
        "entries": len(scan.entries),
        "malformed": scan.malformed,
        "repaired": sum(1 for p in scan.problems if p.kind == "repaired"),
        "lock": holder.to_json() if holder else None,
        "last_dream_commit": last_dream_commit(git),
        "dirty": git.dirty() if git is not None and git.head() is not None else [],
        "held": [h.id for h in state.held] + [c.id for c in state.changes],  # batches, then changes
        "set_aside": [f"{s.cursor_from}..{s.cursor_to}" for s in state.set_aside],
        "pending_migration": history.legacy_pending(),
        "versioned": git is not None,
    }


# --- the services (every face calls these) --------------------------------------------------------


@dataclass(frozen=True)
class AppendRequest:
    text: str
    session_key: str | None = None


def append(rt: Runtime, request: AppendRequest) -> Appended:
    """``append``: the entry is checked first (empty text is exit 2 before any file is created),
    then the workspace is made ready and the entry written under the history lock."""
    check_entry(request.text, request.session_key)
    rt.ensure_workspace()
    return append_entry(rt.history, request.text, session_key=request.session_key, redactor=rt.redactor())


def status(rt: Runtime) -> dict[str, Any]:
    """``status``: the mapping ``dream status --json`` prints; reads only."""
    git = rt.git(create=False) if rt.has_workspace() else None
    try:
        return workspace_status(rt.root, rt.history, git, follow_external=rt.settings.dream.follow_external_cursor)
    finally:
        if git is not None:
            git.close()
