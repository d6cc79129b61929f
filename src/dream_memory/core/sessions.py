"""Session files (``sessions/<key>.jsonl``) read tolerantly, and where a session may be cut.

A session file is a metadata line (``{"_type": "metadata", "key": ..., "last_consolidated": N}``)
followed by one chat message per line (``role``, ``content``, ``timestamp``, ``tool_calls``,
``tool_call_id``, ``name``). A live agent may be appending to it while it is read, so only lines
that end in a newline count: an unterminated last line is a write in progress, not data.

Nothing here is dropped. A line that is not JSON, or JSON that is not a message, becomes a record
with a ``problem`` and its raw text, so it can be reported with its line number and archived raw.

A *safe cut* is where the older part of a session can be folded away with the rest still valid
to replay: at the start of a user turn, and never between an assistant's tool call and any of its
tool results.

nanobot 0.3.5 also keeps in a session file what must never reach a model or history.jsonl:
``{"_type": "provider_state", ...}`` lines (a provider's encrypted reasoning state) are left out
altogether, like the metadata line; internal turns (the ``_hidden_history`` checkpoint marker,
``_command`` turns, ``_automation_turn`` triggers) are counted, as nanobot counts them in
``last_archived``, but never shown; a ``_runtime_context`` suffix is cut off a message exactly
as nanobot cuts it for display; a user turn's ``media`` becomes ``[image: path]`` lines.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dream_memory.core.history import format_timestamp, parse_timestamp

METADATA_TYPE = "metadata"
PROVIDER_STATE_TYPE = "provider_state"
# nanobot recognizes a provider_state line by this prefix without decoding it; so do we, so that
# even a damaged one is never archived raw.
_PROVIDER_STATE_PREFIX = re.compile(r'^\s*\{\s*"_type"\s*:\s*"provider_state"\s*[,}]')
# Markers of turns nanobot never shows (session/history_visibility.py, automation_turns.py, the
# `_command` flag its command router sets).
_INTERNAL_MARKERS = (
    ("_hidden_history", "a hidden history checkpoint"),
    ("_automation_turn", "an automation trigger"),
    ("_command", "a command turn"),
)
RUNTIME_CONTEXT_KEY = "_runtime_context"
# Counted once per message on top of its text: role and framing tokens a chat request adds.
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class ToolCallRef:
    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True)
class SessionRecord:
    """One non-blank line after the metadata line: a message, or an unreadable line kept as is."""

    line_no: int  # 1-based physical line number in the file
    raw: str  # the line as on disk, without its newline
    role: str | None = None
    content: str = ""
    timestamp: str | None = None
    tool_calls: tuple[ToolCallRef, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    problem: str | None = None  # why the line is not a message; None for a message
    internal: str | None = None  # a turn nanobot never shows (what it is); counted, never sent

    @property
    def is_message(self) -> bool:
        return self.problem is None

    @property
    def is_visible(self) -> bool:
        """A message that goes into a transcript (not an internal turn)."""
        return self.problem is None and self.internal is None

    @property
    def counts(self) -> bool:
        """Counted in ``last_archived`` / ``last_consolidated``: nanobot counts every JSON object
        line that is neither metadata nor provider state, readable as a message or not."""
        return self.problem is None or self.problem.startswith("not a message (no role")

    @property
    def fingerprint(self) -> str:
        return line_fingerprint(self.raw)

    @property
    def identity(self) -> str:
        """What the line holds, not how it is written: a save that re-serialises the line (other
        line ends, spacing, key order) keeps it; an unreadable line is its raw text."""
        if self.problem is not None:
            return line_fingerprint(self.raw)
        held = (self.role, self.content, self.timestamp, self.tool_calls, self.tool_call_id, self.name, self.internal)
        return line_fingerprint(repr(held))


@dataclass(frozen=True)
class SessionMeta:
    key: str | None = None
    last_consolidated: int | None = None
    line_no: int | None = None  # where the metadata line is; None when the file has none
    last_archived: int | None = None  # nanobot 0.3.5's name for the same watermark
    has_last_archived: bool = False  # the line holds the key (so nanobot 0.3.5 reads that one)

    @property
    def archive_offset(self) -> int | None:
        """What nanobot reads as the session's consolidated prefix: ``last_archived`` when it is
        a number, else ``last_consolidated`` (nanobot 0.3.5's ``_archive_offset``)."""
        return self.last_archived if self.last_archived is not None else self.last_consolidated


@dataclass(frozen=True)
class ParsedSession:
    meta: SessionMeta
    records: tuple[SessionRecord, ...]
    complete_lines: int  # physical lines ending in a newline
    partial_tail: bool  # the file ends in an unterminated line (a write in progress), ignored
    private_lines: int = 0  # provider_state lines, left out of everything

    @property
    def problems(self) -> list[SessionRecord]:
        return [r for r in self.records if not r.is_message]

    @property
    def message_count(self) -> int:
        """How many messages nanobot sees in the file (what ``last_archived`` counts)."""
        return sum(1 for r in self.records if r.counts)

    def messages_before(self, index: int) -> int:
        """How many messages (as nanobot counts them) the records before ``index`` hold."""
        return sum(1 for r in self.records[:index] if r.counts)

    def index_after_messages(self, count: int) -> int:
        """The record index just after the ``count``-th message (clamped to the end)."""
        if count <= 0:
            return 0
        seen = 0
        for index, record in enumerate(self.records):
            if record.counts:
                seen += 1
                if seen == count:
                    return index + 1
        return len(self.records)

    def index_at_line(self, line_no: int) -> int:
        """The index of the first record on physical line ``line_no`` or later."""
        for index, record in enumerate(self.records):
            if record.line_no >= line_no:
                return index
        return len(self.records)


# Bytes that are not UTF-8 are kept in a line's text as these lone surrogates (surrogateescape),
# so an unreadable line can be archived with its original bytes recoverable.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def session_text(data: bytes) -> str:
    """A session file's bytes as text; ``.encode("utf-8", "surrogateescape")`` gives them back."""
    return data.decode("utf-8", errors="surrogateescape")


def readable(raw: str) -> str:
    """A line as it reads, bytes that are not UTF-8 as U+FFFD: what a message holds, and what
    fingerprints hash (so they match those recorded when files were read that way)."""
    if raw.isascii() or not _ESCAPED_BYTE.search(raw):
        return raw
    try:
        return raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that no byte became: not from a file
        return raw


def line_fingerprint(raw: str) -> str:
    return hashlib.sha256(readable(raw).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _text(content: Any) -> str:
    """A message's content as text; content parts keep their text, other parts a placeholder."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                else:
                    pieces.append(f"[{part.get('type', 'part')}]")
            elif isinstance(part, str):
                pieces.append(part)
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False)


def _without_runtime_context(content: Any, marker: Any) -> Any:
    """The content with nanobot's host-only runtime context taken off, exactly as nanobot's
    ``public_history_message`` does: only when the marker describes what is there."""
    if not isinstance(marker, dict) or marker.get("version") != 1:
        return content
    suffix = marker.get("suffix")
    if isinstance(content, str) and isinstance(suffix, str) and suffix:
        if content == suffix:
            return ""
        if content.endswith("\n\n" + suffix):
            return content[: -(len(suffix) + 2)]
        return content
    blocks = marker.get("blocks")
    if isinstance(content, list) and isinstance(blocks, list) and blocks and content[-len(blocks) :] == blocks:
        return content[: -len(blocks)]
    return content


def _with_media(role: str, text: str, content: Any, media: Any) -> str:
    """A user turn's attachments as ``[image: path]`` lines after its text (nanobot's
    breadcrumbs), so a media-only turn does not read as an empty message."""
    if role != "user" or not isinstance(content, str) or not isinstance(media, list):
        return text
    crumbs = "\n".join(f"[image: {path}]" for path in media if isinstance(path, str) and path)
    if not crumbs:
        return text
    return f"{text}\n{crumbs}" if text else crumbs


def _internal(obj: dict[str, Any]) -> str | None:
    for key, what in _INTERNAL_MARKERS:
        marker = obj.get(key)
        if marker is True or (key != "_command" and isinstance(marker, dict)) or (key == "_command" and marker):
            return what
    return None


def _tool_calls(value: Any) -> tuple[ToolCallRef, ...]:
    if not isinstance(value, list):
        return ()
    calls: list[ToolCallRef] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        function = item.get("function") if isinstance(item.get("function"), dict) else item
        name = function.get("name") if isinstance(function, dict) else None
        args: Any = function.get("arguments", "") if isinstance(function, dict) else ""
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        call_id = item.get("id")
        calls.append(ToolCallRef(call_id if isinstance(call_id, str) else None, str(name or "tool"), args))
    return tuple(calls)


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_private_line(raw: str) -> bool:
    """A ``provider_state`` line (nanobot 0.3.5): provider-private state, read by nothing here."""
    return _PROVIDER_STATE_PREFIX.match(raw) is not None


def parse_record(raw: str, line_no: int) -> SessionRecord:
    text = readable(raw).rstrip("\r")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = f"not valid JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else "not valid JSON"
        return SessionRecord(line_no, raw, problem=detail)
    if not isinstance(obj, dict):
        return SessionRecord(line_no, raw, problem=f"not a message (a JSON {type(obj).__name__})")
    role = obj.get("role")
    if not isinstance(role, str) or not role:
        keys = ", ".join(sorted(map(str, obj))[:6])
        return SessionRecord(line_no, raw, problem=f"not a message (no role; keys: {keys})")
    timestamp = obj.get("timestamp")
    content = _without_runtime_context(obj.get("content"), obj.get(RUNTIME_CONTEXT_KEY))
    return SessionRecord(
        line_no=line_no,
        raw=raw,
        role=role,
        content=_with_media(role, _text(content), content, obj.get("media")),
        timestamp=str(timestamp) if isinstance(timestamp, str | int | float) and timestamp != "" else None,
        tool_calls=_tool_calls(obj.get("tool_calls")),
        tool_call_id=_optional_str(obj.get("tool_call_id")),
        name=_optional_str(obj.get("name")),
        internal=_internal(obj),
    )


def _offset(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _metadata(raw: str, line_no: int) -> SessionMeta | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("_type") != METADATA_TYPE:
        return None
    key = obj.get("key")
    return SessionMeta(
        key=key if isinstance(key, str) and key else None,
        last_consolidated=_offset(obj.get("last_consolidated")),
        line_no=line_no,
        last_archived=_offset(obj.get("last_archived")),
        has_last_archived="last_archived" in obj,
    )


def parse_session(text: str) -> ParsedSession:
    """Every complete line of a session file's text. The first non-blank line is the metadata line
    when it says so; blank lines are skipped; an unterminated last line is left for later."""
    pieces = text.split("\n")
    partial = pieces.pop() != ""  # "" when the text ends with a newline (or is empty)
    meta = SessionMeta()
    records: list[SessionRecord] = []
    private = 0
    if pieces:  # a byte order mark an editor put at byte 0 is no part of the first line (its key was lost)
        pieces[0] = pieces[0].removeprefix("\ufeff")
    for index, raw in enumerate(pieces):
        line_no = index + 1
        if not raw.strip():
            continue
        if meta.line_no is None and not records:
            found = _metadata(readable(raw), line_no)
            if found is not None:
                meta = found
                continue
        if is_private_line(raw):
            private += 1
            continue
        records.append(parse_record(raw, line_no))
    return ParsedSession(
        meta=meta, records=tuple(records), complete_lines=len(pieces), partial_tail=partial, private_lines=private
    )


def key_from_file_name(name: str, *, encoded: bool = False) -> str:
    """A key for a session file without one in its metadata: the file name without ``.jsonl``.

    ``encoded``: the name is nanobot's storage key (base64url of the key, unpadded), as in
    nanobot 0.3.5's session store and 0.3.0's ``sessions/``; decoded when it decodes to text.
    Otherwise the name cannot be turned back into the key exactly (``:`` and ``_`` both became
    ``_``).
    """
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    if encoded and re.fullmatch(r"[A-Za-z0-9_-]+", stem):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            return base64.urlsafe_b64decode(stem + "=" * (-len(stem) % 4)).decode("utf-8")
    return stem


# --- cutting ---------------------------------------------------------------------------------------


def safe_cuts(records: Sequence[SessionRecord], start: int) -> list[int]:
    """Indices ``i`` with ``start < i < len(records)`` where records[:i] may be folded away.

    ``records[i]`` is a user message, and no tool result at ``i`` or later answers a tool call made
    before ``i``. A tool call whose result never came does not block (nothing follows it to
    split); a result naming an unknown call does not either.
    """
    # Each answered call blocks the cuts (call, result]; a running sum over a difference array
    # keeps this linear however long the tool runs are.
    delta = [0] * (len(records) + 2)
    call_at: dict[str, int] = {}
    for index, record in enumerate(records):
        for call in record.tool_calls:
            if call.id:
                call_at[call.id] = index
        if record.role == "tool" and record.tool_call_id in call_at:
            delta[call_at[record.tool_call_id] + 1] += 1
            delta[index + 1] -= 1
    cuts: list[int] = []
    open_groups = 0
    for i in range(len(records)):
        open_groups += delta[i]
        if i > start and open_groups == 0 and records[i].is_visible and records[i].role == "user":
            cuts.append(i)
    return cuts


# --- what a message costs and how it reads ---------------------------------------------------------


def message_text(record: SessionRecord) -> str:
    """What an agent sends for this message again: content and tool calls (raw line if unreadable)."""
    if not record.is_message:
        return record.raw
    parts = [record.content]
    parts += [f"{call.name}({call.arguments})" for call in record.tool_calls]
    return "\n".join(p for p in parts if p)


def record_tokens(record: SessionRecord, count: Callable[[str], int]) -> int:
    if record.internal is not None:
        return 0  # never replayed, never summarized
    return count(message_text(record)) + MESSAGE_OVERHEAD_TOKENS


def short_timestamp(value: str | None) -> str | None:
    """``YYYY-MM-DD HH:MM`` for a session timestamp (ISO in nanobot files), or None."""
    if not value:
        return None
    moment = parse_timestamp(value)
    return format_timestamp(moment) if moment is not None else None


_SPEAKER = re.compile(r"[^\w.-]+")


def transcript_lines(record: SessionRecord) -> list[str]:
    """How one record reads in a consolidation transcript.

    ``[2026-04-03 00:02] user: text``, ``assistant: ...``, ``assistant: (tool call) name(args)``,
    ``tool (name): result``. An unreadable line is shown verbatim with its line number.
    Nothing is shortened: the transcript is also what a raw archive keeps.
    """
    when = short_timestamp(record.timestamp)
    stamp = f"[{when}] " if when else ""
    if not record.is_message:
        return [f"{stamp}(session line {record.line_no}, unreadable: {record.problem}) {record.raw}"]
    if record.internal is not None:
        return []
    role = _SPEAKER.sub("_", record.role or "unknown")
    lines: list[str] = []
    if role == "tool":
        label = f"tool ({record.name})" if record.name else "tool"
        lines.append(f"{stamp}{label}: {record.content}")
        return lines
    if record.content or not record.tool_calls:
        lines.append(f"{stamp}{role}: {record.content}")
    lines += [f"{stamp}{role}: (tool call) {call.name}({call.arguments})" for call in record.tool_calls]
    return lines


# --- writing the progress back ------------------------------------------------------------------

PROGRESS_KEYS = ("last_archived", "last_consolidated")


def keys_to_write(line: str, *, nanobot_store: bool) -> tuple[str, ...]:
    """Which watermark keys a session file's metadata line gets: the ones it already holds
    (nanobot 0.3.5 writes both and reads ``last_archived``; 0.3.0 has only ``last_consolidated``),
    else both for a file in nanobot 0.3.5's session store and ``last_consolidated`` elsewhere."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(obj, dict):
        return ()
    present = tuple(k for k in PROGRESS_KEYS if k in obj)
    if present:
        return present
    return PROGRESS_KEYS if nanobot_store else ("last_consolidated",)


def with_progress(line: str, value: int, keys: Sequence[str] = ("last_consolidated",)) -> str | None:
    """The metadata line with each of ``keys`` set to ``value``, every other byte unchanged.

    None when the line is not a metadata object, or holds a key more than once (nested somewhere
    we cannot tell apart safely): the caller then leaves the file alone.
    """
    if _metadata(line, 1) is None:
        return None
    updated = line
    for key in keys:
        pattern = re.compile(rf'("{key}"\s*:\s*)(-?\d+(?:\.\d+)?|null|true|false)')
        matches = list(pattern.finditer(updated))
        if len(matches) > 1 or (not matches and f'"{key}"' in updated):
            return None
        if matches:
            match = matches[0]
            updated = updated[: match.start(2)] + str(value) + updated[match.end(2) :]
        else:
            body = updated.rstrip()
            close = body.rfind("}")
            inner = body[1:close].strip()
            sep = ", " if inner else ""
            updated = body[:close].rstrip() + f'{sep}"{key}": {value}' + body[close:] + updated[len(body) :]
    check = _metadata(updated, 1)
    if check is None:
        return None
    if "last_archived" in keys and check.last_archived != value:
        return None
    if "last_consolidated" in keys and check.last_consolidated != value:
        return None
    return updated


def with_last_consolidated(line: str, value: int) -> str | None:
    """``with_progress`` for ``last_consolidated`` only."""
    return with_progress(line, value, ("last_consolidated",))
