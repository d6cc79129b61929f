"""Where a memory line comes from, as values: who wrote a commit (its kind), and the record that
ties the lines a Dream batch wrote to the facts that asked for them and the history entries the
facts were learnt from (docs/provenance.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.facts import Fact
from dream_memory.core.merge import line_opcodes
from dream_memory.core.placement import names_as_old

if TYPE_CHECKING:
    from dream_memory.core.agent_loop import ToolExecutor, ToolOutcome

NOTE_VERSION = 1
# How a batch commit's body lists its facts and removals (app.dream.provenance writes it; the
# read side parses it when a commit has no note).
BODY_FACTS = "Facts (each with the history entries it comes from):"
BODY_REMOVED = "Removed or replaced:"
BODY_FACT = re.compile(r"^\s+(?P<id>\d+)\. (?P<fact>\[[A-Z]+\] .*?)  <- (?P<sources>unknown|[\d, ]+)$")


def removals_in(message: str) -> list[str]:
    """The removed or replaced lines a batch commit's body lists, each with the fact that asked
    for it (``USER.md: replaced '- Drinks tea' (fact 2: [USER] Drinks coffee (was tea))``)."""
    found: list[str] = []
    inside = False
    for line in split_lines(message):
        if line.strip() == BODY_REMOVED:
            inside = True
        elif inside and line.strip():
            found.append(line.strip())
        elif inside:
            break
    return found


KIND_DREAM = "dream"
KIND_MANUAL = "manual"
KIND_INIT = "init"
KIND_OTHER = "other"

INIT_SUBJECT = "memory: init"
MANUAL_SUBJECT = "memory: manual edits"

# The commits whose content Dream wrote: a batch (``dream: 12..18: USER.md +2 -0``), or a held
# batch a person accepted (``dream: apply held ...``: the lines are still the model's).
_DREAM_SUBJECT = re.compile(r"^dream: (?:\d+\.\.\d+: |apply held )")
# Every other commit dream-memory makes starts with one of these (reverts, compaction, nothing
# new, set aside, discarded holds): bookkeeping, not lines anyone learnt.
_OURS = ("dream: ", "memory: ")


def commit_kind(message: str) -> str:
    """ "init", "manual", "dream" or "other" for a commit message.

    A commit dream-memory did not make (a person's own ``git commit``, an agent on another
    platform) counts as a hand edit, as ``memory: manual edits`` does.
    """
    subject = message.split("\n", 1)[0].strip()
    if subject == INIT_SUBJECT:
        return KIND_INIT
    if subject == MANUAL_SUBJECT:
        return KIND_MANUAL
    if _DREAM_SUBJECT.match(subject):
        return KIND_DREAM
    if subject.startswith(_OURS):
        return KIND_OTHER
    return KIND_MANUAL


# --- a batch's lines, tied to its facts ----------------------------------------------------------

_STOP = frozenset(
    "the a an and or of to in on at for with from by is are was were be been has have had it its this that "
    "user users prefers prefer likes uses use now not no yes as into over than then also".split()
)


def key_words(text: str) -> set[str]:
    """The words that carry a line's or a fact's meaning: lower case, no punctuation, no short
    or common words (numbers stay: a version or a port is the fact)."""
    words = re.findall(r"[^\W_]+", text.casefold())
    return {w for w in words if (len(w) > 2 or w.isdigit()) and w not in _STOP}


@dataclass(frozen=True)
class Declared:
    """An edit the model said applies some facts (the edit tools' ``facts`` argument)."""

    path: str
    old_text: str
    new_text: str
    facts: tuple[int, ...]  # 1-based numbers of the batch's facts


@dataclass(frozen=True)
class LineSource:
    path: str
    line: int  # 1-based, in the file as the batch left it
    text: str
    facts: tuple[int, ...]  # empty: no fact of the batch matches the line

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "text": self.text, "facts": list(self.facts)}


@dataclass(frozen=True)
class Removal:
    path: str
    text: str
    facts: tuple[int, ...]  # the facts that asked for it (a correction, a "Forget:"); empty: none found
    replaced_by: str | None  # the line that took its place, when it was replaced

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "text": self.text, "facts": list(self.facts), "replaced_by": self.replaced_by}


@dataclass(frozen=True)
class Attribution:
    lines: tuple[LineSource, ...]
    removed: tuple[Removal, ...]


def _facts_for_path(path: str, facts: Sequence[Fact]) -> list[int]:
    return [i for i, f in enumerate(facts, start=1) if f.target == path or (path == layout.INDEX and f.tag == "ENTITY")]


def _fact_words(fact: Fact) -> set[str]:
    return key_words(f"{fact.name or ''} {fact.text}")


def replaced_in_batch(numbers: Sequence[int], facts: Sequence[Fact], landed: Collection[int]) -> dict[int, int]:
    """Which of the facts ``numbers`` a later fact of the same batch replaces: fact number -> the
    number of the one replacing it. A fact for the same file, learnt only from later entries,
    with lines in memory (``landed``), that shares three quarters of its key words both ways
    (at least three) says the same thing anew ("the sync moved to Wednesdays" after "the sync
    is on Tuesdays"), or that names it as the old value ("a full run instead of website only"
    after "requested a website-only run", as the placement rules read it). "User is vegetarian"
    and "User's wife is vegetarian" are two facts: too few words to tell, and the later one
    brings a subject of its own."""
    found: dict[int, int] = {}
    for number in numbers:
        fact, words = facts[number - 1], _fact_words(facts[number - 1])
        for other in sorted(landed):
            later, theirs = facts[other - 1], _fact_words(facts[other - 1])
            shared = len(words & theirs)
            similar = shared >= 3 and shared * 4 >= len(words) * 3 and shared * 4 >= len(theirs) * 3
            if (
                other != number
                and later.target == fact.target
                and fact.sources
                and later.sources
                and min(later.sources) > max(fact.sources)
                and (similar or names_as_old(later.text, fact.text))
            ):
                found[number] = other
                break
    return found


