"""Phase 1's reply: tagged fact lines (CONTRACT section 8).

    [USER] fact          -> USER.md
    [SOUL] fact          -> SOUL.md
    [MEMORY] fact        -> memory/MEMORY.md
    [SKILL] name: desc   -> skills/<name>/SKILL.md
    [ENTITY] name: fact  -> entities/<name>.md and its index.md row
    [OBSERVATION] fact   -> observations.md (dated, provisional)
    [SKIP]               -> nothing worth keeping

Models decorate their answers (bullets, bold tags, code fences, a sentence before the list);
the parser accepts those and refuses only a reply with no tagged line at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dream_memory.errors import BadReply

TAGS = ("USER", "SOUL", "MEMORY", "SKILL", "ENTITY", "OBSERVATION")
NAMED_TAGS = ("SKILL", "ENTITY")
TARGET_FILES = {"USER": "USER.md", "SOUL": "SOUL.md", "MEMORY": "memory/MEMORY.md", "OBSERVATION": "observations.md"}

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

    def render(self) -> str:
        return f"[{self.tag}] {self.name}: {self.text}" if self.name else f"[{self.tag}] {self.text}"

    @property
    def target(self) -> str:
        if self.tag == "SKILL":
            return f"skills/{slug(self.name or '')}/SKILL.md"
        if self.tag == "ENTITY":
            return f"entities/{slug(self.name or '')}.md"
        return TARGET_FILES[self.tag]


@dataclass(frozen=True)
class Facts:
    facts: tuple[Fact, ...]
    skip: bool
    ignored: tuple[str, ...] = ()

    @property
    def nothing_to_add(self) -> bool:
        return not self.facts


def parse_facts(reply: str) -> Facts:
    """Parse phase 1's reply; BadReply when it holds neither a tagged line nor [SKIP]."""
    facts: list[Fact] = []
    ignored: list[str] = []
    skip = False
    seen: set[tuple[str, str | None, str]] = set()
    for raw in reply.splitlines():
        line = raw.strip()
        if not line or line.startswith("```"):
            continue
        match = _LINE.match(line)
        if match is None:
            ignored.append(line)
            continue
        tag = match["tag"].upper()
        rest = match["rest"].strip().strip("*_").strip()
        if tag == "SKIP":
            skip = True
            continue
        if tag not in TAGS or not rest:
            ignored.append(line)
            continue
        name: str | None = None
        if tag in NAMED_TAGS:
            named = _NAME.match(rest)
            if named is None:
                ignored.append(line)
                continue
            name, rest = named["name"].strip(), named["text"].strip()
        key = (tag, name.lower() if name else None, rest.lower())
        if key in seen:
            continue
        seen.add(key)
        facts.append(Fact(tag, rest, name))
    if not facts and not skip:
        raise BadReply(
            "the analysis reply holds no tagged line",
            hint="each line must start with [USER], [SOUL], [MEMORY], [SKILL] name:, [ENTITY] name:, "
            "[OBSERVATION], or be [SKIP]",
        )
    return Facts(tuple(facts), skip and not facts, tuple(ignored))
