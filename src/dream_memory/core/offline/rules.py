"""The offline engine's rules: which history lines are worth keeping, and as what.

Tags (``[permanent]``, ``[ephemeral]``, ``[user]``, ``[entity] name: ...``), labels
(``Decision: ...``), and the words of a lasting statement (prefers, decided, from now on, the fix)
decide; a kept line goes to SOUL when it is about the assistant, USER when about the user, MEMORY
otherwise. Pure: strings in, a classification out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dream_memory.core import layout, scopes
from dream_memory.core.bounded import split_lines
from dream_memory.core.facts import normalize
from dream_memory.core.placement import is_forget, superseded_value

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_TAG = re.compile(r"^\[(?P<tag>[A-Za-z][A-Za-z _-]*)\]\s*(?P<rest>.*)$")
_LABEL = re.compile(r"^(?P<label>[A-Za-z][A-Za-z ]{2,30}):\s+(?P<rest>.+)$")
_DROP_TAGS = frozenset({"ephemeral", "skip", "transient", "temp", "temporary", "noise", "event", "events"})
_KEEP_TAGS = frozenset(
    {
        "permanent",
        "durable",
        "correction",
        "preference",
        "decision",
        "solution",
        "fact",
        "important",
        "stable",
        "persistent",
    }
)
_DIRECT_TAGS = {"user": "USER", "soul": "SOUL", "memory": "MEMORY", "observation": "OBSERVATION"}
_NAMED_TAGS = {"entity": "ENTITY", "skill": "SKILL"}
_KEEP_LABELS = frozenset(
    {
        "decision",
        "decisions",
        "solution",
        "solutions",
        "user preference",
        "user preferences",
        "preference",
        "preferences",
        "user fact",
        "user facts",
        "correction",
        "corrections",
        "remember",
        "durable",
        "environment",
    }
)
_DROP_LABELS = frozenset({"event", "events", "ephemeral", "skip", "note"})
# Labels that say which section a fact belongs in; kept on the fact until it is filed.
_ROUTING_LABELS = frozenset({"decision", "decisions", "solution", "solutions", "environment"})
_KEEP_WORDS = re.compile(
    r"\b(prefers?|preference|likes|dislikes|hates|always|never|remember|decided|decision|chose|"
    r"switched to|moved to|from now on|call me|address me|name is|timezone|time zone|works as|lives in|"
    r"respond in|reply in|speak in|respond with|reply with|answer with|solution|workaround|fixed by|the fix)\b",
    re.IGNORECASE,
)
_SOUL = re.compile(
    r"^(?:the\s+)?(?:assistant|agent|bot)\b|^(?:respond|reply|answer|speak|talk|write|be)\b|\btone\b|\bvoice\b|\bpersona\b",
    re.IGNORECASE,
)
_USER = re.compile(
    r"\b(user|user's|prefers?|likes|dislikes|name is|call me|timezone|time zone|lives in|works as|"
    r"their|he|she|birthday|pronouns?)\b",
    re.IGNORECASE,
)


def _clean(line: str) -> str:
    text = _BULLET.sub("", line.strip()).strip()
    return text.replace("**", "").strip()


@dataclass(frozen=True)
class Classified:
    tag: str
    text: str
    name: str | None = None


_NOTHING = ("nothing", "none", "skip")


@dataclass
class _Line:
    """A history line as the rules read it: its text (a tag or label taken off as they match)
    and whether a tag or label said to keep it."""

    text: str
    keep: bool = False


# A rule either decides (True, what the line is kept as, or None to leave it out) or passes the
# line on, maybe with its tag taken off, to the next rule: (False, None).
_Verdict = tuple[bool, Classified | None]
_PASS: _Verdict = (False, None)
_LEAVE_OUT: _Verdict = (True, None)


def _empty(line: _Line) -> _Verdict:
    return _LEAVE_OUT if not line.text or line.text.casefold().strip("()") in _NOTHING else _PASS


def _tagged(line: _Line) -> _Verdict:
    """``[tag] text``: a drop tag leaves it out, a file tag (``[user]``, ``[entity] name: ...``)
    decides, a keep tag marks it kept."""
    match = _TAG.match(line.text)
    if not match:
        return _PASS
    tag = match["tag"].strip().casefold()
    line.text = text = match["rest"].strip()
    if tag in _DROP_TAGS:
        return _LEAVE_OUT
    if tag in _DIRECT_TAGS:
        return True, Classified(_DIRECT_TAGS[tag], text) if text else None
    if tag in _NAMED_TAGS:
        name, sep, rest = text.partition(":")
        return True, Classified(_NAMED_TAGS[tag], rest.strip(), name.strip()) if sep and rest.strip() else None
    line.keep = tag in _KEEP_TAGS
    return _PASS


def _labelled(line: _Line) -> _Verdict:
    """``Label: text``: a drop label leaves it out (unless a tag kept it), a keep label keeps it
    (taken off, unless it says which section the fact goes to)."""
    match = _LABEL.match(line.text)
    if not match:
        return _PASS
    label = match["label"].strip().casefold()
    if label in _DROP_LABELS and not line.keep:
        return _LEAVE_OUT
    if label in _KEEP_LABELS:
        line.keep = True
        if label not in _ROUTING_LABELS:
            line.text = match["rest"].strip()
    return _PASS


def _soulish(text: str) -> bool:
    return bool(_SOUL.search(text)) and not re.match(r"^(?:the\s+)?user\b", text, re.IGNORECASE)


def _worth_keeping(line: _Line) -> _Verdict:
    """Kept by a tag or label, a forget request, about the assistant, or a lasting kind of
    statement (a preference, a decision, a fix); anything else is left out."""
    text = line.text
    keep = line.keep or is_forget(text) or _soulish(text) or bool(_KEEP_WORDS.search(text))
    return _PASS if text and keep else _LEAVE_OUT


# In order: the first rule that decides wins.
_RULES: tuple[Callable[[_Line], _Verdict], ...] = (_empty, _tagged, _labelled, _worth_keeping)
# Which file a kept line goes to: the first predicate that holds.
_FILE_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (_soulish, "SOUL"),
    (lambda text: bool(_USER.search(text)), "USER"),
    (lambda text: True, "MEMORY"),
)


def classify(line: str) -> Classified | None:
    """What one history line is worth keeping as, or None to leave it out."""
    reading = _Line(_clean(line))
    for rule in _RULES:
        decided, verdict = rule(reading)
        if decided:
            return verdict
    tag = next(tag for holds, tag in _FILE_RULES if holds(reading.text))
    return Classified(tag, reading.text)


_FILE_TAGS = {layout.USER: "USER", layout.SOUL: "SOUL", layout.MEMORY: "MEMORY"}


def owner_of_superseded(
    item: Classified, memory: dict[str, str | None], earlier: Sequence[tuple[str, str]] = ()
) -> str | None:
    """A correction goes to the file that holds the value it replaces, wherever it was filed:
    in memory already, or in an earlier fact of the same batch."""
    old = superseded_value(item.text) if item.tag in _FILE_TAGS.values() else None
    if not old:
        return None
    wanted = normalize(old)
    for tag, text in reversed(earlier):
        if tag in _FILE_TAGS.values() and wanted in normalize(text):
            return tag
    for path in [*_FILE_TAGS, *(p for p in memory if p not in _FILE_TAGS)]:
        owner = _FILE_TAGS.get(scopes.counterpart(path))  # a scope's USER.md holds [USER] lines too
        lines = split_lines(memory.get(path) or "")
        if owner is not None and any(ln.lstrip().startswith(("-", "*")) and wanted in normalize(ln) for ln in lines):
            return owner
    return None
