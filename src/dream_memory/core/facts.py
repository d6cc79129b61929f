"""Phase 1's reply: tagged fact lines (docs/reference/llm-protocol.md, "Dream phase 1: facts").

    [USER] fact          -> USER.md
    [SOUL] fact          -> SOUL.md
    [MEMORY] fact        -> memory/MEMORY.md
    [SKILL] name: desc   -> skills/<name>/SKILL.md
    [ENTITY] name: fact  -> entities/<name>.md and its index.md row
    [OBSERVATION] fact   -> observations.md (dated, provisional)
    [SKIP]               -> nothing worth keeping

Models decorate their answers (bullets, bold tags, code fences, a sentence before the list);
the parser accepts those. Real small models also answer in shapes that are not facts, and the
parser says so instead of storing them (measured with Qwen2.5-Coder-1.5B and SmolLM2-135M):

- ``[USER] [SKIP]`` on every tag, ``[USER] none``: a skip, not a fact;
- several tags on one line (``[USER] a [MEMORY] b``): split into one fact per tag;
- the prompt's own examples copied back (``Timezone is CET (was PST)``) and placeholders
  (``[SKILL] skill-name: ...``): not facts; a reply holding nothing else is refused.

Each fact ends with the history entries it was learnt from, ``[from 12, 14]`` (also read:
``(from entry 12)``, ``[from entries 12-14]``, ``[source: 12]``): the citation is taken off the
fact's text into ``Fact.sources``; which cited cursors are valid is the caller's to judge (it
knows the batch). A fact without one is still a fact.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from dream_memory.core import scopes
from dream_memory.core.bounded import split_lines
from dream_memory.errors import BadReply

TAGS = ("USER", "SOUL", "MEMORY", "SKILL", "ENTITY", "OBSERVATION")
NAMED_TAGS = ("SKILL", "ENTITY")
TARGET_FILES = {"USER": "USER.md", "SOUL": "SOUL.md", "MEMORY": "memory/MEMORY.md", "OBSERVATION": "observations.md"}

_SKIP_WORDS = frozenset({"skip", "none", "nothing", "n/a", "na", "-", "null", "no facts", "nothing new"})
PLACEHOLDER_NAMES = frozenset({"name", "skill-name", "skill name", "entity-name", "entity name", "<name>"})
_PLACEHOLDER_TEXT = re.compile(r"^(?:<[^>]*>|\.\.\.|…|fact|a fact|description|text|tbd|todo)$", re.IGNORECASE)
_ANY_TAG = re.compile(r"(?:\*\*|__)?\[(?:" + "|".join((*TAGS, "SKIP")) + r")\](?:\*\*|__)?", re.IGNORECASE)

_NUMBER = r"#?\d{1,12}(?:\s*(?:-|–|\.\.)\s*#?\d{1,12})?"
_CITATION = re.compile(
    r"\s*[\[(]\s*(?:from|sources?|entr(?:y|ies)|cursors?)\b\s*:?\s*(?:entr(?:y|ies)\s+)?"
    r"(?P<numbers>" + _NUMBER + r"(?:\s*(?:,|;|and|&)\s*(?:entr(?:y|ies)\s+)?" + _NUMBER + r")*)\s*[\])]\s*\.?\s*$",
    re.IGNORECASE,
)
_MAX_RANGE = 1000  # a cited range wider than this is not a list of entries a batch holds


def split_citation(text: str) -> tuple[str, tuple[int, ...]]:
    """``"Lives in Lyon [from 12, 14]"`` -> ``("Lives in Lyon", (12, 14))``; text without a
    citation comes back as it is, with no sources."""
    match = _CITATION.search(text)
    if match is None:
        return text, ()
    cited: list[int] = []
    for part in re.split(r"\s*(?:,|;|and|&)\s*", match["numbers"], flags=re.IGNORECASE):
        bounds = [int(n) for n in re.findall(r"\d+", part)]
        if len(bounds) == 2 and 0 <= bounds[1] - bounds[0] <= _MAX_RANGE:
            cited += range(bounds[0], bounds[1] + 1)
        else:
            cited += bounds
    return text[: match.start()].rstrip(), tuple(dict.fromkeys(cited))


_LINE = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\*\*|__)?\[(?P<tag>[A-Za-z]+)\](?:\*\*|__)?\s*(?P<rest>.*?)\s*$")
_NAME = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9 ._-]{0,80}?)\s*:\s*(?P<text>.+)$")


def slug(name: str) -> str:
    """A file-system-safe name for a skill or entity: lowercase, hyphens, no dots at the ends."""
    value = re.sub(r"[^a-z0-9._-]+", "-", name.strip().lower()).strip("-._")
    return value[:80] or "unnamed"


@dataclass(frozen=True)
class Fact:
    tag: str
    text: str
    name: str | None = None  # SKILL and ENTITY only
    # The history cursors the fact cites (``[from 12, 14]``). Not part of the fact's identity:
    # the same fact learnt twice is one fact with the sources of both.
    sources: tuple[int, ...] = field(default=(), compare=False)
    # The scope of the entries it was learnt from (core.scopes); a private scope's facts go to
    # that scope's two files. Not part of its identity: a batch never mixes scopes.
    scope: str = field(default=scopes.SHARED, compare=False)

    def render(self) -> str:
        return f"[{self.tag}] {self.name}: {self.text}" if self.name else f"[{self.tag}] {self.text}"

    @property
    def target(self) -> str:
        if self.scope != scopes.SHARED:
            user, memory = scopes.scope_files(self.scope)
            return user if self.tag == "USER" else memory
        if self.tag == "SKILL":
            return f"skills/{slug(self.name or '')}/SKILL.md"
        if self.tag == "ENTITY":
            return f"entities/{slug(self.name or '')}.md"
        return TARGET_FILES[self.tag]


# How a fact of another tag reads once it is filed in a private scope's two files: the scope
# has no SOUL.md, skills, entities or observations of its own, and the shared ones are not its
# to write, so the fact keeps its meaning in words instead.
_SCOPED_AS = {
    "SOUL": ("USER", "How the agent should talk with them: {text}"),
    "SKILL": ("MEMORY", "Procedure {name}: {text}"),
    "ENTITY": ("MEMORY", "{name}: {text}"),
    "OBSERVATION": ("MEMORY", "Noticed, not confirmed: {text}"),
}


def in_scope(fact: Fact, scope: str) -> Fact:
    """The fact as a batch of ``scope`` files it: unchanged for the shared scope; in a private
    scope a [USER] fact for its USER.md, everything else for its MEMORY.md ([SOUL] joins USER.md),
    the tag's meaning spelled out in the text (``nix: pinned to 24.05`` for an entity)."""
    if scope == scopes.SHARED:
        return fact
    if fact.tag in _SCOPED_AS:
        tag, shape = _SCOPED_AS[fact.tag]
        return replace(fact, tag=tag, name=None, text=shape.format(name=fact.name or "", text=fact.text), scope=scope)
    return replace(fact, scope=scope)


