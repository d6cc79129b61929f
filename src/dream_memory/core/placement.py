"""Where a fact goes and how it is written there: the deterministic placement rules.

Shared by the offline engine (which answers phase 2 with the edits these rules give) and by
Dream's ``facts`` edit protocol (which places phase-1 facts itself when a model cannot edit):
add a bullet under the section the fact belongs to, replace the line a "(was X)" names, remove
what a "Forget: ... (was X)" names, and never add a line the file already holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache

from dream_memory.core import layout, scopes
from dream_memory.core.bounded import lines_with_ends, split_lines
from dream_memory.core.dates import merged_trail, split_trail
from dream_memory.core.facts import Fact, slug
from dream_memory.core.frontmatter import render_frontmatter
from dream_memory.core.markdown import find_section

_LABEL_PREFIX = re.compile(r"^(?:decisions?|solutions?|environment|user (?:preferences?|facts?)):\s+", re.IGNORECASE)
_SUPERSEDES = (
    re.compile(r"\(\s*(?:was|previously|formerly|not)\s+(?P<old>[^)]+?)\s*\)", re.IGNORECASE),
    re.compile(r"\binstead of\s+(?P<old>[^,.;]+)", re.IGNORECASE),
    re.compile(r"\bno longer\s+(?P<old>[^,.;]+)", re.IGNORECASE),
    re.compile(r"\bchanged from\s+(?P<old>.+?)\s+to\b", re.IGNORECASE),
)
# "[2026-04-03 00:02] user: text" / "assistant: (tool call) name(args)" / "tool (name): result"
_ABS_PATH = re.compile(r"(?<![\w.~])(/(?:[\w.@-]+/)*[\w.@-]+)")
SECTION_RULES: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    layout.USER: [
        (
            "Profile",
            re.compile(
                r"\b(name|timezone|time zone|lives|based in|moved to|works as|role|job|pronoun|born|age)\b", re.I
            ),
        ),
        ("Preferences", re.compile(r"\b(prefer|like|dislike|hate|want|style|format|language|favou?rite)", re.I)),
    ],
    layout.MEMORY: [
        (
            "Decisions",
            re.compile(r"^decisions?:|\b(decid|decision|chose|choose|will use|switched|agreed|standardi[sz]e)", re.I),
        ),
        (
            "Solutions",
            re.compile(r"^solutions?:|\b(solution|fix|fixed|fixes|workaround|resolved|root cause|the trick)\b", re.I),
        ),
        (
            "Environment",
            re.compile(
                r"^environment:|\b(path|install|version|python|node|macos|linux|windows|server|host|port|conda|docker|venv)\b",
                re.I,
            ),
        ),
    ],
    layout.SOUL: [("Voice", re.compile(r"\b(tone|voice|persona|personality)\b", re.I))],
}
DEFAULT_SECTION = {layout.USER: "Work Context", layout.MEMORY: "Project Facts", layout.SOUL: "Communication Style"}


_NON_WORD = re.compile(r"[^\w]+")


def _normalize(text: str) -> str:
    return _NON_WORD.sub(" ", text.casefold()).strip()


# A batch files a dozen facts into the same few files, and each fact compares its bullet with
# every line of its file: without this each line was normalised once per fact (most of
# place_facts' time). Lines only: whole texts would make the kept entries weigh what files do.
_normalize_line = lru_cache(maxsize=1 << 16)(_normalize)


def section_for(path: str, text: str, avoid: Collection[str] = ()) -> str:
    """The section a fact belongs under; ``avoid``: sections it may not go to (pinned), so it
    goes to the next fitting one, then the file's default section, then Notes."""
    kind = scopes.counterpart(path)  # a private scope's USER.md is sectioned like USER.md
    for title, pattern in SECTION_RULES.get(kind, []):
        if pattern.search(text) and title not in avoid:
            return title
    for title in (DEFAULT_SECTION.get(kind, "Notes"), "Notes", "More Notes"):
        if title not in avoid:
            return title
    return "Notes (Dream)"


def superseded_value(text: str) -> str | None:
    for pattern in _SUPERSEDES:
        match = pattern.search(text)
        if match:
            # "(was Lyon until 2026-04-03)" replaces Lyon: the date is the dated trail's.
            return re.split(r"\s+until\s+\d{4}-\d{2}-\d{2}", match["old"])[0].strip()
    return None


