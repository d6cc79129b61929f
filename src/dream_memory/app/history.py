"""Use cases over history.jsonl: append one entry (``append``) or many at once (``append_many``,
``dream append --jsonl``), and the workspace status (``status``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.adapters import fsutil, workspace
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.locks import current_holder
from dream_memory.core import jsontext, layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.history import HistoryEntry, format_timestamp, parse_timestamp
from dream_memory.core.ports import NoRedaction, Redactor
from dream_memory.core.state import DreamState
from dream_memory.errors import InputError, UsageError

if TYPE_CHECKING:
    # Only the status reads the repository: appending never loads git (dulwich costs ~65 ms a process).
    from dream_memory.adapters.git import GitStore
    from dream_memory.app.runtime import Runtime


def check_entry(text: str, session_key: str | None = None) -> str:
    """The content to store for ``text`` (trailing space trimmed); InputError (exit 2) when
    there is nothing to store. Checked before anything is created or locked."""
    content = text.rstrip()
    if not content.strip():
        raise InputError("nothing to append: the text is empty", hint="pass TEXT, or - to read it from stdin")
    if session_key is not None and not session_key.strip():
        raise InputError.naming(lambda o: (f"{o('--session-key')} must not be empty", None))
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


REPLACED_HISTORY_HINT = "the next dream append, consolidate or run carries them into history.jsonl"


def replaced_history_message(waiting: dict[str, Any]) -> str:
    """One ``replaced_history`` item of the status, in words."""
    cursors = ", ".join(map(str, waiting["cursors"])) or "none"
    return (
        f"{waiting['lines']} line(s) (cursors {cursors}) wait only in {waiting['file']}, "
        "left by a rewrite of history.jsonl that was interrupted (or is still draining them)"
    )


@dataclass(frozen=True)
class WorkspaceStatus:
    """What ``dream status`` shows (docs/reference/commands.md); ``to_json()`` is ``--json``."""

    workspace: str
    exists: bool
    cursor: int  # the last cursor written
    dream_cursor: int  # the cursor Dream trusts (the committed one, app/cursor.py)
    cursor_check: dict[str, Any]  # how it compares with memory/.dream_cursor and why
    # entries after the dream cursor (archived ones above it too, after a --replay), and late
    # entries below it not dreamt yet (core/late_entries.py)
    pending: int
    entries: int
    malformed: int
    repaired: int
    lock: dict[str, Any] | None
    last_dream_commit: dict[str, Any] | None
    dirty: list[str]  # versioned memory files edited since HEAD (never Dream's own bookkeeping)
    held: list[str]
    set_aside: list[str]
    pending_migration: bool
    versioned: bool
    # An interrupted `dream forget` (its journal: the purge's id and start, never the value);
    # it must be run again to finish before Dream runs.
    interrupted_forget: dict[str, Any] | None = None
    # Lines a killed rewrite of history.jsonl left only in memory/.history.replaced.<offset>
    # (another writer appended them while it ran): the next writing command carries them.
    replaced_history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def workspace_status(
    root: Path, history: HistoryLog, git: GitStore | None, *, follow_external: bool = False
) -> WorkspaceStatus:
    """Reads only, never migrates or creates (``dream doctor`` reuses it)."""
    from dream_memory.app.cursor import dream_cursor_check

    scan = history.scan()
    counter = history.read_counter()
    check = dream_cursor_check(history, git, follow_external=follow_external)
    dream_cursor = check.value
    holder = current_holder(root)
    state = read_state(root)
    return WorkspaceStatus(
        workspace=str(root),
        exists=workspace.is_folder(root),
        cursor=max(counter or 0, scan.max_cursor),
        dream_cursor=dream_cursor,
        cursor_check=check.to_json(),
        pending=len(history.pending(dream_cursor, state.late_dreamt, scan)),
        entries=len(scan.entries),
        malformed=scan.malformed,
        repaired=sum(1 for p in scan.problems if p.kind == "repaired"),
        lock=holder.to_json() if holder else None,
        last_dream_commit=last_dream_commit(git),
        dirty=git.dirty() if git is not None and git.head() is not None else [],
        held=[h.id for h in state.held] + [c.id for c in state.changes],  # batches, then changes
        set_aside=[f"{s.cursor_from}..{s.cursor_to}" for s in state.set_aside],
        pending_migration=history.legacy_pending(),
        versioned=git is not None,
        interrupted_forget=interrupted_forget(root),
        replaced_history=[w.to_json() for w in history.waiting_replaced()],
    )


def interrupted_forget(root: Path) -> dict[str, Any] | None:
    """The journal of a `dream forget` that was stopped before it finished, or None (no journal,
    or the forget that wrote it still holds the Dream lock: it is running, not interrupted)."""
    from dream_memory.adapters import forgotten

    journal = forgotten.read_journal(root)
    if journal is None:
        return None
    holder = current_holder(root)
    if holder is not None and holder.pid is not None and holder.pid == journal.get("pid"):
        return None
    return {"id": journal.get("id"), "started": journal.get("started")}


def forget_unfinished_message(journal: dict[str, Any]) -> str:
    return (
        f"an interrupted purge (dream forget {journal.get('id') or 'unnamed'}, started "
        f"{journal.get('started') or 'at an unknown time'}) is unfinished"
    )


FORGET_UNFINISHED_HINT = (
    "run that same dream forget again to finish it (the journal names it by hash only; if it cannot be read, "
    f"remove {layout.FORGET_JOURNAL} and run the forget again); until then its value may still be in some files "
    "and in new entries"
)


def refuse_while_a_purge_is_unfinished(root: Path, command: str) -> None:
    """The one check every command that commits makes first (under the Dream lock, where it takes
    one): a purge stopped half way left some files without the value and others with it, and a
    commit now would save that state as hand edits (docs/forget.md). UsageError, exit 2."""
    journal = interrupted_forget(root)
    if journal is not None:
        raise UsageError(
            f"{forget_unfinished_message(journal)}; {command} commits nothing until it is finished",
            hint=FORGET_UNFINISHED_HINT,
        )


# --- many entries at once (dream append --jsonl) ---------------------------------------------------

JSONL_KEYS = ("content", "session_key", "timestamp")


@dataclass(frozen=True)
class NewEntry:
    """One entry to append: its text, and the session and time it came from when known."""

    content: str
    session_key: str | None = None
    timestamp: str | None = None  # None: now


def _bad(where: str, problem: str) -> InputError:
    return InputError(
        f"{where}: {problem}; nothing was appended",
        hint='one JSON object per entry: {"content": "...", "session_key": "...", "timestamp": "YYYY-MM-DD HH:MM"}',
    )


def entry_from(obj: object, where: str) -> NewEntry:
    """One entry from a JSON-lines object (or a bare string: its content); InputError naming
    ``where`` ("line 3 of the input") and the problem. A timestamp is stored as history.jsonl
    writes them (YYYY-MM-DD HH:MM, in UTC when the input names its offset)."""
    if isinstance(obj, str):
        obj = {"content": obj}
    if not isinstance(obj, Mapping):
        raise _bad(where, f"a JSON {type(obj).__name__} is not an object")
    unknown = sorted(str(k) for k in obj if k not in JSONL_KEYS)
    if unknown:
        raise _bad(where, f"unknown key {unknown[0]!r} (known: {', '.join(JSONL_KEYS)})")
    content, key, when = obj.get("content"), obj.get("session_key"), obj.get("timestamp")
    if not isinstance(content, str) or not content.strip():
        raise _bad(where, '"content" must be a non-empty string')
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise _bad(where, '"session_key" must be a non-empty string (or left out)')
    stamp = None
    if when is not None:
        moment = parse_timestamp(when) if isinstance(when, str) else None
        if moment is None:
            raise _bad(where, '"timestamp" must be YYYY-MM-DD HH:MM or ISO 8601 (or left out)')
        if moment.utcoffset() is not None:
            # Appends made now store UTC: an offset is converted, not dropped. A naive time is
            # taken as given (it may already be UTC; nothing says otherwise).
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        stamp = format_timestamp(moment)
    return NewEntry(content.rstrip(), key, stamp)


def parse_jsonl(text: str) -> list[NewEntry]:
    """The entries of a JSON-lines text, every line checked before any is stored: InputError
    (exit 2) naming the first bad line (1-based) and its problem. Blank lines are skipped."""
    entries: list[NewEntry] = []
    for line_no, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        where = f"line {line_no} of the input"
        try:
            obj = jsontext.loads(line)
        except ValueError as exc:
            raise _bad(where, f"not JSON ({exc})") from exc
        if isinstance(obj, str):
            raise _bad(where, "a JSON string is not an object")
        entries.append(entry_from(obj, where))
    return entries


@dataclass(frozen=True)
class AppendedMany:
    entries: list[HistoryEntry]
    redactions: dict[str, int] = field(default_factory=dict)  # summed over the entries, per kind

    def to_json(self) -> dict[str, Any]:
        return {"cursors": [e.cursor for e in self.entries], "redactions": self.redactions}


def append_entries(history: HistoryLog, items: Iterable[NewEntry], *, redactor: Redactor | None = None) -> AppendedMany:
    """Every entry redacted exactly like a single append, then all of them in one write under one
    hold of the history lock (consecutive cursors; all or none)."""
    redactor = redactor or NoRedaction()
    rows: list[tuple[str, str | None, str | None]] = []
    counts: dict[str, int] = {}
    for item in items:
        content, found = redactor.redact(check_entry(item.content, item.session_key))
        rows.append((content, item.session_key, item.timestamp))
        for kind, n in found.items():
            counts[kind] = counts.get(kind, 0) + n
    return AppendedMany(history.append_many(rows), counts)


# --- the services (every face calls these) --------------------------------------------------------


@dataclass(frozen=True)
class AppendRequest:
    text: str
    session_key: str | None = None


def append(rt: Runtime, request: AppendRequest) -> Appended:
    """``append``: the entry is checked first (empty text is exit 2 before any file is created),
    then the workspace (which must exist) is made ready and the entry written under the history lock."""
    check_entry(request.text, request.session_key)
    rt.require_workspace()
    workspace.require_usable_history(rt.root, write=True)  # exit 2 naming the path, before any change
    rt.ensure_workspace()
    return append_entry(rt.history, request.text, session_key=request.session_key, redactor=rt.redactor())


def append_many(rt: Runtime, entries: Iterable[NewEntry | Mapping[str, Any] | str]) -> AppendedMany:
    """``append --jsonl`` and ``Workspace.append_many``: every entry checked before anything is
    touched (the first bad one is exit 2, naming it), then all appended in one locked write."""
    if isinstance(entries, str | bytes | Mapping):
        # Iterated, a string is its characters and a mapping its keys: each became an entry.
        raise InputError(
            f"entries must be a list of entries, not one {type(entries).__name__}",
            hint="pass a list (append_many([...])), or use append() for one entry",
        )
    items = [e if isinstance(e, NewEntry) else entry_from(e, f"entry {i}") for i, e in enumerate(entries, start=1)]
    if not items:
        raise InputError("nothing to append: no entries given", hint="give one JSON object per line")
    for item in items:
        check_entry(item.content, item.session_key)
    rt.require_workspace()
    workspace.require_usable_history(rt.root, write=True)
    rt.ensure_workspace()
    return append_entries(rt.history, items, redactor=rt.redactor())


def status(rt: Runtime) -> WorkspaceStatus:
    """``status``: what ``dream status`` shows; reads only, and only an existing workspace."""
    rt.require_workspace()
    workspace.require_usable_history(rt.root, write=False)
    git = rt.git(create=False)
    try:
        return workspace_status(rt.root, rt.history, git, follow_external=rt.settings.dream.follow_external_cursor)
    finally:
        if git is not None:
            git.close()
