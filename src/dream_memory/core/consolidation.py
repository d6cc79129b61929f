"""The Consolidator's rules: the token budget, which slice of a session to fold, how a slice is
divided for the model, and how a raw archive is written when the model cannot summarize.

A lesson of the predecessor: it truncated its input to fit the budget yet moved past the whole
slice, so the tail was never archived. Here nothing is ever cut: a slice too large for one call is
summarized in parts, and a raw archive too large for one entry becomes several entries whose
bodies, joined, give back the transcript exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dream_memory.core.parts import pack, split_text
from dream_memory.core.prompts import NOTHING
from dream_memory.core.sessions import ParsedSession

# Kept free of prompt and reply on every call: token counts are estimates (cl100k is not every
# model's tokenizer) and chat framing costs a few tokens per message.
SAFETY_MARGIN_TOKENS = 1_024
# The largest history entry the Consolidator writes, in UTF-8 bytes. Larger archives become
# several entries. 16 KiB keeps an entry readable in one piece by Dream and by the read side.
ENTRY_CAP_BYTES = 16 * 1024
# A model whose window is too small for even this much transcript per call is misconfigured; the
# floor keeps the part planning finite instead of producing one call per character.
MIN_INPUT_TOKENS = 256
RAW_PREFIX = "[RAW]"


@dataclass(frozen=True)
class Budget:
    tokens: int
    source: str  # for the report: where the number came from


def resolve_budget(
    explicit: int | None, configured: int | None, context_window: int | None, max_tokens: int, *, fallback_window: int
) -> Budget:
    """``--budget`` > ``agents.defaults.consolidate.budgetTokens`` > context window minus max
    completion minus the safety margin (``fallback_window``, a setting, when the window is unknown)."""
    if explicit is not None:
        return Budget(explicit, "--budget")
    if configured is not None:
        return Budget(configured, "agents.defaults.consolidate.budgetTokens")
    window = context_window or fallback_window
    tokens = max(MIN_INPUT_TOKENS, window - max_tokens - SAFETY_MARGIN_TOKENS)
    known = "contextWindow" if context_window else "default context window"
    return Budget(tokens, f"{known} {window} - maxTokens {max_tokens} - margin {SAFETY_MARGIN_TOKENS}")


def input_budget(context_window: int | None, max_tokens: int, prompt_tokens: int, *, fallback_window: int) -> int:
    """Transcript tokens one summarizing call may carry, beside the fixed prompt and the reply."""
    window = context_window or fallback_window
    return max(MIN_INPUT_TOKENS, window - max_tokens - SAFETY_MARGIN_TOKENS - prompt_tokens)


# --- the slice -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlicePlan:
    start: int  # first record of the slice
    end: int  # the cut: first record kept
    tokens_before: int  # unconsolidated tokens before the slice is folded
    tokens_after: int
    forced: bool


@dataclass(frozen=True)
class SliceDecision:
    plan: SlicePlan | None
    reason: str  # why nothing is done (plan None), or why this slice
    tokens: int  # unconsolidated tokens


def plan_slice(costs: Sequence[int], cuts: Sequence[int], start: int, budget: int, *, force: bool) -> SliceDecision:
    """The oldest safe slice to fold, from ``start`` to one of ``cuts`` (ascending record indices).

    Over budget: the earliest cut that leaves at most half the budget unconsolidated, or, when no
    cut does, the last one (as much as can safely go). ``force``: the last cut, regardless of the
    budget. ``costs[i]`` is record i's token count (entries before ``start`` are ignored).
    """
    total = sum(costs[start:])
    if start >= len(costs):
        return SliceDecision(None, "nothing new since the last consolidation", total)
    if not force and total <= budget:
        return SliceDecision(None, f"within budget ({total} of {budget} tokens)", total)
    if not cuts:
        return SliceDecision(
            None,
            "no safe cut: the unconsolidated messages are a single turn (a cut is only made at the "
            "start of a user turn, never inside a tool-call group)",
            total,
        )
    end = cuts[-1]
    if not force:
        target = budget // 2
        remaining = total
        index = start
        for cut in cuts:
            remaining -= sum(costs[index:cut])
            index = cut
            if remaining <= target:
                end = cut
                break
    folded = sum(costs[start:end])
    if force:
        reason = "forced"
    elif total - folded <= budget // 2:
        reason = f"over budget ({total} of {budget} tokens)"
    else:
        reason = f"over budget ({total} of {budget} tokens); the last safe cut leaves {total - folded}"
    plan = SlicePlan(start=start, end=end, tokens_before=total, tokens_after=total - folded, forced=force)
    return SliceDecision(plan, reason, total)


# --- parts for the model ---------------------------------------------------------------------------


def plan_parts(lines: Sequence[str], max_tokens: int, count: Callable[[str], int]) -> list[list[str]]:
    """Transcript lines grouped into parts of at most ``max_tokens`` each, in order.

    A line larger than a part is divided (``split_text``: the pieces join back to the line), so no
    part is ever cut short and no text is left out. A line costs its tokens and one for its newline.
    """
    return pack(
        lines, max_tokens, lambda line: count(line) + 1, lambda line: split_text(line, max(1, max_tokens - 1), count)
    )


def is_nothing(reply: str) -> bool:
    """Whether a summary says there is nothing worth keeping (``(nothing)``, maybe as a bullet)."""
    text = reply.strip().strip("-*• \t").strip().rstrip(".").casefold()
    return text in (NOTHING, NOTHING.strip("()"))


# --- entries ---------------------------------------------------------------------------------------


def split_utf8(text: str, cap_bytes: int) -> list[str]:
    """Pieces of at most ``cap_bytes`` UTF-8 bytes each, cut after a newline where possible and
    never inside a character. ``"".join(pieces) == text``."""
    if cap_bytes < 4:
        raise ValueError("cap_bytes must be at least 4 (one UTF-8 character)")
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        size = len(line.encode("utf-8", "surrogatepass"))
        if size > cap_bytes:
            if current:
                pieces.append("".join(current))
                current, used = [], 0
            pieces.extend(_split_line_bytes(line, cap_bytes))
            continue
        if current and used + size > cap_bytes:
            pieces.append("".join(current))
            current, used = [], 0
        current.append(line)
        used += size
    if current:
        pieces.append("".join(current))
    return pieces


def _split_line_bytes(line: str, cap_bytes: int) -> list[str]:
    data = line.encode("utf-8", "surrogatepass")
    pieces: list[str] = []
    start = 0
    while start < len(data):
        end = min(len(data), start + cap_bytes)
        # Back off to a character boundary: UTF-8 continuation bytes look like 0b10xxxxxx.
        while end < len(data) and end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        pieces.append(data[start:end].decode("utf-8", "surrogatepass"))
        start = end
    return pieces


def raw_label(messages: int, unreadable: int = 0) -> str:
    label = f"{messages} message{'s' if messages != 1 else ''}"
    if unreadable:
        label += f", {unreadable} unreadable line{'s' if unreadable != 1 else ''}"
    return label


def raw_entry_texts(lines: Sequence[str], label: str, cap_bytes: int = ENTRY_CAP_BYTES) -> list[str]:
    """``[RAW] <label>`` followed by the transcript lines, as one entry or as several of at most
    ``cap_bytes`` each (``[RAW] <label> (part i of n)``); the bodies after each header line,
    joined, are the transcript exactly."""
    body = "\n".join(lines)
    single = f"{RAW_PREFIX} {label}\n{body}"
    if len(single.encode("utf-8", "surrogatepass")) <= cap_bytes:
        return [single]
    # Room for the longest header this split can need ("(part 9999 of 9999)" and the newline).
    header_room = len(f"{RAW_PREFIX} {label} (part 99999 of 99999)\n".encode())
    pieces = split_utf8(body, max(64, cap_bytes - header_room))
    total = len(pieces)
    return [f"{RAW_PREFIX} {label} (part {i} of {total})\n{piece}" for i, piece in enumerate(pieces, start=1)]


def raw_body(entry_text: str) -> str:
    """The transcript text of one raw entry (everything after its header line)."""
    return entry_text.split("\n", 1)[1] if "\n" in entry_text else ""


def summary_entry_texts(summary: str, cap_bytes: int = ENTRY_CAP_BYTES) -> list[str]:
    """A summary as one entry, or as several on line boundaries when it exceeds the cap."""
    text = summary.strip("\n")
    if len(text.encode("utf-8", "surrogatepass")) <= cap_bytes:
        return [text]
    return [piece.rstrip("\n") for piece in split_utf8(text, cap_bytes) if piece.strip()]


# --- progress --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """How far one session file is consolidated (an item of memory/.consolidation.json).

    Positions are physical line numbers, not byte offsets: agents rewrite the metadata line
    (``updated_at``) on every save, which moves every byte after it but no line.
    """

    key: str
    next_line: int  # first physical line not consolidated yet
    messages: int  # readable messages before next_line: the value for last_consolidated
    last_line: int = 0  # the last consolidated line (0: none), and its fingerprint, to notice
    last_sha: str = ""  # a file that was rewritten or reset under us
    updated: str = ""
    # What the last consolidated line holds (SessionRecord.identity): finds it again after a
    # save moved or re-wrote the lines (a provider_state line added, CRLF turned into LF).
    last_id: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "next_line": self.next_line,
            "messages": self.messages,
            "last_line": self.last_line,
            "last_sha": self.last_sha,
            "updated": self.updated,
            "last_id": self.last_id,
        }

    @classmethod
    def from_json(cls, data: object) -> Progress | None:
        if not isinstance(data, dict):
            return None
        try:
            progress = cls(
                key=str(data["key"]),
                next_line=int(data["next_line"]),
                messages=int(data["messages"]),
                last_line=int(data.get("last_line", 0)),
                last_sha=str(data.get("last_sha", "")),
                updated=str(data.get("updated", "")),
                last_id=str(data.get("last_id", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return progress if progress.next_line >= 1 and progress.messages >= 0 else None


@dataclass(frozen=True)
class EntryOrigin:
    """Where an entry ``dream consolidate`` appended comes from (``dream why`` shows it): the
    session file and the messages of it the entry summarises, 1-based and inclusive, counted as
    ``last_consolidated`` counts them."""

    session: str  # the progress key (session file path)
    first: int
    last: int

    @property
    def messages(self) -> str:
        return f"{self.first}..{self.last}"

    def to_json(self) -> dict[str, object]:
        return {"session": self.session, "messages": [self.first, self.last]}

    @classmethod
    def from_json(cls, data: object) -> EntryOrigin | None:
        if not isinstance(data, dict) or not isinstance(data.get("session"), str):
            return None
        bounds = data.get("messages")
        if not isinstance(bounds, list) or len(bounds) != 2 or not all(type(b) is int for b in bounds):
            return None
        return cls(data["session"], bounds[0], bounds[1]) if 1 <= bounds[0] <= bounds[1] else None


@dataclass(frozen=True)
class PlannedEntry:
    content: str
    timestamp: str | None

    def to_json(self) -> dict[str, object]:
        return {"content": self.content, "timestamp": self.timestamp}


@dataclass(frozen=True)
class Pending:
    """A slice whose entries are being appended: written before the append, cleared with the
    progress update, so a crash in between is finished by the next run without the model."""

    session: str  # the progress key (session file path)
    key: str  # session_key of the entries
    after_cursor: int  # every cursor in history.jsonl was at most this before the append
    entries: tuple[PlannedEntry, ...]
    progress: Progress  # where the session stands once the entries are in
    messages_archived: int
    raw_fallback: bool
    first_message: int = 0  # the slice's first message (its last is progress.messages); 0: unknown

    def to_json(self) -> dict[str, object]:
        return {
            "session": self.session,
            "key": self.key,
            "after_cursor": self.after_cursor,
            "entries": [e.to_json() for e in self.entries],
            "progress": self.progress.to_json(),
            "messages_archived": self.messages_archived,
            "raw_fallback": self.raw_fallback,
            "first_message": self.first_message,
        }

    def origin(self) -> EntryOrigin | None:
        """Where the slice's entries come from, when the record knows its first message."""
        first, last = self.first_message, self.progress.messages
        return EntryOrigin(self.session, first, last) if 1 <= first <= last else None

    @classmethod
    def from_json(cls, data: object) -> Pending | None:
        if not isinstance(data, dict):
            return None
        progress = Progress.from_json(data.get("progress"))
        raw_entries = data.get("entries")
        if progress is None or not isinstance(raw_entries, list):
            return None
        entries: list[PlannedEntry] = []
        for item in raw_entries:
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                return None
            stamp = item.get("timestamp")
            entries.append(PlannedEntry(item["content"], stamp if isinstance(stamp, str) else None))
        try:
            return cls(
                session=str(data["session"]),
                key=str(data["key"]),
                after_cursor=int(data["after_cursor"]),
                entries=tuple(entries),
                progress=progress,
                messages_archived=int(data.get("messages_archived", 0)),
                raw_fallback=bool(data.get("raw_fallback", False)),
                first_message=int(data.get("first_message", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


def match_entries(planned: Sequence[str], found: Sequence[str]) -> list[int | None]:
    """For each planned content, the index in ``found`` of the entry holding it, or None.

    ``found`` is what history holds after the pending record's cursor for the same session, in
    cursor order; planned entries were appended in order, so they are matched in order.
    """
    matches: list[int | None] = []
    position = 0
    for content in planned:
        try:
            at = found.index(content, position)
        except ValueError:
            matches.append(None)
            continue
        matches.append(at)
        position = at + 1
    return matches


@dataclass(frozen=True)
class Resume:
    index: int | None  # first unconsolidated record; None: the file no longer matches the progress
    first_seen: bool = False
    note: str | None = None
    warning: str | None = None  # something about the file the user should know


def resume_point(session: ParsedSession, progress: Progress | None) -> Resume:
    """Where consolidation of ``session`` continues.

    First sight: after the session's own watermark (``last_archived``, else
    ``last_consolidated``: what nanobot reads). Later: after our recorded line, provided the last
    consolidated line is still there unchanged (else None: the file was rewritten or reset).
    When the session's own watermark has moved past our progress, the agent has consolidated
    those messages itself, and we follow it rather than archive them twice. A watermark beyond
    the session's end is read as 0, as nanobot reads it, with a warning.
    """
    own = session.meta.archive_offset
    field = "last_archived" if session.meta.last_archived is not None else "last_consolidated"
    count = session.message_count
    warning = None
    if own is not None and own > count:
        warning = (
            f"{field} {own} is beyond the {count} messages in the file; read as 0, as nanobot reads it "
            "(the whole session counts as not consolidated)"
        )
        own = 0
    if progress is None:
        return Resume(session.index_after_messages(own or 0), first_seen=True, warning=warning)
    moved: str | None = None
    if progress.last_line > 0:
        at = session.index_at_line(progress.last_line)
        record = session.records[at] if at < len(session.records) else None
        if record is None or record.line_no != progress.last_line or record.fingerprint != progress.last_sha:
            found = _moved(session, progress)
            if found is None:
                return Resume(None, warning=warning)
            index = found + 1
            moved = (
                f"the session file was re-written since the last consolidation (lines moved or re-serialised): "
                f"the last consolidated message is now line {session.records[found].line_no}; continuing after it"
            )
    if moved is None:
        index = session.index_at_line(progress.next_line)
    # After a re-write moved the lines, the watermark this consolidator wrote (--update-sessions)
    # counts the messages as they were: only one beyond it is the agent's own consolidation.
    if own is not None and own > session.messages_before(index) and (moved is None or own > progress.messages):
        ahead = session.index_after_messages(own)
        if ahead > index:
            return Resume(
                ahead,
                note=f"the session's own {field} ({own}) is ahead of this consolidator's progress "
                f"({session.messages_before(index)}): those messages were consolidated elsewhere; following it",
                warning=warning,
            )
    return Resume(index, note=moved, warning=warning)


def _moved(session: ParsedSession, progress: Progress) -> int | None:
    """The record index of the last consolidated line in a file re-written since, found by what it
    holds; None when it is not there (a reset) or cannot be told from another (then the caller
    starts from the session's own watermark, as before). Of several lines holding the same, the
    one with the recorded number of messages up to it."""
    if not progress.last_id:
        return None
    same = [i for i, r in enumerate(session.records) if r.identity == progress.last_id]
    if len(same) > 1:
        same = [i for i in same if session.messages_before(i + 1) == progress.messages]
    return same[0] if len(same) == 1 else None


def progress_at(session: ParsedSession, key: str, end: int, updated: str) -> Progress:
    """The progress record for ``session`` consolidated up to record index ``end`` (>= 1)."""
    if end <= 0 or not session.records:
        next_line = session.records[0].line_no if session.records else session.complete_lines + 1
        return Progress(key=key, next_line=next_line, messages=0, updated=updated)
    last = session.records[end - 1]
    next_line = session.records[end].line_no if end < len(session.records) else last.line_no + 1
    return Progress(
        key=key,
        next_line=next_line,
        messages=session.messages_before(end),
        last_line=last.line_no,
        last_sha=last.fingerprint,
        updated=updated,
        last_id=last.identity,
    )