def names_as_old(fact_text: str, other: str) -> bool:
    """Whether ``fact_text`` says it replaces a value ("instead of X", "(was X)") that ``other``
    holds: the test the placement rules make before replacing a line."""
    old = superseded_value(fact_text)
    return bool(old) and names(_normalize(old or ""), _normalize(other))


def names(wanted: str, line: str) -> bool:
    """Whether the normalised ``line`` holds the normalised ``wanted`` as whole words: "(was
    tea)" or "Forget: tea" names "- Prefers tea", never "- The team uses Slack" (a substring match
    replaced or removed it)."""
    return bool(wanted) and f" {wanted} " in f" {line} "


def _bullet_text(text: str) -> str:
    """The fact as it should read in memory: routing label and '(was X)' note dropped (a dated
    trail, '(was X until 2026-04-03)', is kept: the user asked for it, ``datedTrail``)."""
    text = _LABEL_PREFIX.sub("", text.strip())
    text = re.sub(
        r"\s*\(\s*(?:was|previously|formerly)\s+(?![^)]*\buntil\s+\d{4}-\d{2}-\d{2})[^)]*\)", "", text
    ).strip()
    return text[:1].upper() + text[1:]


_FORGET = re.compile(r"^\s*forget\s*:\s*", re.IGNORECASE)


def is_forget(text: str) -> bool:
    """A request to forget: it starts "Forget:" (docs/reference/llm-protocol.md), or names what
    to remove with "(was ...)" beside the word forget."""
    if _FORGET.match(text):
        return True
    return bool(re.search(r"\bforget\b", text, re.IGNORECASE)) and superseded_value(text) is not None


def forgotten_value(text: str) -> str:
    """What a request to forget names: its "(was ...)" quote, else the words after "Forget:"
    (a model wrote "Forget: User's preferred editor is vim", and it was filed as a memory line)."""
    return superseded_value(text) or _FORGET.sub("", text).strip().rstrip(".").strip()


def _named_bullets(lines: Sequence[str], wanted: str) -> set[int]:
    """The indexes of the bullets of ``lines`` that hold the normalised ``wanted`` as words."""
    bullets = ((i, ln) for i, ln in enumerate(lines) if ln.lstrip().startswith(("-", "*")))
    return {i for i, ln in bullets if names(wanted, _normalize_line(ln))}


def forget_not_one(fact_text: str, text: str | None) -> int | None:
    """How many bullets of ``text`` a bare "Forget: X" names when that is not exactly one (then
    ``add_fact`` removes nothing, and the batch must say so); None when it names one line, or
    the fact is no bare forget."""
    if not is_forget(fact_text) or superseded_value(fact_text) is not None:
        return None
    count = len(_named_bullets(lines_with_ends(text or ""), _normalize(forgotten_value(fact_text))))
    return None if count == 1 else count


def add_fact(text: str, path: str, fact_text: str, avoid: Collection[str] = ()) -> str:
    """The file text with one fact filed under its section; a superseded line is replaced, and a
    request to forget removes the line it names and adds nothing."""
    if is_forget(fact_text):
        wanted = _normalize(forgotten_value(fact_text))
        lines = lines_with_ends(text)
        forgotten = _named_bullets(lines, wanted)
        if superseded_value(fact_text) is None and len(forgotten) != 1:
            # A bare "Forget: X" names its line by X's words alone: "Forget: it" or "Forget: tea"
            # matching several lines names none of them, and removes nothing.
            return text
        return "".join(ln for i, ln in enumerate(lines) if i not in forgotten)
    bullet = f"- {_bullet_text(fact_text)}"
    if _normalize(bullet) in {_normalize_line(line) for line in split_lines(text)}:
        return text
    old = superseded_value(fact_text)
    if old:
        wanted = _normalize(old)
        lines = lines_with_ends(text)
        # A line's own trail names values it no longer holds: those never match. Of the lines
        # naming the old value, the one sharing most words with the fact is the one it replaces:
        # "a full run instead of website only" replaces "requested a website-only run", not a
        # fact that merely quotes the user saying "website only".
        named = [
            i
            for i, line in enumerate(lines)
            if line.lstrip().startswith(("-", "*")) and names(wanted, _normalize(split_trail(line)[0]))
        ]
        if named:
            words = set(_normalize(fact_text).split())
            best = max(named, key=lambda i: (len(words & set(_normalize(lines[i]).split())), -i))
            lines[best] = merged_trail(bullet, lines[best]) + "\n"
            return "".join(lines)
    title = section_for(path, fact_text, avoid)
    section = find_section(text, title)
    if section is None:
        if not text.strip():  # an emptied file: no blank line above its first heading
            return f"## {title}\n\n{bullet}\n"
        base = text if text.endswith("\n") else text + "\n"
        return f"{base}\n## {title}\n\n{bullet}\n"
    body = section.text.rstrip("\n")
    # Keep one blank line after the heading when the section is still empty.
    joined = f"{body}\n\n{bullet}\n" if body.count("\n") == 0 else f"{body}\n{bullet}\n"
    trailing = section.text[len(section.text.rstrip("\n")) :]
    replacement = joined + ("\n" if trailing.count("\n") > 1 else "")
    lines = lines_with_ends(text)
    return "".join(lines[: section.start - 1]) + replacement + "".join(lines[section.end :])


