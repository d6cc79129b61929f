"""Which of a batch's changes land and which wait for a person: the write policy, per hunk.

A batch's edit of one file is split into hunks (a line diff). Each hunk is judged by what it
does and whose lines it touches, per ``git blame`` of the file before the batch:

- ``add``: only new lines (default: apply);
- ``manual``: replaces or removes a line a person wrote (a ``memory: manual edits`` commit, the
  first import, or any commit Dream did not make; a line whose origin is unknown counts as one):
  default hold;
- ``dream``: replaces or removes a line Dream wrote within ``dreamAgeDays`` (default apply);
- ``dreamOld``: the same for a Dream line older than that (default apply; set ``hold`` to keep
  old consolidated knowledge from being rewritten unreviewed).

A "move" is a removal plus an addition elsewhere: the removal part is judged like any removal.
Blank lines belong to no one (re-spacing a file is not a rewrite), and a durable file still
holding its template is Dream's to replace. Per-file rules (glob patterns) and per-section
rules (a heading, its subsections included) override the defaults; ``pin`` makes a file or a
section one Dream never edits: the tool call is refused (``pinned_problem``), and a hunk that got
past it anyway (Dream's own writes) is held, never applied.

Pure: line origins come in as values; the adapter runs the blame.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from dream_memory.core.bounded import newline_lines
from dream_memory.core.markdown import split_sections

APPLY = "apply"
HOLD = "hold"
ACTIONS = (APPLY, HOLD)
KINDS = ("add", "manual", "dream", "dreamOld")
DEFAULT_DREAM_AGE_DAYS = 30
_HUMAN_KINDS = ("manual", "init", "other")  # blame kinds of lines Dream did not write itself


@dataclass(frozen=True)
class Rule:
    """One level of the policy: an action per kind of change (None: inherit), and ``pin``."""

    add: str | None = None
    manual: str | None = None
    dream: str | None = None
    dream_old: str | None = None
    pin: bool = False

    def action(self, kind: str) -> str | None:
        return {"add": self.add, "manual": self.manual, "dream": self.dream, "dreamOld": self.dream_old}[kind]


@dataclass(frozen=True)
class FileRule:
    pattern: str  # a glob over workspace-relative paths ("USER.md", "entities/*.md")
    rule: Rule = Rule()
    sections: tuple[tuple[str, Rule], ...] = ()  # heading text -> rule, case-insensitive


@dataclass(frozen=True)
class WritePolicy:
    add: str = APPLY
    manual: str = HOLD
    dream: str = APPLY
    dream_old: str = APPLY
    dream_age_days: int = DEFAULT_DREAM_AGE_DAYS
    files: tuple[FileRule, ...] = ()

    def _file_rules(self, path: str) -> list[FileRule]:
        return [f for f in self.files if fnmatch.fnmatchcase(path, f.pattern)]

    def action(self, path: str, headings: Sequence[str], kind: str) -> str:
        """The action for a change of ``kind`` in ``path`` under ``headings`` (outermost first)."""
        chosen = Rule(self.add, self.manual, self.dream, self.dream_old).action(kind) or APPLY
        for file_rule in self._file_rules(path):
            chosen = file_rule.rule.action(kind) or chosen
            for heading in headings:  # inner sections override outer ones
                for title, rule in file_rule.sections:
                    if _same_heading(title, heading):
                        chosen = rule.action(kind) or chosen
        return chosen

    def pinned_file(self, path: str) -> bool:
        return any(f.rule.pin for f in self._file_rules(path))

    def pinned_sections(self, path: str) -> list[str]:
        return [title for f in self._file_rules(path) for title, rule in f.sections if rule.pin]


def _same_heading(a: str, b: str) -> bool:
    return a.strip().lstrip("#").strip().casefold() == b.strip().lstrip("#").strip().casefold()


@dataclass(frozen=True)
class LineOrigin:
    """Who last wrote a line of the file before the batch: a blame kind and its age in days."""

    kind: str  # "dream" | "manual" | "init" | "other"
    age_days: float = 0.0
    subject: str = ""


@dataclass(frozen=True)
class Hunk:
    """One change of a file: lines ``start..end`` (0-based, end exclusive) of the text before
    replaced by ``added``; judged by the policy."""

    start: int
    end: int
    removed: tuple[str, ...]
    added: tuple[str, ...]
    change: str  # "add" | "replace" | "remove"
    kind: str  # the policy kind: add | manual | dream | dreamOld
    headings: tuple[str, ...]
    action: str
    reason: str = ""
    pinned: bool = False
    group: int = -1  # a held move's other half: the number of the hunk it waits with

    @property
    def lines(self) -> tuple[int, int]:
        """1-based inclusive line range in the text before (an insertion: the line after it)."""
        return (self.start + 1, max(self.end, self.start + 1))


@dataclass(frozen=True)
class FilePlan:
    path: str
    before: str | None
    after: str | None
    hunks: tuple[Hunk, ...] = ()
    _opcodes: tuple[tuple[str, int, int, int, int], ...] = field(default=(), repr=False)

    @property
    def held(self) -> list[int]:
        return [i for i, h in enumerate(self.hunks) if h.action == HOLD]

    def held_groups(self) -> list[list[int]]:
        """The held hunks as changes a person reviews: each held hunk with the hunks that wait
        with it (a moved line's new place), lead hunk first."""
        groups: dict[int, list[int]] = {}
        for i in self.held:
            lead = self.hunks[i].group
            groups.setdefault(i if lead < 0 else lead, []).append(i)
        return [sorted(g, key=lambda i: (i != lead, i)) for lead, g in sorted(groups.items())]

    def compose(self, chosen: set[int]) -> str | None:
        """The text with only the hunks numbered in ``chosen`` applied."""
        if self.before is None or self.after is None:
            return self.after if chosen else self.before
        old, new = lines_of(self.before), lines_of(self.after)
        out: list[str] = []
        number = 0
        for tag, i1, i2, j1, j2 in self._opcodes:
            if tag == "equal":
                part = new[j1:j2]
            else:
                part = new[j1:j2] if number in chosen else old[i1:i2]
                number += 1
            if part and out and not out[-1].endswith("\n"):
                out[-1] += "\n"  # a last line without its newline is followed by more lines now
            out.extend(part)
        return "".join(out)


# Lines as git counts them (a line ends at "\n" only, line ends kept): blame's numbering.
lines_of = newline_lines
_LONE_CR = re.compile("\r(?!\n)")


def _headings_at(text: str) -> list[tuple[int, int, str, int]]:
    """(start, end) 0-based inclusive line spans of each heading's section, subsections included,
    in ``lines_of``'s numbering. The sections are read with a carriage return that ends no line
    shown as a space: the section reader also ends a line there, and each such return above a
    heading shifted its span one line down from the lines it is compared with (an edit inside a
    pinned section passed as one in the section above)."""
    sections = split_sections(_LONE_CR.sub(" ", text))
    spans: list[tuple[int, int, str, int]] = []
    for n, section in enumerate(sections):
        if section.level == 0:
            continue
        end = section.end
        for later in sections[n + 1 :]:
            if 0 < later.level <= section.level:
                break
            end = later.end
        spans.append((section.start - 1, end - 1, section.title, section.level))
    return spans


def _headings_for(spans: Sequence[tuple[int, int, str, int]], start: int, end: int) -> tuple[str, ...]:
    """Titles of the sections holding lines start..end (an insertion at ``start``: the line above)."""
    probe = (start - 1, start - 1) if end <= start else (start, end - 1)
    found = [(lvl, title) for s, e, title, lvl in spans if s <= probe[0] and probe[1] <= e]
    return tuple(title for _, title in sorted(found))


def _refine(
    code: tuple[str, int, int, int, int], old: Sequence[str], new: Sequence[str]
) -> list[tuple[str, int, int, int, int]]:
    """A replacement of fewer lines by more, split into line-for-line replacements and additions.

    The line diff reports "rewrite one line and add two after it" as one block; judged whole,
    the two additions would wait with the rewrite. Each old line is paired with the most similar
    new line (in order, leaving room for the old lines after it); new lines left unpaired are
    additions. A block removing more lines than it adds stays whole.
    """
    tag, i1, i2, j1, j2 = code
    if tag != "replace" or j2 - j1 <= i2 - i1:
        return [code]
    out: list[tuple[str, int, int, int, int]] = []
    j = j1
    for i in range(i1, i2):
        room = j2 - (i2 - i - 1)  # the old lines after this one each need a new line
        best = max(range(j, room), key=lambda k: difflib.SequenceMatcher(None, old[i], new[k]).ratio())
        if best > j:
            out.append(("insert", i, i, j, best))
        out.append(("replace", i, i + 1, best, best + 1))
        j = best + 1
    if j < j2:
        out.append(("insert", i2, i2, j, j2))
    return out


def _kind_of(removed_origins: Sequence[LineOrigin | None], policy: WritePolicy) -> tuple[str, str]:
    """The policy kind for removing these lines, and who wrote them (for the reason)."""
    human = [o for o in removed_origins if o is None or o.kind in _HUMAN_KINDS]
    if human:
        first = human[0]
        return "manual", "a line a person wrote" + (f" ({first.subject})" if first and first.subject else "")
    old = [o for o in removed_origins if o is not None and o.age_days > policy.dream_age_days]
    if old:
        return "dreamOld", f"a Dream line older than {policy.dream_age_days} days"
    return "dream", "a recent Dream line"


def plan_file(
    path: str,
    before: str | None,
    after: str | None,
    origins: Sequence[LineOrigin | None] | None,
    policy: WritePolicy,
    *,
    template: bool = False,
) -> FilePlan:
    """Split one file's change into hunks, each with its action under ``policy``.

    ``origins``: one per line of ``before`` (None where unknown, which counts as a person's);
    ``template``: the file before is its template, whose lines are Dream's to replace.
    A created or deleted file is one hunk (deletion is the deletion guard's, not judged here).
    """
    if before is None or after is None:
        change = "add" if before is None else "remove"
        kind = "add" if before is None else "manual"
        hunk = Hunk(0, 0, (), (), change, kind, (), policy.action(path, (), kind))
        return FilePlan(path, before, after, (hunk,))
    old, new = lines_of(before), lines_of(after)
    matcher = difflib.SequenceMatcher(
        None, [line.rstrip("\r\n") for line in old], [line.rstrip("\r\n") for line in new], autojunk=False
    )
    opcodes = tuple(part for code in matcher.get_opcodes() for part in _refine(code, old, new))
    spans = _headings_at(before)
    pinned = policy.pinned_sections(path)
    whole_pin = policy.pinned_file(path)
    hunks: list[Hunk] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        removed = tuple(old[i1:i2])
        headings = _headings_for(spans, i1, i2)
        owned = [i for i in range(i1, i2) if old[i].strip()]  # blank lines belong to no one
        if not owned:
            kind, who = "add", ""
        elif template:
            kind, who = "dream", "a template line"
        else:
            lines = [(origins[i] if origins is not None and i < len(origins) else None) for i in owned]
            kind, who = _kind_of(lines, policy)
        change = "add" if tag == "insert" else "remove" if tag == "delete" else "replace"
        action = policy.action(path, headings, kind)
        is_pinned = whole_pin or any(_same_heading(p, h) for p in pinned for h in headings)
        where = f"{path} line {i1 + 1}" + (f"-{i2}" if i2 > i1 + 1 else "")
        if is_pinned:
            action, reason = HOLD, f"{where} is in a pinned section: Dream never edits it"
        elif action == HOLD and kind == "add":
            reason = f"adds lines at {where} (the write policy holds additions there)"
        elif action == HOLD:
            reason = f"{change}s {who} at {where}"
        else:
            reason = ""
        hunks.append(Hunk(i1, i2, removed, tuple(new[j1:j2]), change, kind, headings, action, reason, is_pinned))
    return FilePlan(path, before, after, tuple(_moves_wait_whole(hunks)), opcodes)


def _moves_wait_whole(hunks: list[Hunk]) -> list[Hunk]:
    """A held removal's lines added back elsewhere is a move: the addition waits with the removal
    (landing it alone would duplicate the line until the removal is reviewed)."""
    held_lines = {
        line.strip(): i
        for i, h in enumerate(hunks)
        if h.action == HOLD and h.group < 0
        for line in h.removed
        if line.strip()
    }
    out = list(hunks)
    for i, hunk in enumerate(hunks):
        if hunk.action == HOLD:
            continue
        lead = next((held_lines[line.strip()] for line in hunk.added if line.strip() in held_lines), None)
        if lead is not None:
            where = hunks[lead].reason.rsplit(" at ", 1)[-1]
            out[i] = replace(hunk, action=HOLD, group=lead, reason=f"moves lines from {where} (waits with them)")
    return out


def pinned_problem(path: str, before: str | None, after: str | None, policy: WritePolicy) -> str | None:
    """Why this edit may not be made (it changes a pinned file or section), or None.

    The text goes back to the model as the tool's error, so it says what to do instead.
    """
    if before == after:
        return None
    if policy.pinned_file(path):
        return f"{path} is pinned: Dream never edits it. Leave it as it is; put the fact in another file."
    for title in policy.pinned_sections(path):
        old = _section_text(before or "", title)
        if old is None:
            continue  # no such section yet: nothing to protect
        if _section_text(after or "", title) != old:
            return (
                f"the section {title!r} of {path} is pinned: Dream never edits it. Leave its heading and "
                "lines exactly as they are; put the fact in another section or file."
            )
    return None


_PINNED_SECTION = re.compile(r"the section (?P<title>'[^']*'|\"[^\"]*\") of (?P<path>\S+) is pinned")


def pinned_section_in(error: str) -> tuple[str, str] | None:
    """(path, section title) when ``error`` is ``pinned_problem``'s refusal of a pinned section:
    the placement rules read it to put the fact in another section, as a model would."""
    match = _PINNED_SECTION.search(error)
    return (match["path"], match["title"][1:-1]) if match else None


def _section_text(text: str, title: str) -> str | None:
    lines = lines_of(text)
    for start, end, heading, _ in _headings_at(text):
        if _same_heading(heading, title):
            return "".join(lines[start : end + 1])
    return None


def _rule(value: object) -> Rule:
    def get(key: str) -> str | None:
        return getattr(value, key, None)

    return Rule(get("add"), get("manual"), get("dream"), get("dream_old"), bool(getattr(value, "pin", False)))


def from_settings(value: object) -> WritePolicy:
    """The policy from the config's ``writePolicy`` section (any object with its attributes)."""
    files = getattr(value, "files", None) or {}
    return WritePolicy(
        add=getattr(value, "add", APPLY),
        manual=getattr(value, "manual", HOLD),
        dream=getattr(value, "dream", APPLY),
        dream_old=getattr(value, "dream_old", APPLY),
        dream_age_days=int(getattr(value, "dream_age_days", DEFAULT_DREAM_AGE_DAYS)),
        files=tuple(
            FileRule(
                pattern,
                _rule(rule),
                tuple((title, _rule(section)) for title, section in (getattr(rule, "sections", None) or {}).items()),
            )
            for pattern, rule in files.items()
        ),
    )
