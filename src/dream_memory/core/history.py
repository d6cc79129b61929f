"""history.jsonl as values: entries, tolerant line parsing, cursor allocation, batching,
compaction planning and the legacy HISTORY.md format. No I/O here.

Real files written by nanobot-style agents hold ISO timestamps, gaps between cursors, lines with
two JSON objects glued together, foreign schemas and torn lines. The parser yields every entry it
can and reports everything else with a line number; nothing it reports is ever dropped from disk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from dream_memory.core.surrogates import json_dumps_utf8
from dream_memory.errors import InputError

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M"

ProblemKind = Literal["malformed", "foreign", "repaired"]

# Cursors are positive 64-bit integers, so every other tool (SQLite, jq, JavaScript's BigInt-free
# JSON) reads them back exactly. A larger number makes the object foreign, not an entry.
MAX_CURSOR = 2**63 - 1


@dataclass(frozen=True)
class HistoryEntry:
    cursor: int
    timestamp: str
    content: str
    session_key: str | None = None

    def to_json_line(self) -> str:
        """One line of history.jsonl, readable text, always encodable as UTF-8."""
        obj: dict[str, object] = {"cursor": self.cursor, "timestamp": self.timestamp, "content": self.content}
        if self.session_key is not None:
            obj["session_key"] = self.session_key
        # Undecodable bytes (a non-UTF-8 argv, say) arrive as lone surrogates, which UTF-8
        # cannot encode; escaped, they still round-trip through json.loads unchanged.
        return json_dumps_utf8(obj)


@dataclass(frozen=True)
class LineProblem:
    line_no: int
    kind: ProblemKind
    detail: str

    def describe(self, source: str = "history.jsonl") -> str:
        return f"{source} line {self.line_no}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class ParsedLine:
    line_no: int
    raw: str  # the line as on disk, without its newline
    entries: tuple[HistoryEntry, ...] = ()
    problem: LineProblem | None = None

    @property
    def is_blank(self) -> bool:
        return not self.raw.strip()


def entry_from_object(obj: object) -> HistoryEntry | None:
    """An entry from one decoded JSON value, or None if it is not in our schema."""
    if not isinstance(obj, dict):
        return None
    cursor = obj.get("cursor")
    content = obj.get("content")
    if not isinstance(cursor, int) or isinstance(cursor, bool) or not 0 < cursor <= MAX_CURSOR:
        return None
    if not isinstance(content, str):
        return None
    timestamp = obj.get("timestamp", "")
    session_key = obj.get("session_key")
    return HistoryEntry(
        cursor=cursor,
        timestamp=timestamp if isinstance(timestamp, str) else str(timestamp),
        content=content,
        session_key=session_key if isinstance(session_key, str) else None,
    )


_DECODER = json.JSONDecoder()


def parse_line(raw: str, line_no: int) -> ParsedLine:  # noqa: C901, PLR0912 -- one branch per malformed form of a history line (docs/reference/files.md); a split would scatter the cases
    """Parse one physical line. Glued objects each count, and an entry glued after a torn object
    (``_entry_after_torn``); the rest is reported, not raised."""
    text = raw.rstrip("\r")
    if not text.strip():
        return ParsedLine(line_no, raw)
    objects: list[object] = []
    pos = 0
    end = len(text)
    error: str | None = None
    while pos < end:
        while pos < end and text[pos] in " \t":
            pos += 1
        if pos >= end:
            break
        try:
            obj, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            where = " column" if exc.msg.endswith(" at") else ", column"  # "... starting at column 9"
            error = f"not valid JSON ({exc.msg}{where} {exc.pos + 1})"
            break
        except ValueError as exc:
            # int() refuses numbers of more than 4300 digits, also inside json.loads.
            error = f"not valid JSON ({exc}, column {pos + 1})"
            break
        except RecursionError:
            # The C decoder recurses per nesting level; a line of ten thousand "[" must be
            # reported like any other bad line, not crash the reader.
            error = f"not valid JSON (nested too deeply, column {pos + 1})"
            break
        objects.append(obj)
    glued = None if error is None else _entry_after_torn(text, pos)
    entries: list[HistoryEntry] = []
    foreign = 0
    for obj in objects:
        entry = entry_from_object(obj)
        if entry is None:
            foreign += 1
        else:
            entries.append(entry)
    problem: LineProblem | None = None
    if error is not None:
        count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
        detail = f"{count} read, then {error}" if entries else error
        if glued is not None:
            entries.append(glued)
            detail += f"; the complete entry glued after it (cursor {glued.cursor}) is read"
        problem = LineProblem(line_no, "malformed", detail)
    elif foreign:
        other = next(obj for obj in objects if entry_from_object(obj) is None)
        keys = sorted(map(str, other.keys())) if isinstance(other, dict) else [type(other).__name__]
        problem = LineProblem(line_no, "foreign", f"not a history entry (keys: {', '.join(keys[:6])})")
    elif len(entries) > 1:
        problem = LineProblem(line_no, "repaired", f"{len(entries)} JSON objects on one line, read as separate entries")
    return ParsedLine(line_no, raw, tuple(entries), problem)


# Unescaped, `{"cursor":` can only open an object: inside a JSON string its quote is escaped.
_CURSOR_OBJECT = re.compile(r'\{\s*"cursor"\s*:')


def _entry_after_torn(text: str, torn_at: int) -> HistoryEntry | None:
    """The entry a writer that checks for no newline (nanobot) glued onto a torn line: from the
    last ``{"cursor":`` after the torn object's start, the rest of the line is that one entry."""
    for start in sorted((m.start() for m in _CURSOR_OBJECT.finditer(text, torn_at + 1)), reverse=True):
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if not text[end:].strip():
            return entry_from_object(obj)
    return None


def parse_lines(lines: Iterable[str], first_line_no: int = 1) -> Iterator[ParsedLine]:
    """Line 1 is a file's first: a byte order mark (U+FEFF, as `utf-8-sig` reads it) an editor put
    at byte 0 is no part of it or its ``raw``; U+FEFF opening any other line is that line's text."""
    for offset, raw in enumerate(lines):
        line = raw.rstrip("\n").removeprefix("\ufeff" if offset == 0 and first_line_no == 1 else "")
        yield parse_line(line, first_line_no + offset)


def split_physical_lines(text: str) -> list[str]:
    """Lines of a file's text without their newlines; a missing final newline is tolerated."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def next_cursor(counter: int | None, dream_cursor: int | None, seen_cursors: Iterable[int], count: int = 1) -> int:
    """The cursor for a new entry: above every cursor seen in the file, the counter and Dream's cursor.

    An entry at or below ``.dream_cursor`` would never reach Dream, and real workspaces have
    ``.dream_cursor`` ahead of the last entry, so it takes part in the maximum. ``count`` cursors
    from there must stay within MAX_CURSOR, the bound every reader checks: one past it would be
    written and then read back as a malformed line (InputError instead).
    """
    first = max([0, counter or 0, dream_cursor or 0, *seen_cursors]) + 1
    if first + count - 1 > MAX_CURSOR:
        raise InputError(
            f"no cursor is left for a new entry: the highest cursor in use is {first - 1}, and cursors stop at "
            f"{MAX_CURSOR} (2**63-1)",
            hint="such a cursor comes from a hand-edited or corrupt memory/.cursor, memory/.dream_cursor or "
            "history line: put the real last cursor back",
        )
    return first


# Leading zeros are consumed outside the group, so comparing digit strings by (length, bytes)
# is comparing numbers, without converting each one.
_CURSOR_KEY = re.compile(rb'"cursor"\s*:\s*0*(\d{1,19})(?!\d)')


def max_cursor_bound(data: bytes) -> int:
    """An upper bound of every entry cursor in a history file's bytes, without parsing it.

    In JSON text an unescaped ``"cursor":`` can only be an object key, so this finds the cursor
    of every entry (whatever the line order, glued or torn lines) plus, harmlessly, the
    ``cursor`` keys of foreign objects: allocating above those only leaves a gap. It is ten
    times faster than parsing, which matters because it runs under the lock on every append.
    """
    found = _CURSOR_KEY.findall(data)
    if not found:
        return 0
    longest = len(max(found, key=len))
    best = int(max(m for m in found if len(m) == longest))
    if best <= MAX_CURSOR:
        return best
    return max((n for n in map(int, found) if n <= MAX_CURSOR), default=0)


def parse_cursor_text(text: str) -> int | None:
    """A cursor file's value, or None when the file is empty or corrupt."""
    value = text.strip()
    if not value.isdigit() or not value.isascii() or len(value) > 19:
        return None
    number = int(value)
    return number if number <= MAX_CURSOR else None


# --- timestamps ------------------------------------------------------------------------------

_TS_PATTERNS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")


def parse_timestamp(value: str) -> datetime | None:
    """Both the native ``YYYY-MM-DD HH:MM`` and ISO 8601 (with seconds, fractions, offsets)."""
    text = value.strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        pass
    for pattern in _TS_PATTERNS:
        try:
            return datetime.strptime(text[: len(datetime(2000, 1, 1).strftime(pattern))], pattern)
        except ValueError:
            continue
    return None


def format_timestamp(moment: datetime) -> str:
    return moment.strftime(TIMESTAMP_FORMAT)


def archive_month(entry: HistoryEntry) -> str:
    """``YYYY-MM`` of an entry's timestamp, or ``undated``: names its archive file."""
    moment = parse_timestamp(entry.timestamp)
    return moment.strftime("%Y-%m") if moment else "undated"


# --- batching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    entries: tuple[HistoryEntry, ...]
    tokens: int
    # The scope every entry of the batch belongs to (core.scopes): a batch never mixes two.
    scope: str = "shared"

    @property
    def cursor_from(self) -> int:
        return self.entries[0].cursor

    @property
    def cursor_to(self) -> int:
        return self.entries[-1].cursor


def plan_batches(
    entries: Sequence[HistoryEntry],
    *,
    max_entries: int,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    scope_of: Callable[[str | None], str] | None = None,
) -> list[Batch]:
    """Consecutive batches of at most ``max_entries`` entries and ``max_tokens`` tokens.

    A batch always holds at least one entry: an entry larger than the budget travels alone and is
    given to the model in parts (``split_text``), never cut.

    ``scope_of`` gives an entry's scope from its session key (``ScopeRules.scope_of``): a batch
    ends where the scope changes, so no model call ever sees two scopes' entries together. The
    batches stay consecutive runs of the history, so one cursor still says what is dreamt.
    """
    if max_entries < 1:
        raise ValueError("max_entries must be at least 1")
    batches: list[Batch] = []
    current: list[HistoryEntry] = []
    tokens = 0
    scope = "shared"
    for entry in entries:
        cost = count_tokens(entry.content) + 8
        entry_scope = "shared" if scope_of is None else scope_of(entry.session_key)
        if current and (len(current) >= max_entries or tokens + cost > max_tokens or entry_scope != scope):
            batches.append(Batch(tuple(current), tokens, scope))
            current, tokens = [], 0
        current.append(entry)
        tokens += cost
        scope = entry_scope
    if current:
        batches.append(Batch(tuple(current), tokens, scope))
    return batches


# --- compaction ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPlan:
    keep: tuple[str, ...]  # raw lines staying in history.jsonl, in order
    archive: dict[str, tuple[str, ...]] = field(default_factory=dict)  # month -> raw lines
    archived_cursors: tuple[int, ...] = ()

    @property
    def changes_anything(self) -> bool:
        return bool(self.archived_cursors)


def plan_compaction(lines: Sequence[ParsedLine], *, dream_cursor: int, max_entries: int) -> CompactionPlan:
    """Which lines move to the archive so that at most ``max_entries`` entries stay, if possible.

    Only lines whose every entry Dream has consumed (cursor <= dream_cursor) may move, oldest
    first. Malformed and foreign lines always stay where they are: they are reported, never
    removed. Blank lines are dropped (they hold nothing).
    """
    total = sum(len(p.entries) for p in lines)
    excess = total - max_entries
    keep: list[str] = []
    archive: dict[str, list[str]] = {}
    moved: list[int] = []
    for parsed in lines:
        if parsed.is_blank:
            continue
        movable = (
            excess > 0
            and parsed.entries
            and (parsed.problem is None or parsed.problem.kind == "repaired")
            and all(e.cursor <= dream_cursor for e in parsed.entries)
        )
        if movable:
            archive.setdefault(archive_month(parsed.entries[0]), []).append(parsed.raw)
            moved.extend(e.cursor for e in parsed.entries)
            excess -= len(parsed.entries)
        else:
            keep.append(parsed.raw)
    if not moved:
        return CompactionPlan(keep=tuple(p.raw for p in lines if not p.is_blank))
    return CompactionPlan(
        keep=tuple(keep),
        archive={month: tuple(raws) for month, raws in archive.items()},
        archived_cursors=tuple(moved),
    )


# --- legacy HISTORY.md -----------------------------------------------------------------------


@dataclass(frozen=True)
class LegacyEntry:
    timestamp: str | None  # None: the file gave no date for this entry
    content: str


_TIME = r"\d{1,2}:\d{2}(?::\d{2})?"
_DATE = r"\d{4}-\d{2}-\d{2}"
# nanobot's migration (agent/memory.py, MemoryStore._parse_legacy_history, read to match it): an
# entry starts at a line opening with "[" and a date, or at the first non-blank line after a blank
# line; inside a "[<date HH:MM>] [RAW] ..." entry, transcript lines ("[<date...>] ROLE: ...",
# "ROLE [tools: ...]:") do not start one. Only "[YYYY-MM-DD HH:MM]" gives a timestamp there, and
# is then left out of the content; any other entry keeps its text whole.
_ENTRY_START = re.compile(rf"^\[{_DATE}[^\]]*\]")
_PLAIN_HEADER = re.compile(rf"^\[(?P<stamp>{_DATE} \d{{2}}:\d{{2}})\]\s*")
_RAW_TRANSCRIPT_LINE = re.compile(rf"^\[{_DATE}[^\]]*\]\s+[A-Z][A-Z0-9_]*(?:\s+\[tools:\s*[^\]]+\])?:")
# Header forms whose start we read as the entry's time, beyond nanobot's: a time range
# [2026-03-09 21:04-22:12], a cross-day range [2026-03-09 19:15-03-10 00:27], a day range
# [2026-03-25–2026-04-02] or [2026-03-26/27], a date only [2026-03-12], seconds, "T".
_LEADING_DATE = re.compile(rf"^\[(?P<date>{_DATE})(?:[ T](?P<time>{_TIME}))?")
# An entry that opens with a bare date: "2026-05-31 09:46 User asked ..."
_BARE = re.compile(rf"^(?P<date>{_DATE})(?:[ T](?P<time>{_TIME}))?(?:\s|$)")


def _legacy_timestamp(date: str, time: str | None) -> str:
    if not time:
        return f"{date} 00:00"
    hours, minutes = time.split(":")[:2]
    return f"{date} {int(hours):02d}:{minutes}"


def _is_raw_entry(lines: Sequence[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    match = _PLAIN_HEADER.match(first)
    return bool(match and first[match.end() :].lstrip().startswith("[RAW]"))


def _legacy_chunks(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    chunks: list[list[str]] = []
    current: list[str] = []
    after_blank = False
    for raw_line in lines:
        # A stray "-e " (from `echo -e` under sh) is not part of the text.
        line = "" if raw_line.rstrip() == "-e" else raw_line[3:] if raw_line.startswith("-e ") else raw_line
        starts = bool(current) and (
            (after_blank and bool(line.strip()))
            or (
                _ENTRY_START.match(line) is not None
                and not (_is_raw_entry(current) and _RAW_TRANSCRIPT_LINE.match(line))
            )
        )
        if starts:
            chunks.append(current)
            current = [line]
            after_blank = False
            continue
        current.append(line)
        after_blank = not line.strip()
    if current:
        chunks.append(current)
    return [body for body in ("\n".join(chunk).strip() for chunk in chunks) if body]


def parse_legacy_history(text: str) -> list[LegacyEntry]:
    """Entries of an old HISTORY.md, in file order, split exactly as nanobot's own migration
    splits them (see ``_ENTRY_START``).

    The content is nanobot's too: the text after a ``[YYYY-MM-DD HH:MM]`` header, else the entry
    whole. The timestamp is that header's; for the other header forms (``_LEADING_DATE``) and an
    entry opening with a bare date it is their start, where nanobot has none. An entry without
    any date gets None (the caller uses the file's modification time, as nanobot does).
    """
    result: list[LegacyEntry] = []
    for chunk in _legacy_chunks(text):
        plain = _PLAIN_HEADER.match(chunk)
        if plain is not None:
            rest = chunk[plain.end() :].lstrip()
            result.append(LegacyEntry(plain["stamp"], rest or chunk))
            continue
        dated = _LEADING_DATE.match(chunk) or _BARE.match(chunk)
        stamp = _legacy_timestamp(dated["date"], dated["time"]) if dated is not None else None
        result.append(LegacyEntry(stamp, chunk))
    return result
