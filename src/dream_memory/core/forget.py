"""What ``dream forget`` does to one text: the rules, with no I/O (docs/forget.md).

A purged value is *replaced*, never its line removed: every line, history entry and cursor stays
where it was, so markdown keeps its shape, history cursors stay consecutive and Dream's cursor
keeps pointing at the same entries. The value becomes ``[forgotten]``. A forgotten entity's own
files (``entities/NAME.md``, ``entities/NAME/...``) and the ``index.md`` rows linking to them go
whole; every other mention of its name is replaced like a value, matched without case as its
files are (``Ledger-api`` at the start of a sentence is the entity ``ledger-api`` too). A
``--purge`` value matches exactly: it is the text itself (a token, a number).

JSON files (history lines, the archive, ``.consolidation.json``, held records, Dream's state) are
changed inside their strings, so a value written escaped (``\\u00e9``, ``\\"``) is found too and
the file stays valid JSON; a line that does not parse is changed as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from dream_memory.core import layout
from dream_memory.core.bounded import newline_lines
from dream_memory.core.history import split_physical_lines
from dream_memory.core.surrogates import json_dumps_utf8, to_bytes
from dream_memory.errors import InputError

FORGOTTEN = "[forgotten]"
# Shorter values would match inside ordinary words all over the store.
MIN_VALUE_LENGTH = 4
MAX_VALUE_LENGTH = 4000

Kind = Literal["value", "entity"]

# A history line's own fields: where the entry sits, when it was written, whose it is. A value
# found there is left (and said so): a rewritten cursor or time makes the line unreadable, and a
# rewritten session key moves the entry into another scope (another person's memory).
PROTECTED_FIELDS = frozenset({"cursor", "timestamp", "session_key"})

# dream-memory's own names: its files and folders, the fields of its JSON files, its commits'
# subjects, trailers and author. A value inside one of them would rename SOUL.md, turn every
# "cursor" key into "[forgotten]" or make Dream's commits read as hand edits, so it is refused.
_OWN_PATHS = (
    layout.SOUL, layout.USER, layout.MEMORY, layout.HISTORY, layout.LEGACY_HISTORY, layout.ARCHIVE_DIR,
    layout.CURSOR, layout.DREAM_CURSOR, layout.DREAM_STATE, layout.DREAM_HELD_DIR, layout.DREAM_JOURNAL,
    layout.CONSOLIDATION, layout.CONSOLIDATION_LOCK, layout.HISTORY_LOCK, layout.HISTORY_LEFT, layout.DREAM_LOCK,
    layout.MIGRATION_MARKER, layout.DREAM_GUIDE, layout.SKILLS_DIR, layout.SESSIONS_DIR, layout.INDEX,
    layout.ENTITIES_DIR, layout.SECTIONS_DIR, layout.OBSERVATIONS, layout.SCOPES_DIR, layout.WORKSPACE_CONFIG,
    layout.FORGOTTEN_RECORD, layout.FORGET_JOURNAL, ".gitignore", "SKILL.md",
)  # fmt: skip
_OWN_WORDS = (
    *PROTECTED_FIELDS, "content", "dream-memory", "dream:", "memory: init", "memory: manual edits",
    "Dream-Range", "Dream-Model", "Dream-Tokens", "Dream-Scope", "Dream-Held", "Dream-Held-Again", "[REDACTED:",
)  # fmt: skip
OWN_NAMES = tuple(dict.fromkeys(part for path in _OWN_PATHS for part in path.split("/"))) + _OWN_WORDS


@dataclass(frozen=True)
class Target:
    """What one purge removes: ``value`` (the text, or the entity's name) everywhere, and for an
    entity its own files."""

    kind: Kind
    value: str

    def drops(self, rel: str) -> bool:
        """True for a workspace path that goes whole: the forgotten entity's own file or folder."""
        if self.kind != "entity":
            return False
        folded = rel.casefold()
        base = f"{layout.ENTITIES_DIR}/{self.value}".casefold()
        return folded == base + ".md" or folded.startswith(base + "/")

    @property
    def fold(self) -> bool:
        """An entity's name matches without case; a purged value exactly."""
        return self.kind == "entity"

    def holds(self, data: bytes) -> bool:
        """True when the bytes hold the value in any of its forms (read as ``holds_text`` reads
        them: bytes that are not UTF-8 as ``surrogateescape`` keeps them)."""
        if not self.fold:
            raw = _raw_forms(self.value)
            if any(form in data for form in raw):
                return True
            if b"\\" not in data and len(raw) == len(_forms(self.value)):
                return False
        return self.holds_text(data.decode("utf-8", errors="surrogateescape"))

    def holds_text(self, text: str) -> bool:
        """True when the text holds the value in any of its forms. Text, not bytes: a line may
        hold half an emoji (a lone high surrogate), which no UTF-8 error handler encodes."""
        return _found(text, self.value, self.fold)


def check_value(value: str, kind: Kind) -> str:
    """The value as given, or an InputError (exit 2) saying why it cannot be purged."""
    what = "the entity name" if kind == "entity" else "the value to purge"
    if not value.strip():
        raise InputError(f"{what} is empty", hint="give the exact text to forget")
    if "\n" in value or "\r" in value:
        raise InputError(f"{what} spans lines", hint="purge each line's text on its own")
    if len(value) < MIN_VALUE_LENGTH:
        raise InputError(
            f"{what} has fewer than {MIN_VALUE_LENGTH} characters: it would match inside ordinary words",
            hint="give the whole value (a phone number, a name with its surname, the token)",
        )
    if len(value) > MAX_VALUE_LENGTH:
        raise InputError(f"{what} is longer than {MAX_VALUE_LENGTH} characters")
    if value in FORGOTTEN:
        raise InputError(f"{what} is part of the marker {FORGOTTEN} that replaces purged values")
    own = next((name for name in OWN_NAMES if value.casefold() in name.casefold()), None)
    if own is not None:
        raise InputError(
            f"{what} {value!r} is part of dream-memory's own name {own!r} (a file, a field of its JSON files, or its "
            "commits' subjects and author): purging it would break the workspace, not only remove the value",
            hint="give a longer text that holds it (the whole name, the sentence), or edit the lines by hand",
        )
    return value


def _forms(value: str) -> tuple[str, ...]:
    """The value as text, and as JSON writes it inside a string (escaped, ASCII or not)."""
    forms = [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]]
    return tuple(dict.fromkeys(forms))


