"""`dream context`: gather the parts of the memory block from a workspace and fit them.

Reads are bounded by the budget, never by the store: a file is read up to ``file_bytes(budget)``
(16 bytes per token of budget, at least 64 KiB: more than any text that fits could take), and a
larger one is given as the outline of what was read; the whole block reads at most four times
that. History is read backwards from the end of ``memory/history.jsonl`` and only as far as the
budget can use, so a stuck Dream with millions of undreamt entries costs the same as one with a
hundred. Every file is opened through ``adapters.rooted.Beneath``: a symlink that leads out of the
workspace (SOUL.md linked to a file elsewhere, a skill folder linked out) is left out and said so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.rooted import Beneath, OutsideRoot
from dream_memory.adapters.store_tree import WorkTree
from dream_memory.adapters.workspace import template_text
from dream_memory.app.read.scoping import SHARED_READER, ReaderScope, caller_scope, private_identities
from dream_memory.core import layout, scopes
from dream_memory.core.context import ContextBlock, Part, build_context, private_title
from dream_memory.core.frontmatter import is_always_on
from dream_memory.core.history import HistoryEntry, parse_line
from dream_memory.core.ports import TokenCounter
from dream_memory.core.scopes import new_file_text
from dream_memory.settings import defaults

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime

_DURABLE = (
    (layout.SOUL, "`dream section soul`"),
    (layout.USER, "`dream section user`"),
    (layout.MEMORY, "`dream section memory`"),
)
BYTES_PER_TOKEN = 16
MIN_FILE_BYTES = 64 * 1024
SKILL_HEAD_BYTES = 16 * 1024  # enough for any frontmatter: whether a skill is always on


def file_bytes(budget: int) -> int:
    """The most bytes read of one file for a block of ``budget`` tokens."""
    return max(MIN_FILE_BYTES, budget * BYTES_PER_TOKEN)


class _AnotherScopes(Exception):
    """The file opened is one of another scope's, under a second name (a link)."""


class _Reads:
    """The block's reading budget and what it had to leave out."""

    def __init__(self, root: Path, budget: int, who: ReaderScope = SHARED_READER) -> None:
        self.beneath = Beneath(root)
        self.per_file = file_bytes(budget)
        self.left = 4 * self.per_file
        self.notes: list[str] = []
        # The read side's rule (docs/reference/read-side.md): a private file is never served
        # under another name, so a shared USER.md hard-linked or symlinked to one is left out.
        tree = WorkTree(root)
        try:
            self.hidden = private_identities(tree, who)[0]
        finally:
            tree.close()

    def _check(self, st: os.stat_result) -> None:
        if (st.st_dev, st.st_ino) in self.hidden:
            raise _AnotherScopes

    def head(self, rel: str, limit: int) -> tuple[str, int | None] | None:
        """(text of at most ``limit`` bytes, cut at a line end; the file's size when that is not
        all of it) or None when missing, not a regular file, leading out of the workspace or
        the same file as one of a scope the reader cannot see (both noted)."""
        try:
            found = self.beneath.head(rel, limit, self._check)
        except OutsideRoot as exc:
            self.notes.append(f"{rel} leads outside the workspace ({exc.why}); not included")
            return None
        except _AnotherScopes:
            self.notes.append(f"{rel} is the same file as one of another scope (a link to it); not included")
            return None
        if found is None:
            return None
        data, size = found
        whole = len(data) >= size
        if not whole and b"\n" in data:
            data = data[: data.rindex(b"\n") + 1]
        self.left -= len(data)
        return data.decode("utf-8", errors="replace"), None if whole else size

    def part(self, rel: str, title: str, pointer: str) -> Part:
        got = self.head(rel, min(self.per_file, max(self.left, 0)))
        if got is None:
            return Part(title, "", pointer)
        text, size = got
        return Part(title, text, pointer, size=size)


def _skill_names(reads: _Reads) -> list[str]:
    return sorted(name for name in reads.beneath.names((layout.SKILLS_DIR,)) if not name.startswith("."))


