"""A slice of a session as history entries: its summary from the model (one call per part that
fits the model's input), or the slice archived raw when the model fails or answers with nothing
usable."""

from __future__ import annotations

from collections.abc import Sequence

from dream_memory.app.consolidate.options import CONFIGURATION_FAILURES, ConsolidateContext
from dream_memory.app.consolidate.report import ConsolidateReport, SessionReport
from dream_memory.core.chat import check_reply
from dream_memory.core.consolidation import (
    input_budget,
    is_nothing,
    plan_parts,
    raw_entry_texts,
    raw_label,
    summary_entry_texts,
)
from dream_memory.core.prompts import consolidation_messages, summary_problem
from dream_memory.core.sessions import (
    SessionRecord,
    transcript_lines,
)
from dream_memory.errors import BadReply, ModelError
from dream_memory.settings import defaults

# Per transcript line on top of its message's own token count: the "[YYYY-MM-DD HH:MM] role: "
# prefix. Used only to decide whether a slice surely fits one call without counting it again.
_LINE_PREFIX_TOKENS = 12


def redact(ctx: ConsolidateContext, text: str, report: ConsolidateReport) -> str:
    # Redacted before the pending record is written, so the record holds the texts exactly as
    # history.jsonl will (a redactor applied again at the append finds nothing more to change).
    clean, counts = ctx.redactor.redact(text)
    for kind, n in counts.items():
        report.redactions[kind] = report.redactions.get(kind, 0) + n
    return clean


def entry_texts(
    ctx: ConsolidateContext,
    chosen: Sequence[SessionRecord],
    costs: Sequence[int],
    result: SessionReport,
    report: ConsolidateReport,
) -> list[str]:
    """The history entries for a slice: its summary (plus unreadable lines archived raw), or,
    when the model fails or answers with nothing usable, the whole slice archived raw."""
    opts = ctx.options
    readable = [r for r in chosen if r.is_visible]  # internal turns are never sent
    unreadable = [r for r in chosen if not r.is_message]
    kept_raw = [
        text
        for r in unreadable
        for text in raw_entry_texts(transcript_lines(r), f"unreadable session line {r.line_no}", opts.entry_cap_bytes)
    ]
    if not readable:
        return kept_raw
    lines = [line for r in readable for line in transcript_lines(r)]
    count = ctx.counter.count
    fixed = sum(count(str(m["content"])) for m in consolidation_messages([], part=(99, 99)))
    per_call = input_budget(
        opts.context_window, opts.max_tokens, fixed, fallback_window=defaults.MODEL_CONTEXT_WINDOW_FALLBACK
    )
    slice_tokens = sum(c for r, c in zip(chosen, costs, strict=True) if r.is_message)
    if slice_tokens + _LINE_PREFIX_TOKENS * len(lines) <= per_call:
        parts = [lines]
    else:
        parts = plan_parts(lines, per_call, count)
    summaries: list[str] = []
    try:
        for number, part in enumerate(parts, start=1):
            messages = consolidation_messages(part, part=(number, len(parts)) if len(parts) > 1 else None)
            result.llm_calls += 1  # counted when asked: a call that fails after its retries is one too
            reply = ctx.model.complete(messages, tools=None, purpose="consolidation")
            report.usage = report.usage + reply.usage
            text = (check_reply(reply, tools_offered=False).content or "").strip()
            problem = summary_problem(text)
            if problem is not None:  # a reply that is not a summary falls back like a failed one
                raise BadReply(problem)
            if not is_nothing(text):
                summaries.append(text)
    except ModelError as exc:
        if exc.kind in CONFIGURATION_FAILURES:
            # A wrong key or model name fails every slice alike: archiving each one raw would fill
            # history with [RAW] copies of conversations a working model should summarize.
            raise
        result.raw_fallback = True
        result.notes.append(f"the model could not summarize the slice ({exc.message}); archived raw")
        report.errors.append(f"{result.path}: model failed ({exc.kind}): {exc.message}; the slice was archived raw")
        all_lines = [line for r in chosen for line in transcript_lines(r)]
        return raw_entry_texts(all_lines, raw_label(len(readable), len(unreadable)), opts.entry_cap_bytes)
    if len(parts) > 1:
        result.notes.append(f"the slice was summarized in {len(parts)} parts (larger than one call's input budget)")
    if not summaries:
        result.notes.append("the model found nothing worth keeping: no entry written")
    summary = summary_entry_texts("\n".join(summaries), opts.entry_cap_bytes) if summaries else []
    return summary + kept_raw
