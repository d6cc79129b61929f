"""Where every memory line comes from (docs/provenance.md): written as a batch lands, read by
``dream why``, ``dream blame``, the read side's ``--sources`` and MCP ``dream_why``.

Writing (``app.dream.provenance``, as a batch lands): the batch's lines are tied to its facts,
the commit body lists the facts with their cursors and what was removed and why, and a JSON
record goes in a git note on ``refs/notes/dream`` attached to the batch's commit: the facts,
each line and removal with its facts, and a copy of every cited history entry.

Reading: ``git blame`` (``adapters.git.blame``) names the commit that last wrote a line; its note
names the facts and cursors; each cursor is looked up in memory/history.jsonl, then in
memory/archive/ (compaction moved it), then in the note's own copy (a clone without the history).
A commit with no note (a squash merge, a batch from before provenance) falls back to the facts
its commit body lists, matched to the line by key words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import GitStore, open_readonly
from dream_memory.adapters.git.blame import LineOrigin, blame
from dream_memory.adapters.git.notes import NOTES_REF, read_note
from dream_memory.adapters.workspace import archive_paths
from dream_memory.app.why_paths import check_committed, check_path, disk_lines, split_target, unsaved
from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.facts import Fact
from dream_memory.core.history import HistoryEntry, parse_lines, split_physical_lines
from dream_memory.core.provenance import BODY_FACT, KIND_DREAM, KIND_INIT, KIND_MANUAL, key_words
from dream_memory.errors import NotFound, UsageError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime

# --- reading --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceEntry:
    cursor: int
    timestamp: str | None
    session_key: str | None
    content: str | None
    where: str  # memory/history.jsonl, memory/archive/<file>, "the provenance note", or "not found"
    session_file: str | None = None  # the session file `dream consolidate` read it from
    messages: str | None = None  # that file's message range, when recorded

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "timestamp": self.timestamp,
            "session_key": self.session_key,
            "content": self.content,
            "where": self.where,
            "session_file": self.session_file,
            "messages": self.messages,
        }


@dataclass(frozen=True)
class LineWhy:
    path: str
    line: int
    text: str
    commit: str
    subject: str
    author: str
    time: str  # ISO 8601, UTC (+00:00)
    kind: str  # dream | manual | init | other
    model: str | None = None
    facts: tuple[dict[str, Any], ...] = ()
    sources: tuple[SourceEntry, ...] = ()
    note: str | None = None  # why no source is shown, when none is
    warning: str | None = None  # the file on disk differs from the one explained

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "commit": self.commit,
            "subject": self.subject,
            "author": self.author,
            "time": self.time,
            "kind": self.kind,
            "model": self.model,
            "facts": list(self.facts),
            "sources": [s.to_json() for s in self.sources],
            "note": self.note,
            "warning": self.warning,
        }

    def to_text(self) -> str:
        """The human view (``dream why``, MCP ``dream_why``): entry contents cut at 400 characters."""
        out = [
            # A CRLF line's "\r" is shown as blame's text output shows it: not at all (a literal
            # \x0d otherwise, through the terminal guard); --json keeps the exact text.
            f"{self.path}:{self.line}  {self.text.removesuffix(chr(13))}",
            f"commit  {self.commit[:10]}  {self.subject}",
            f"when    {self.time}",
            f"kind    {self.kind}  (author {self.author})",
        ]
        if self.model:
            out.append(f"model   {self.model}")
        out += [_fact_line(fact) for fact in self.facts]
        for entry in self.sources:
            out += _source_lines(entry)
        if self.note:
            out.append(f"note    {self.note}")
        return "\n".join(out) + "\n"

    @property
    def has_source(self) -> bool:
        return self.kind != KIND_DREAM or bool(self.sources)


_CONTENT_SHOWN = 400  # characters of an entry's content in the text view (JSON has it whole)


def _fact_line(fact: dict[str, Any]) -> str:
    name = f"{fact.get('name')}: " if fact.get("name") else ""
    sources = fact.get("sources") or []
    cited = ", ".join(str(c) for c in sources) if isinstance(sources, list) and sources else "unknown"
    return f"fact {fact.get('id')}  [{fact.get('tag')}] {name}{fact.get('text')}  (entries: {cited})"


def _source_lines(entry: SourceEntry) -> list[str]:
    meta = [entry.timestamp or "no timestamp"]
    if entry.session_key:
        meta.append(f"session {entry.session_key}")
    lines = [f"source  entry {entry.cursor}  {', '.join(meta)}  ({entry.where})"]
    if entry.session_file:
        lines.append(f"        from {entry.session_file}" + (f", messages {entry.messages}" if entry.messages else ""))
    content = (entry.content or "").strip()
    if content:
        shown = content if len(content) <= _CONTENT_SHOWN else content[: _CONTENT_SHOWN - 3] + "..."
        lines += [f"        | {line}" for line in split_lines(shown)]
    return lines


@dataclass
class _Resolver:
    """Cursors to entries: history.jsonl, then the archive, then a note's copy; notes cached."""

    git: GitStore
    root: Path
    entries: dict[int, tuple[HistoryEntry, str]] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)  # session key -> session file
    origins: dict[int, tuple[str, str]] = field(default_factory=dict)  # cursor -> (session file, messages)
    notes: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    loaded: bool = False

    def _load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        archive = sorted(archive_paths(self.root))
        for where in [*archive, layout.HISTORY]:
            text = fsutil.read_text(self.root / where)
            if text is None:
                continue
            for parsed in parse_lines(split_physical_lines(text)):
                for entry in parsed.entries:
                    self.entries.setdefault(entry.cursor, (entry, where))
        self.sessions, self.origins = _session_files(self.root)

    def _from_session(self, cursor: int, key: str | None) -> tuple[str | None, str | None]:
        """The session file (and the messages, when recorded) an entry `dream consolidate` wrote
        comes from; the session key's file alone for entries from before the range was kept."""
        if cursor in self.origins:
            return self.origins[cursor]
        return self.sessions.get(key or ""), None

    def note(self, sha: str) -> dict[str, Any] | None:
        if sha not in self.notes:
            raw = read_note(self.git, sha)
            try:
                data = json.loads(raw) if raw is not None else None
            except ValueError:
                data = None
            self.notes[sha] = data if isinstance(data, dict) else None
        return self.notes[sha]

    def entry(self, cursor: int, note: dict[str, Any] | None) -> SourceEntry:
        self._load()
        found = self.entries.get(cursor)
        if found is not None:
            entry, where = found
            return SourceEntry(
                cursor,
                entry.timestamp,
                entry.session_key,
                entry.content,
                where,
                *self._from_session(cursor, entry.session_key),
            )
        copy = next((e for e in (note or {}).get("entries", []) if e.get("cursor") == cursor), None)
        if copy is not None:
            key = copy.get("session_key")
            return SourceEntry(
                cursor,
                copy.get("timestamp"),
                key,
                copy.get("content"),
                "the provenance note (no longer in memory/history.jsonl or memory/archive/)",
                *self._from_session(cursor, key),
            )
        return SourceEntry(cursor, None, None, None, "not found")