def _always_on_skills(reads: _Reads) -> list[Part]:
    """Skills whose frontmatter says ``always: true``: they reach every prompt."""
    parts: list[Part] = []
    names = _skill_names(reads)
    for index, name in enumerate(names):
        if reads.left < SKILL_HEAD_BYTES:
            reads.notes.append(
                f"{len(names) - index} skill(s) from skills/{name} on were not looked at: the block was full"
            )
            break
        rel = f"{layout.SKILLS_DIR}/{name}/SKILL.md"
        got = reads.head(rel, max(SKILL_HEAD_BYTES, min(reads.per_file, reads.left)))
        if got is None:
            continue
        text, size = got
        if is_always_on(text):
            parts.append(Part(f"Skill: {name} (always on)", text, f"`cat {rel}`", size=size))
        else:
            reads.left += len(text.encode("utf-8"))  # read only to look at its frontmatter
    return parts


def always_on_skills(root: Path) -> list[Part]:
    """Skills whose frontmatter says ``always: true`` (read within the default block's budget)."""
    reads = _Reads(root, defaults.CONTEXT_BUDGET)
    try:
        return _always_on_skills(reads)
    finally:
        reads.beneath.close()


def _recent_history(
    reads: _Reads, dream_cursor: int, session_key: str | None, who: ReaderScope = SHARED_READER
) -> tuple[list[HistoryEntry], int]:
    """(undreamt entries read from the end of history.jsonl, oldest first; an estimate of the
    older undreamt entries not read). Reading stops at Dream's cursor or at the budget. Entries
    of scopes ``who`` cannot see are skipped (and never counted)."""
    entries: list[HistoryEntry] = []
    filtered = session_key is not None or who.filters_history
    # A session filter skips most lines: look further back for the same amount of its own.
    limit = reads.per_file * (16 if filtered else 1)
    reached_cursor = False
    wanted = 0
    lines = reads.beneath.lines_from_end(layout.HISTORY, limit)
    try:
        for raw in lines:
            parsed = parse_line(raw.decode("utf-8", errors="replace"), 0)
            for entry in reversed(parsed.entries):
                if entry.cursor <= dream_cursor:
                    reached_cursor = True
                    break
                if (session_key is None or entry.session_key == session_key) and who.sees_entry(entry.session_key):
                    entries.append(entry)
                    wanted += len(entry.content)
            if reached_cursor or wanted > reads.per_file:
                break
    except OutsideRoot as exc:
        reads.notes.append(f"{layout.HISTORY} leads outside the workspace ({exc.why}); history not included")
        return [], 0
    finally:
        lines.close()  # the history file is open until the reading stops
    entries.reverse()
    not_read = 0
    if not reached_cursor and entries and not filtered:
        # Cursors are allocated one by one: the ones between Dream's and the oldest read are
        # entries that were not read (at most; a gap makes it fewer).
        not_read = max(0, entries[0].cursor - dream_cursor - 1)
    return entries, not_read


def entity_for_path(
    store: Path, path: str, *, excludes: frozenset[str], home: str | None = None, who: ReaderScope = SHARED_READER
) -> tuple[Part | None, str | None]:
    """The entity whose repository root holds ``path`` (read side's resolver), as a context part,
    or the note saying why its file was left out.

    An excluded entity (or one whose file is another scope's) never resolves, so it can never
    reach a prompt through this door, and it leaves no note: naming it would tell this scope
    about an entity withheld from it. An entity of this scope whose file cannot be read (binary,
    missing, leading out of the store) is named in what was left out.
    """
    from dream_memory.app.read import ReadStore
    from dream_memory.errors import NotFound, Refused, Withheld

    with ReadStore(store, excludes=excludes, home=home, scope=who) as reader:
        try:
            resolved = reader.resolve(path)
        except (NotFound, Withheld):
            return None, None
        except Refused as exc:  # the row's File cell itself is refused (outside the store, not markdown)
            return None, f"the entity for {path}: {exc.message}; not included"
        try:
            page = reader.entity(resolved.entity)
        except Withheld:
            return None, None
        except (NotFound, Refused) as exc:
            return None, f"entity {resolved.entity}, whose root holds {path}: {exc.message}; not included"
    return Part(f"Entity: {resolved.entity} ({resolved.file})", page.text, f"`dream entity {resolved.entity}`"), None