def _best(line: str, candidates: Sequence[int], facts: Sequence[Fact]) -> tuple[int, ...]:
    """The candidates sharing the most key words with ``line`` (none shares any: empty)."""
    words = key_words(line)
    scored = [(len(words & _fact_words(facts[i - 1])), i) for i in candidates]
    top = max((score for score, _ in scored), default=0)
    return tuple(i for score, i in scored if score == top and top > 0)


def _declared_for(line: str, path: str, declared: Sequence[Declared], side: str) -> list[int]:
    stripped = line.strip()
    found: list[int] = []
    for edit in declared:
        text = edit.new_text if side == "new" else edit.old_text
        if edit.path == path and stripped and stripped in text:
            found += [n for n in edit.facts if n not in found]
    return found


def _attribute_line(
    line: str, path: str, facts: Sequence[Fact], declared: Sequence[Declared], side: str
) -> tuple[int, ...]:
    """The facts a line added (``side="new"``) or removed (``"old"``) is owed to: among the facts
    its edit declared, or else those going to its file, the ones sharing the most key words with
    it; the only fact of its file when none shares a word (a skill's frontmatter line)."""
    valid = range(1, len(facts) + 1)
    named = [n for n in _declared_for(line, path, declared, side) if n in valid]
    candidates = named or _facts_for_path(path, facts)
    best = _best(line, candidates, facts)
    if best:
        return best
    if side == "old":
        return tuple(named)
    return tuple(candidates) if len(candidates) == 1 or named else ()


def attribute(
    changes: Mapping[str, tuple[str | None, str]], facts: Sequence[Fact], declared: Sequence[Declared] = ()
) -> Attribution:
    """Every line a batch added or replaced, and every line it removed, tied to the batch's facts
    (by number). Structure added with them (blank lines, headings, a frontmatter fence) takes
    the facts of the lines it came with."""
    lines: list[LineSource] = []
    removed: list[Removal] = []
    for path, (before, after) in sorted(changes.items()):
        old = split_lines(before or "")
        new = split_lines(after)
        for tag, i1, i2, j1, j2 in line_opcodes(old, new):  # patience: linear in repeated blank lines
            if tag == "equal":
                continue
            added = [(j, new[j]) for j in range(j1, j2) if new[j].strip()]
            hunk_facts: list[int] = []
            owned: dict[int, tuple[int, ...]] = {}
            for j, text in added:
                owners = _attribute_line(text, path, facts, declared, "new")
                owned[j] = owners
                hunk_facts += [n for n in owners if n not in hunk_facts]
            for j in range(j1, j2):
                text = new[j]
                structure = not text.strip() or text.lstrip().startswith("#") or text.strip() == "---"
                owners = owned.get(j, ())
                lines.append(LineSource(path, j + 1, text, owners or (tuple(hunk_facts) if structure else ())))
            gone = [old[i] for i in range(i1, i2) if old[i].strip()]
            for k, text in enumerate(gone):
                owners = _attribute_line(text, path, facts, declared, "old")
                if not owners and hunk_facts:
                    # replaced: the facts of the lines that took its place asked for it
                    owners = _best(text, hunk_facts, facts) or tuple(hunk_facts)
                if not owners:
                    owners = _removal_owner(text, path, facts)
                replacement = added[k][1] if tag == "replace" and k < len(added) else None
                removed.append(Removal(path, text, owners, replacement))
    return Attribution(tuple(lines), tuple(removed))


def _removal_owner(text: str, path: str, facts: Sequence[Fact]) -> tuple[int, ...]:
    """For a line removed outright: the corrections and "Forget:" facts of its file that share
    its words (the "(was ...)" part quotes it)."""
    asking = [i for i in _facts_for_path(path, facts) if "(was" in facts[i - 1].text or _is_forget(facts[i - 1])]
    return _best(text, asking, facts)


def _is_forget(fact: Fact) -> bool:
    return fact.text.casefold().startswith("forget")


def valid_sources(fact: Fact, cursors: Collection[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the cited cursors inside the batch, those outside it)."""
    inside = tuple(c for c in fact.sources if c in cursors)
    outside = tuple(c for c in fact.sources if c not in cursors)
    return inside, outside


class DeclaringExecutor:
    """The edit tools as the model calls them, remembering which facts each applied edit says
    it applies (the optional ``facts`` argument); everything else passes through unchanged."""

    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner
        self.declared: list[Declared] = []

    def execute(self, name: str, arguments: dict[str, object]) -> ToolOutcome:
        outcome = self.inner.execute(name, arguments)
        if outcome.ok and name in ("edit_file", "write_file"):
            numbers = arguments.get("facts")
            cited = (
                tuple(n for n in numbers if isinstance(n, int) and not isinstance(n, bool))
                if isinstance(numbers, list)
                else ()
            )
            new = arguments.get("new_text" if name == "edit_file" else "content")
            old = arguments.get("old_text") if name == "edit_file" else ""
            self.declared.append(
                Declared(
                    str(arguments.get("path", "")),
                    old if isinstance(old, str) else "",
                    new if isinstance(new, str) else "",
                    cited,
                )
            )
        return outcome