def _raw_forms(value: str) -> tuple[bytes, ...]:
    """The forms as bytes on disk (undecodable bytes as ``surrogateescape`` read them); a form
    holding a surrogate no bytes stand for (half an emoji) is matched as text only."""
    raw: list[bytes] = []
    for form in _forms(value):
        try:
            raw.append(form.encode("utf-8", errors="surrogateescape"))
        except UnicodeEncodeError:
            continue
    return tuple(raw)


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\/")


def _json_unescaped(text: str) -> str:
    """``text`` with JSON's ``\\uXXXX`` (either case of hex) and ``\\/`` escapes read: a writer
    that escapes otherwise than Python (``\\u00EB``, ``https:\\/\\/``) hid the value from a
    search of the forms ``_forms`` knows."""
    if "\\" not in text:
        return text
    return _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else "/", text)


def _patterns(value: str, fold: bool) -> tuple[re.Pattern[str], ...]:
    flags = re.IGNORECASE if fold else 0
    return tuple(re.compile(re.escape(form), flags) for form in _forms(value))


def _found(text: str, value: str, fold: bool) -> bool:
    for seen in dict.fromkeys((text, _json_unescaped(text))):
        if (
            any(form in seen for form in _forms(value))
            if not fold
            else any(p.search(seen) for p in _patterns(value, True))
        ):
            return True
    return False