def _session_files(root: Path) -> tuple[dict[str, str], dict[int, tuple[str, str]]]:
    """From memory/.consolidation.json: session key -> the session file `dream consolidate` read
    it from, and cursor -> (session file, messages "A..B") for the entries it appended."""
    from dream_memory.core.consolidation import EntryOrigin

    text = fsutil.read_text(root / layout.CONSOLIDATION)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}, {}
    sessions = data.get("sessions") if isinstance(data, dict) else None
    files = (
        {str(v.get("key")): str(path) for path, v in sessions.items() if isinstance(v, dict) and v.get("key")}
        if isinstance(sessions, dict)
        else {}
    )
    entries = data.get("entries") if isinstance(data, dict) else None
    origins: dict[int, tuple[str, str]] = {}
    for cursor, item in entries.items() if isinstance(entries, dict) else ():
        origin = EntryOrigin.from_json(item)
        if origin is not None and str(cursor).isdigit():
            origins[int(cursor)] = (origin.session, origin.messages)
    return files, origins


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _body_facts(message: str) -> list[dict[str, Any]]:
    """The facts a commit body lists (``  3. [USER] text  <- 12, 14``)."""
    from dream_memory.core.facts import parse_facts

    found: list[dict[str, Any]] = []
    for line in split_lines(message):
        match = BODY_FACT.match(line)
        if match is None:
            continue
        parsed = parse_facts(match["fact"]).facts
        if not parsed:
            continue
        fact = parsed[0]
        sources = [] if match["sources"] == "unknown" else [int(x) for x in re.findall(r"\d+", match["sources"])]
        found.append(
            {"id": int(match["id"]), "tag": fact.tag, "name": fact.name, "text": fact.text, "sources": sources}
        )
    return found


