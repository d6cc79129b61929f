"""Phase 1, analysis: the batch's history becomes facts (one corrective retry for an unusable
reply). ``ModelSaid`` is the content failure whose report quotes the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.app.dream.budget import prompt_budget
from dream_memory.app.dream.options import DreamContext
from dream_memory.app.dream.prompting import (
    entities_listing,
    file_context,
    guide_in_use,
    history_blocks,
    skills_listing,
)
from dream_memory.app.dream.report import BatchRecord, scrub
from dream_memory.core import layout, scopes
from dream_memory.core.chat import ChatReply, Message, check_reply
from dream_memory.core.dates import Said, absolute_dates, add_trail_date, day_said, has_relative_dates
from dream_memory.core.facts import Fact, Facts, NoFactsInReply, in_scope, parse_facts
from dream_memory.core.history import Batch
from dream_memory.core.markdown import query_terms
from dream_memory.core.placement import is_forget, superseded_value
from dream_memory.core.ports import ChatModel
from dream_memory.core.prompts import (
    PHASE1_EXAMPLES,
    PHASE1_PROTOCOL,
    phase1_correction,
    phase1_messages,
)
from dream_memory.core.provenance import valid_sources
from dream_memory.errors import BadReply

_EXCERPT_CHARS = 300


def phase1(ctx: DreamContext, model: ChatModel, batch: Batch, staging: StagingWorkspace, record: BatchRecord) -> Facts:
    guide, _ = guide_in_use(ctx.root)
    budget = prompt_budget(ctx, guide + PHASE1_PROTOCOL)
    query = query_terms("\n".join(e.content for e in batch.entries), limit=16)
    left_out: list[str] = []
    files = [
        file_context(ctx, staging, path, query, budget=budget.file_tokens, left_out=left_out)
        for path in visible_files(batch.scope)
    ]
    scope = ctx.options.scope_named(batch.scope)
    collected: list[Facts] = []
    blocks = history_blocks(ctx, batch, budget.history_tokens)
    if budget.window is not None:
        if len(blocks) > 1:
            left_out.append(f"history: given in {len(blocks)} parts, one call each")
        record.left_out += [f"contextWindow {budget.window}, analysis: {item}" for item in left_out]
    for history in blocks:
        messages = phase1_messages(
            guide, files, history, skills=skills_listing(ctx.root), entities=entities_listing(ctx.root), scope=scope
        )
        collected.append(_ask_for_facts(model, messages, record.notes))
        # Counted as they arrive: a batch that fails later still reports what phase 1 found.
        record.facts = len({f for result in collected for f in result.facts})
    # A private batch's facts go to its scope's files, whatever phase 1 tagged them.
    found = _with_sources([in_scope(f, batch.scope) for result in collected for f in result.facts], batch, record)
    facts = _dated(found, batch, record, trail=ctx.options.dated_trail)
    rejected = [line for result in collected for line in result.rejected]
    if rejected:
        record.notes.append(f"not facts, left out: {'; '.join(rejected[:5])}")
    # The name too: an entity's or a skill's name reaches the provenance note and the report.
    record.found = tuple(
        replace(f, text=scrub(ctx.redactor, f.text), name=f.name and scrub(ctx.redactor, f.name)) for f in facts
    )
    return Facts(facts, skip=not facts)


def visible_files(scope: str) -> tuple[str, ...]:
    """The memory files phase 1 shows a batch of ``scope``: the shared durable files, and a
    private batch's own two after them; never another scope's."""
    if scope == scopes.SHARED:
        return layout.DURABLE_FILES
    return (*layout.DURABLE_FILES, *scopes.scope_files(scope))


def _with_sources(found: list[Fact], batch: Batch, record: BatchRecord) -> tuple[Fact, ...]:
    """The facts once each (one learnt in several parts of the batch cites all of them), each
    keeping only the cursors of this batch it cites. A citation outside the batch, or none, is
    no reason to drop a fact: its source is unknown, and the report counts it."""
    merged: dict[Fact, list[int]] = {}
    for fact in found:
        cited = merged.setdefault(fact, [])
        cited += [c for c in fact.sources if c not in cited]
    cursors = {e.cursor for e in batch.entries}
    facts: list[Fact] = []
    for number, (fact, cited) in enumerate(merged.items(), start=1):
        kept = replace(fact, sources=tuple(cited))
        inside, outside = valid_sources(kept, cursors)
        if outside:
            record.cited_outside[number] = outside
        facts.append(replace(kept, sources=inside))
    by_cursor = {e.cursor: e for e in batch.entries}
    record.cited = {c: by_cursor[c] for f in facts for c in f.sources}
    unsourced = [n for n, f in enumerate(facts, start=1) if not f.sources]
    if unsourced:
        where = f"outside entries {batch.cursor_from}..{batch.cursor_to}"

        def why(n: int) -> str:
            outside = record.cited_outside.get(n)
            return f"fact {n} cites {', '.join(map(str, outside))}, {where}" if outside else f"fact {n} cites no entry"

        shown = "; ".join(why(n) for n in unsourced[:5])
        record.notes.append(f"{len(unsourced)} fact(s) kept with an unknown source: {shown}")
    return tuple(facts)


def _dated(facts: tuple[Fact, ...], batch: Batch, record: BatchRecord, *, trail: bool) -> tuple[Fact, ...]:
    """Relative dates ("tomorrow", "next Friday") written as the dates they meant when said: the
    day comes from the entries a fact cites (all the batch's when it cites none), so phase 2 and
    every later read see the same day. With ``trail`` (``datedTrail``), a correction's
    "(was X)" gets the day too: "(was X until 2026-04-03)". A fact whose entries carry no date
    keeps its words, and the report says so."""
    by_cursor = {e.cursor: e for e in batch.entries}
    dated: list[Fact] = []
    undated: list[int] = []
    for number, fact in enumerate(facts, start=1):
        relative = has_relative_dates(fact.text)
        correction = trail and not is_forget(fact.text) and superseded_value(fact.text) is not None
        if not relative and not correction:
            dated.append(fact)
            continue
        cited = [by_cursor[c] for c in fact.sources if c in by_cursor] or list(batch.entries)
        day = day_said(fact.text, [Said(e.content, e.timestamp) for e in cited])
        if day is None:
            undated.append(number)
            dated.append(fact)
            continue
        text = absolute_dates(fact.text, day)
        dated.append(replace(fact, text=add_trail_date(text, day) if correction else text))
    if undated:
        shown = ", ".join(map(str, undated[:5]))
        record.notes.append(
            f"{len(undated)} fact(s) keep a relative date or an undated trail"
            f" (their entries carry no date): fact {shown}"
        )
    # Dating can make two facts one ("tomorrow" said on the 3rd, "on 2026-04-04" said later).
    return tuple(dict.fromkeys(dated))


def _whole_lines(reply: ChatReply, notes: list[str]) -> ChatReply:
    """A phase-1 reply cut off by the token limit keeps its complete lines: each is a fact on its
    own, and only the last one can be cut (small models ramble until the limit). A reply with no
    complete line stays cut off, and fails as such."""
    text = reply.content or ""
    if reply.finish_reason != "length" or reply.tool_calls or "\n" not in text.strip():
        return reply
    kept, _, cut = text.rstrip().rpartition("\n")
    notes.append(f"the analysis reply was cut off by the token limit; its last line was left out: {excerpt(cut, 120)}")
    return ChatReply(content=kept, finish_reason="stop", usage=reply.usage)


def _ask_for_facts(model: ChatModel, messages: list[Message], notes: list[str]) -> Facts:
    """One phase-1 call; an unusable reply gets exactly one corrective retry."""
    reply = _whole_lines(model.complete(messages, purpose="dream.phase1"), notes)
    try:
        check_reply(reply, tools_offered=False)
        return _noting_wordless(parse_facts(reply.content or "", examples=PHASE1_EXAMPLES), notes)
    except BadReply as first:
        _note_wordless(getattr(first, "wordless", ()), notes)
        retry = [*messages, {"role": "assistant", "content": reply.content or ""}, phase1_correction(first.message)]
        second = _whole_lines(model.complete(retry, purpose="dream.phase1.retry"), notes)
        check_reply(second, tools_offered=False)
        try:
            return _noting_wordless(parse_facts(second.content or "", examples=PHASE1_EXAMPLES), notes)
        except NoFactsInReply as exc:
            _note_wordless(exc.wordless, notes)
            raise ModelSaid(
                f"the analysis reply could not be read, even after a corrective retry: {exc.message}",
                [excerpt(second.content)],
            ) from exc


def _noting_wordless(facts: Facts, notes: list[str]) -> Facts:
    _note_wordless(facts.wordless, notes)
    return facts


def _note_wordless(lines: Sequence[str], notes: list[str]) -> None:
    """Tagged lines with no word in them are dropped, never filed: the notes count and quote
    them, so a reply that was all punctuation is seen for what it was."""
    if lines:
        shown = "; ".join(excerpt(line, 60) for line in lines[:5])
        notes.append(f"{len(lines)} tagged line(s) with no word in them left out: {shown}")


def excerpt(text: str | None, limit: int = _EXCERPT_CHARS) -> str:
    """A model reply fit for a report: one line, cut, quoted (secrets are redacted by the caller)."""
    flat = " ".join((text or "").split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


class ModelSaid(BadReply):
    """A content failure whose report quotes the model. The quote goes to the report only: the
    state file and commit messages keep the reason alone (a reply is untrusted text)."""

    def __init__(self, message: str, said: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.said = [s for s in said if s]