def memory_context(
    root: Path,
    history: HistoryLog,
    *,
    budget: int,
    counter: TokenCounter,
    session_key: str | None = None,
    extra_parts: list[Part] | None = None,
    annotate: Callable[[str, str], str] | None = None,
    who: ReaderScope = SHARED_READER,
) -> ContextBlock:
    """The block for an agent's system prompt (docs/reference/commands.md, `dream context`).

    ``annotate(path, text)``: the durable files' text as the block shows it (``--sources`` adds
    "(learned from ... on ...)" to Dream's lines), before the budget is applied. A private
    ``who`` adds its own USER.md and MEMORY.md after the shared files, each under a heading
    saying whose they are; history holds only entries of the scopes it sees."""
    reads = _Reads(root, budget, who)
    files = [(path, path, pointer) for path, pointer in _DURABLE]
    for name, rel in who.own_sections().items():
        pointer = f"`dream section {name} --scope {who.name}`"
        files.append((rel, private_title(who.name, rel), pointer))
    try:
        parts = [reads.part(path, title, pointer) for path, title, pointer in files]
        if annotate is not None:
            parts = [
                replace(part, text=annotate(path, part.text)) for part, (path, _, _) in zip(parts, files, strict=True)
            ]
        parts += _always_on_skills(reads)
        parts += extra_parts or []
        cursor = history.read_dream_cursor() or 0
        entries, not_read = _recent_history(reads, cursor, session_key, who)
    finally:
        reads.beneath.close()
    # A file as dream init (or Dream, for a private one) made it is left out.
    templates = {
        title: new_file_text(rel) if scopes.is_private_file(rel) else template_text(rel) for rel, title, _ in files
    }
    block = build_context(
        parts, entries, budget=budget, count_tokens=counter.count, history_not_read=not_read, templates=templates
    )
    block.left_out += reads.notes
    return block


# --- the service (every face calls this) ----------------------------------------------------------


@dataclass(frozen=True)
class ContextRequest:
    budget: int | None = None  # None: agents.defaults.context.budgetTokens
    session_key: str | None = None
    work_path: str | None = None  # also the entity whose repository root holds this folder
    sources: bool = False  # Dream's lines say where they were learned (docs/provenance.md)
    # Who reads (docs/read-side.md#scopes): a scope name, or a ReaderScope fixed by the caller (the
    # MCP server's); session_key derives one from the rules instead.
    scope: str | ReaderScope | None = None


def check_budget(budget: int) -> int:
    """The one budget rule of every face (CLI, API, MCP resource and prompt): the config's
    ``agents.defaults.context.budgetTokens`` range."""
    from dream_memory.app.inputs import check_number, setting_range
    from dream_memory.settings.schema import ContextSettings

    bounds = setting_range(ContextSettings, "budget_tokens")
    hint = f"the block's header and pointers alone need about {bounds.ge:g} tokens"
    checked = check_number(budget, "the context budget", bounds, whole=True, names=("budget", "--budget"), hint=hint)
    return int(checked)


def _reader(rt: Runtime, request: ContextRequest) -> ReaderScope:
    """Who reads: a ReaderScope the caller fixed (with the rules, to judge history entries), else
    ``--scope`` / ``--session-key`` / the environment."""
    if isinstance(request.scope, ReaderScope):
        fixed = request.scope
        return fixed if fixed.rules is not None else replace(fixed, rules=rt.settings.scope_rules)
    return caller_scope(
        request.scope, request.session_key, rt.settings.env, lambda: rt.settings.scope_rules, need_rules=True
    )


def context(rt: Runtime, request: ContextRequest) -> ContextBlock:
    """``context``: the budget checked, then the block built; read-only, never creates anything."""
    budget = check_budget(request.budget if request.budget is not None else rt.settings.context.budget_tokens)
    who = _reader(rt, request)
    extra: list[Part] = []
    notes: list[str] = []
    if request.work_path:
        rs = rt.read_settings
        found, note = entity_for_path(
            rs.store, request.work_path, excludes=rs.excludes, home=rs.env.get("HOME"), who=who
        )
        extra = [found] if found is not None else []
        notes = [note] if note is not None else []
    from dream_memory.app.sources import annotate  # dulwich and the blame walk: only for --sources

    git = rt.git(create=False) if request.sources else None
    try:
        block = memory_context(
            rt.root,
            rt.history,
            budget=budget,
            counter=rt.token_counter(),
            session_key=who.session_key,
            extra_parts=extra,
            annotate=(lambda rel, text: annotate(git, rt.root, rel, text, who)) if request.sources else None,
            who=who,
        )
    finally:
        if git is not None:
            git.close()
    block.left_out += notes
    return block