def _match_facts(text: str, facts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    words = key_words(text)
    scored = [(len(words & key_words(f"{f.get('name') or ''} {f.get('text', '')}")), f) for f in facts]
    top = max((s for s, _ in scored), default=0)
    return [f for s, f in scored if s == top and top > 0]


def _explain(resolver: _Resolver, path: str, origin: LineOrigin) -> LineWhy:
    why = LineWhy(
        path=path,
        line=origin.line,
        text=origin.text,
        commit=origin.commit,
        subject=origin.subject,
        author=origin.author,
        time=_iso(origin.timestamp),
        kind=origin.kind,
    )
    if origin.kind == KIND_INIT:
        return replace(why, note="a template line, from the workspace's first commit (memory: init)")
    if origin.kind == KIND_MANUAL:
        return replace(why, note=f"written by hand ({origin.subject}), by {origin.author}")
    if origin.kind != KIND_DREAM:
        return replace(why, note=f"written by {origin.subject!r}, not learnt from history")
    note = resolver.note(origin.commit)
    if note is not None:
        model, facts = note.get("model"), _facts_in_note(note, path, origin)
        recorded = True
    else:
        message = resolver.git.info(origin.commit, with_files=False).message
        model = next(
            (ln.partition(":")[2].strip() for ln in split_lines(message) if ln.startswith("Dream-Model:")), None
        )
        listed = _body_facts(message)
        facts, recorded = _match_facts(origin.text, listed), bool(listed)
    cursors = list(dict.fromkeys(c for f in facts for c in f.get("sources", [])))
    sources = tuple(resolver.entry(c, note) for c in cursors)
    reason = None
    if not recorded:
        reason = "its commit records no provenance (made before provenance, or its note did not travel with it)"
    elif not facts:
        reason = "no fact of its batch matches this line"
    elif not sources:
        reason = "its fact's source is unknown: the model cited no entry of its batch"
    return replace(why, model=model, facts=tuple(facts), sources=sources, note=reason)


def _facts_in_note(note: dict[str, Any], path: str, origin: LineOrigin) -> list[dict[str, Any]]:
    """The facts the note ties to this line (the row with its text nearest its line number), or
    those sharing its key words when the note has no row for it."""
    by_id = {f.get("id"): f for f in note.get("facts", []) if isinstance(f, dict)}
    rows = [ln for ln in note.get("lines", []) if ln.get("path") == path and ln.get("text") == origin.text]
    if not rows:
        return _match_facts(origin.text, list(by_id.values()))
    rows.sort(key=lambda ln: abs(int(ln.get("line", 0)) - origin.line))
    return [by_id[i] for i in rows[0].get("facts", []) if i in by_id]


def _open(git: GitStore | None) -> GitStore:
    if git is None or git.head() is None:
        raise UsageError(
            "this workspace has no memory versions yet, so no line has a recorded origin",
            hint="`dream init` makes the first commit; `dream run` the next ones",
        )
    return git


def blame_file(git: GitStore | None, root: Path, path: str, rev: str = "HEAD") -> list[LineWhy]:
    """Every line of ``path`` at ``rev`` with its commit and sources; each carries a warning when
    ``rev`` is HEAD and the file on disk differs from it."""
    store = _open(git)
    rel = check_path(path, root)
    check_committed(store, root, rel, rev)
    resolver = _Resolver(store, root)
    origins = blame(store, rel, rev)
    disk = disk_lines(root, rel) if rev == "HEAD" else None
    warning = unsaved(rel) if disk is not None and disk != [o.text for o in origins] else None
    return [replace(_explain(resolver, rel, origin), warning=warning) for origin in origins]


def why_at(workspace: Path, path: str, line: int) -> LineWhy:
    """``why_line`` on the repository versioning ``workspace``, opened read-only (MCP ``dream_why``)."""
    git = open_readonly(workspace)
    try:
        return why_line(git, workspace, path, line)
    finally:
        if git is not None:
            git.close()


def why_line(git: GitStore | None, root: Path, path: str, line: int) -> LineWhy:
    """One line of ``path`` as committed at HEAD. ``line`` counts lines of the file on disk: when
    that differs from HEAD's, it is mapped through the uncommitted edits (with a warning), and a
    line written since is refused as not committed yet."""
    store = _open(git)
    rel = check_path(path, root)
    check_committed(store, root, rel, "HEAD")
    origins = blame(store, rel)
    committed = [o.text for o in origins]
    disk = disk_lines(root, rel)
    warning = None
    if disk is not None and disk != committed:
        import difflib

        if not 1 <= line <= len(disk):
            raise UsageError(f"{rel} has {len(disk)} lines on disk; there is no line {line}")
        mapped = None
        for a, b, size in difflib.SequenceMatcher(None, committed, disk, autojunk=False).get_matching_blocks():
            if b <= line - 1 < b + size:
                mapped = a + (line - 1 - b) + 1
                break
        if mapped is None:
            raise UsageError(
                f"line {line} of {rel} is not committed yet: {rel} has uncommitted edits on disk",
                hint="the next dream run commits it (or commit it yourself); then `dream why` explains it",
            )
        warning = f"{rel} has uncommitted edits on disk; line {line} there is line {mapped} as committed"
        line = mapped
    elif not 1 <= line <= len(origins):
        raise UsageError(
            f"{rel} has {len(origins)} lines as committed; there is no line {line}",
            hint="a line written since is committed by the next dream run",
        )
    return replace(_explain(_Resolver(store, root), rel, origins[line - 1]), warning=warning)


def why_text(git: GitStore | None, root: Path, text: str, paths: Iterable[str]) -> list[LineWhy]:
    """Every committed line of the memory files holding ``text`` (case and spacing ignored)."""
    store = _open(git)
    wanted = " ".join(text.casefold().split())
    if not wanted:
        raise UsageError("--text needs some text to look for")
    resolver = _Resolver(store, root)
    found: list[LineWhy] = []
    head = store.head()
    assert head is not None
    committed = set(store.files_at(head))
    for rel in paths:
        if rel not in committed:
            continue
        data = store.read_at(head, rel)
        if data is None or wanted not in " ".join(data.decode("utf-8", "replace").casefold().split()):
            continue
        found += [
            _explain(resolver, rel, o) for o in blame(store, rel) if wanted in " ".join(o.text.casefold().split())
        ]
    if not found:
        raise NotFound(
            f"no committed memory line holds {text!r}",
            hint="`dream why` reads what is committed: a line written since is committed by the next dream run",
        )
    return found


def facts_of_commit(git: GitStore, sha: str) -> list[Fact]:
    """The facts a Dream commit's note (or body) records, as facts."""
    note = _Resolver(git, git.workspace).note(sha)
    rows = note.get("facts", []) if note else _body_facts(git.info(sha, with_files=False).message)
    return [Fact(r["tag"], r["text"], r.get("name"), tuple(r.get("sources", []))) for r in rows]


__all__ = [
    "NOTES_REF",
    "LineWhy",
    "SourceEntry",
    "blame_file",
    "blame_of",
    "facts_of_commit",
    "why",
    "why_line",
    "why_text",
]


# --- the use cases, as the faces call them ---------------------------------------------------------


def workspace_git(rt: Runtime) -> tuple[GitStore | None, Path]:
    if not rt.has_workspace():
        raise UsageError(
            f"no workspace at {rt.root}",
            hint="give --workspace, or run `dream init` to make one",
        )
    return rt.git(create=False), rt.root


def why(
    rt: Runtime, target: str | None, text: str | None, *, visible: Callable[[str], bool] | None = None
) -> list[LineWhy]:
    """``dream why PATH:LINE`` (one line) or ``dream why --text TEXT`` (every line holding it);
    ``visible`` limits ``--text`` to the files a reader's scope sees (``app.why_scope``)."""
    if (target is None) == (text is None):
        raise UsageError("give either PATH:LINE or --text TEXT", hint="e.g. `dream why USER.md:12`")
    git, root = workspace_git(rt)
    try:
        if text is not None:
            return why_text(git, root, text, [p for p in layout_paths(root, git) if visible is None or visible(p)])
        assert target is not None
        parts = split_target(target)
        if parts is None:
            raise UsageError(f"{target!r} is not PATH:LINE", hint="e.g. `dream why USER.md:12` (lines count from 1)")
        return [why_line(git, root, *parts)]
    finally:
        if git is not None:
            git.close()


def blame_of(rt: Runtime, path: str, rev: str = "HEAD") -> list[LineWhy]:
    """``dream blame PATH``: every line with its commit and sources."""
    git, root = workspace_git(rt)
    try:
        return blame_file(git, root, path, rev)
    finally:
        if git is not None:
            git.close()


def layout_paths(root: Path, git: GitStore | None) -> list[str]:
    """The memory files committed at HEAD, in a stable order."""
    if git is None or git.head() is None:
        return []
    head = git.head()
    assert head is not None
    return sorted(p for p in git.files_at(head) if layout.is_content(p))