def replace_text(text: str, value: str, *, fold: bool = False) -> tuple[str, int]:
    """``text`` with every occurrence of ``value`` (in any of its JSON-escaped forms) replaced;
    with ``fold``, in any case."""
    count = 0
    if not fold:
        for form in _forms(value):
            if form in text:
                count += text.count(form)
                text = text.replace(form, FORGOTTEN)
        return text, count
    for pattern in _patterns(value, True):
        text, n = pattern.subn(FORGOTTEN, text)
        count += n
    return text, count


def _in_strings(obj: Any, value: str, fold: bool = False, protected: frozenset[str] = frozenset()) -> tuple[Any, int]:
    """``obj`` with the value replaced inside its string values. Keys are the file's format,
    never changed; nor are the values of the ``protected`` keys of the outermost object."""
    if isinstance(obj, str):
        if fold:
            new, n = re.compile(re.escape(value), re.IGNORECASE).subn(FORGOTTEN, obj)
            return (new, n) if n else (obj, 0)
        return (obj.replace(value, FORGOTTEN), obj.count(value)) if value in obj else (obj, 0)
    if isinstance(obj, list):
        total = 0
        out = []
        for item in obj:
            new, n = _in_strings(item, value, fold)
            out.append(new)
            total += n
        return out, total
    if isinstance(obj, dict):
        total = 0
        result: dict[str, Any] = {}
        for key, item in obj.items():
            new, n = (item, 0) if key in protected else _in_strings(item, value, fold)
            result[key] = new
            total += n
        return result, total
    return obj, 0


_DECODER = json.JSONDecoder()


def replace_json_line(
    raw: str, value: str, *, fold: bool = False, protected: frozenset[str] = frozenset()
) -> tuple[str, int]:
    """One line of a JSONL file with the value replaced inside its string values (keys and the
    ``protected`` fields stay as they are); a line that holds it but does not parse as JSON
    (torn) is changed as text."""
    if not _found(raw, value, fold):
        return raw, 0
    objects: list[Any] = []
    pos, text = 0, raw.rstrip("\r")
    try:
        while pos < len(text):
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                break
            obj, pos = _DECODER.raw_decode(text, pos)
            objects.append(obj)
    except (ValueError, RecursionError):
        return replace_text(raw, value, fold=fold)
    total = 0
    parts: list[str] = []
    for obj in objects:
        new, n = _in_strings(obj, value, fold, protected)
        total += n
        # Escaped when it holds a lone surrogate (undecodable bytes, half an emoji): the line stays
        # UTF-8 and reads back as the same strings, as history.jsonl writes it.
        parts.append(json_dumps_utf8(new if n else obj))
    if not total:  # only in keys, numbers or protected fields: the line stays as written
        return raw, 0
    return "".join(parts) + raw[len(text) :], total


def replace_json_doc(text: str, value: str, *, fold: bool = False) -> tuple[str, int]:
    """A whole JSON file with the value replaced inside its strings (indented as it was)."""
    if not _found(text, value, fold):
        return text, 0
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return replace_text(text, value, fold=fold)
    new, total = _in_strings(obj, value, fold)
    if not total:  # only in keys or numbers: the file stays as written
        return text, 0
    indent = 2 if "\n" in text.strip() else None
    return json_dumps_utf8(new, indent=indent) + ("\n" if text.endswith("\n") else ""), total


def _index_row_links(line: str, target: Target) -> bool:
    """An index.md row that links to the forgotten entity's file (it goes with the file)."""
    if target.kind != "entity":
        return False
    folded = line.casefold()
    return f"{layout.ENTITIES_DIR}/{target.value}.md".casefold() in folded


@dataclass(frozen=True)
class TextChange:
    text: str
    replaced: int  # occurrences replaced
    lines: tuple[int, ...]  # 1-based numbers of the lines changed or removed in the old text
    removed_lines: int = 0