def normalize(text: str) -> str:
    """Text compared loosely: case, punctuation and spacing ignored."""
    return re.sub(r"[^\w]+", " ", text.casefold()).strip()


def _is_skip_word(text: str) -> bool:
    value = text.strip().strip("*_`.").strip().strip("()[]").strip().casefold()
    return value in _SKIP_WORDS


def _segments(line: str) -> list[str]:
    """A line holding several tags, split before each tag (``[USER] a [MEMORY] b``)."""
    starts = [m.start() for m in _ANY_TAG.finditer(line)]
    if len(starts) <= 1:
        return [line]
    head = line[: starts[0]]
    parts = [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
    return [head + parts[0], *parts[1:]]


@dataclass(frozen=True)
class Facts:
    facts: tuple[Fact, ...]
    skip: bool
    ignored: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()  # tagged lines that are not facts (examples, placeholders), with why
    wordless: tuple[str, ...] = ()  # tagged lines whose text holds no letter or digit (``[SOUL] ,``)

    @property
    def nothing_to_add(self) -> bool:
        return not self.facts


class NoFactsInReply(BadReply):
    """A reply with no usable tagged line; ``wordless``: its tagged lines that held no word."""

    def __init__(self, message: str, *, hint: str | None = None, wordless: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.wordless = wordless


# What is left of the prompt's tag list "([USER], [SOUL], ..., [OBSERVATION]) or [SKIP] alone"
# once a line is split before each tag: ",", ") or". A connective alone says nothing.
_CONNECTIVES = frozenset({"or", "and"})


def _has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit, a lone "or" / "and" aside."""
    return any(w not in _CONNECTIVES and any(ch.isalnum() for ch in w) for w in re.findall(r"\w+", text.casefold()))


def parse_facts(  # noqa: C901, PLR0912, PLR0915 -- one pass over the reply's lines, one `continue` per way a line is not a fact (untagged, skip, unknown tag, no name, placeholder, copied, repeated)
    reply: str, *, examples: Collection[str] = ()
) -> Facts:
    """Parse phase 1's reply; BadReply when it holds neither a usable tagged line nor a skip.

    ``examples`` are fact texts the prompt itself shows: a reply line equal to one of them was
    copied, not learnt.
    """
    facts: list[Fact] = []
    ignored: list[str] = []
    rejected: list[str] = []
    wordless: list[str] = []
    skip = False
    seen: set[tuple[str, str | None, str]] = set()
    copied = {normalize(e) for e in examples}
    lines = [seg for raw in split_lines(reply) for seg in _segments(raw.strip())]
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("```"):
            continue
        match = _LINE.match(line)
        if match is None:
            if _is_skip_word(line) and line.strip("*_`[]() .").casefold() == "skip":
                skip = True  # "SKIP" without its brackets
            else:
                ignored.append(line)
            continue
        tag = match["tag"].upper()
        # html.unescape: a server whose chat template HTML-escapes the prompt (llama-cpp-python's
        # chatml-function-calling) gets "User&#39;s" copied back into the facts.
        rest = html.unescape(match["rest"]).strip().strip("*_").strip()
        rest, cited = split_citation(rest)
        rest = rest.strip().strip("*_").strip()
        if tag == "SKIP" or (tag in TAGS and (_is_skip_word(rest) or "[skip]" in rest.casefold())):
            skip = True
            continue
        if tag not in TAGS or not rest:
            ignored.append(line)
            continue
        if not _has_words(rest):
            # SmolLM2 echoed the prompt's tag list ("[SOUL] ,", "[OBSERVATION] ) or"): filed as
            # facts, ") or" became a dated line of observations.md and the batch said ok.
            wordless.append(line)
            continue
        name: str | None = None
        if tag in NAMED_TAGS:
            named = _NAME.match(rest)
            if named is None:
                ignored.append(line)
                continue
            name, rest = named["name"].strip(), named["text"].strip()
            if name.casefold() in PLACEHOLDER_NAMES:
                rejected.append(f"{line} (the placeholder {name!r} is not a name)")
                continue
            if not _has_words(rest):
                rejected.append(f"{line} (nothing said about {name!r})")
                continue
        if _PLACEHOLDER_TEXT.match(rest):
            rejected.append(f"{line} (a placeholder, not a fact)")
            continue
        if normalize(rest) in copied:
            rejected.append(f"{line} (copied from the prompt's examples)")
            continue
        key = (tag, name.lower() if name else None, rest.lower())
        if key in seen:
            continue
        seen.add(key)
        facts.append(Fact(tag, rest, name, cited))
    if not facts and not skip:
        if rejected:
            raise NoFactsInReply(
                "the analysis reply holds no fact of its own: " + "; ".join(rejected[:3]),
                hint="answer with facts from the conversation, or [SKIP] alone",
                wordless=tuple(wordless),
            )
        raise NoFactsInReply(
            "the analysis reply holds no tagged line" + (" with a word in it" if wordless else ""),
            hint="each line must start with [USER], [SOUL], [MEMORY], [SKILL] name:, [ENTITY] name:, "
            "[OBSERVATION], then the fact in words, or be [SKIP]",
            wordless=tuple(wordless),
        )
    return Facts(tuple(facts), skip and not facts, tuple(ignored), tuple(rejected), tuple(wordless))