def skill_text(name: str, description: str, existing: str | None) -> str:
    if existing is None:
        header = render_frontmatter({"name": slug(name), "description": description})
        return f"{header}\n# {name}\n\n{description}\n"
    return add_fact(existing, "skill", description) if description not in existing else existing


def entity_text(name: str, fact: str, existing: str | None) -> str:
    if existing is None:
        return f"# {name}\n\n- {fact}\n"
    return add_fact(existing, "entity", fact)


def index_text(existing: str | None, name: str, file: str, fact: str) -> str:
    repos = ", ".join(dict.fromkeys(_ABS_PATH.findall(fact)))
    row = f"| {name} | {file} | {repos} |"
    if existing is None or "|" not in existing:
        head = "# Index\n\n" if existing is None else existing.rstrip("\n") + "\n\n"
        return f"{head}| Entity | File | Repos |\n|---|---|---|\n{row}\n"
    if re.search(rf"^\|\s*{re.escape(name)}\s*\|", existing, re.MULTILINE | re.IGNORECASE):
        return existing
    lines = split_lines(existing)
    last_row = max(i for i, line in enumerate(lines) if line.lstrip().startswith("|"))
    lines.insert(last_row + 1, row)
    return "\n".join(lines) + "\n"


def observation_text(existing: str | None, fact: str, today: str) -> str:
    line = f"- {today}: {fact}"
    if existing is None:
        return f"# Observations\n\nProvisional notes: noticed in conversations, not yet confirmed.\n\n{line}\n"
    if _normalize(fact) in _normalize(existing):
        return existing
    return existing.rstrip("\n") + "\n" + line + "\n"


def place_facts(
    facts: Sequence[Fact],
    read: Callable[[str], str | None],
    today: str,
    avoid: Mapping[str, Collection[str]] | None = None,
) -> dict[str, tuple[str | None, str]]:
    """path -> (text before, text after) for every file the facts change, in fact order.

    ``read`` gives a file's current text (None: it does not exist). A fact the file already holds
    changes nothing; a "SOUL.md / USER.md / memory/MEMORY.md" fact for a missing file creates
    nothing (those files come from the templates), while a private scope's missing file is
    created with a short header (``core.scopes.new_file_text``). ``avoid``: per path, the
    sections a fact may not go under (pinned ones).
    """
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        if path not in after:
            before[path] = after[path] = read(path)
        return after[path]

    for fact in facts:
        path = fact.target
        text = current(path)
        if fact.tag == "SKILL":
            after[path] = skill_text(fact.name or "skill", fact.text, text)
        elif fact.tag == "ENTITY":
            after[path] = entity_text(fact.name or "entity", fact.text, text)
            after[layout.INDEX] = index_text(current(layout.INDEX), fact.name or "entity", path, fact.text)
        elif fact.tag == "OBSERVATION":
            after[path] = observation_text(text, fact.text, today)
        elif text is not None or scopes.is_private_file(path):
            base = scopes.new_file_text(path) if text is None else text
            after[path] = add_fact(base, path, fact.text, (avoid or {}).get(path, ()))
    return {p: (before[p], a) for p, a in after.items() if a is not None and a != before[p]}


def unapplied_facts(facts: Sequence[Fact], read: Callable[[str], str | None], today: str) -> tuple[int, ...]:
    """The numbers (1-based) of the facts the placement rules would still add to the files
    ``read`` gives: the ones an edit phase left out (or wrote in words of its own, which these
    rules cannot tell apart)."""
    return tuple(n for n, fact in enumerate(facts, start=1) if place_facts([fact], read, today))