def purge_markdown(text: str, target: Target, *, rel: str) -> TextChange:
    """A text file's lines with the value replaced; index.md rows linking to a forgotten
    entity's file are removed."""
    out: list[str] = []
    changed: list[int] = []
    total = removed = 0
    is_index = rel == layout.INDEX
    for number, line in enumerate(newline_lines(text), start=1):
        if is_index and _index_row_links(line, target):
            changed.append(number)
            removed += 1
            continue
        new, n = replace_text(line, target.value, fold=target.fold)
        if n:
            changed.append(number)
            total += n
        out.append(new)
    return TextChange("".join(out), total, tuple(changed), removed)


def purge_jsonl(text: str, target: Target) -> TextChange:
    out: list[str] = []
    changed: list[int] = []
    total = 0
    for number, line in enumerate(newline_lines(text), start=1):
        body = line.rstrip("\n")
        new, n = replace_json_line(body, target.value, fold=target.fold, protected=PROTECTED_FIELDS)
        if n:
            changed.append(number)
            total += n
        out.append(new + line[len(body) :])
    return TextChange("".join(out), total, tuple(changed))


def purge_text_of(rel: str, text: str, target: Target) -> TextChange:
    """The one rule by file kind: JSONL line by line, JSON as a document, the rest as lines."""
    if rel.endswith(".jsonl"):
        return purge_jsonl(text, target)
    if rel.endswith(".json"):
        new, n = replace_json_doc(text, target.value, fold=target.fold)
        lines = (
            tuple(
                i
                for i, line in enumerate(split_physical_lines(text), start=1)
                if _found(line, target.value, target.fold)
            )
            if n
            else ()
        )
        return TextChange(new, n, lines or ((1,) if n else ()))
    return purge_markdown(text, target, rel=rel)


def purge_bytes(rel: str, data: bytes, target: Target) -> bytes | None:
    """A file's bytes after the purge: None when the file goes whole (a forgotten entity's),
    the same object when nothing changes. Bytes that are not UTF-8 are matched as bytes."""
    if target.drops(rel):
        return None
    holds = target.holds(data)
    if not holds and not (rel == layout.INDEX and target.kind == "entity"):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        flags = re.IGNORECASE if target.fold else 0
        return re.sub(re.escape(to_bytes(target.value)), FORGOTTEN.encode("utf-8"), data, flags=flags)
    change = purge_text_of(rel, text, target)
    if not change.replaced and not change.removed_lines:
        return data
    return change.text.encode("utf-8")


# Keys every `dream run` and `dream consolidate` report holds (docs/reference/report.md).
_REPORT_KEYS = frozenset({"status", "workspace", "version", "model", "usage", "duration_s"})


# A name dream-memory could have written a report under in the top folder (a plain .json name).
_REPORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.json")


def is_dream_report(rel: str, data: bytes) -> bool:
    """A top-level ``.json`` file that is a report dream-memory wrote (``--report``, or its stdout
    sent there): purged like Dream's own files, since it quotes what the run read and wrote."""
    if not _REPORT_NAME.fullmatch(rel):
        return False
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.keys() >= _REPORT_KEYS


def purge_name(rel: str, target: Target) -> str:
    """A path with the value replaced in its names (a file named after the value is renamed)."""
    if not _found(rel, target.value, target.fold):
        return rel
    parts = (replace_text(part, target.value, fold=target.fold)[0] for part in PurePosixPath(rel).parts)
    return str(PurePosixPath(*parts))


def purge_message(message: bytes, target: Target) -> bytes:
    """A commit or tag message (or an identity) with the value replaced."""
    text = message.decode("utf-8", errors="surrogateescape")
    new, n = replace_text(text, target.value, fold=target.fold)
    return new.encode("utf-8", errors="surrogateescape") if n else message


PathFilter = Callable[[str], bool]
