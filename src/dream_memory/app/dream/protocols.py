"""Phase 2, edits: the facts go into memory files by the preset's edit protocol (``tools``,
``text``, ``facts``, or ``auto`` falling from one to the next), into the batch's staging copy.
Facts found and no edit applied is a content failure, never "nothing new".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.app.dream.budget import prompt_budget
from dream_memory.app.dream.options import DreamContext
from dream_memory.app.dream.phases import ModelSaid, excerpt, phase1
from dream_memory.app.dream.prompting import file_context
from dream_memory.app.dream.report import BatchRecord
from dream_memory.core import layout, policy
from dream_memory.core.agent_loop import (
    LoopResult,
    ScopedExecutor,
    TargetedExecutor,
    place_with_rules,
    run_agent_loop,
    run_text_loop,
)
from dream_memory.core.facts import Fact, Facts
from dream_memory.core.history import Batch, format_timestamp
from dream_memory.core.markdown import query_terms
from dream_memory.core.placement import forget_not_one, place_facts, unapplied_facts
from dream_memory.core.ports import ChatModel, Redactor
from dream_memory.core.prompts import (
    PHASE2_SYSTEM,
    PHASE2_TEXT_SYSTEM,
    TEXT_EXAMPLE_LINE,
    dream_tools,
    phase2_messages,
    with_scope_rule,
    with_trail_rule,
)
from dream_memory.core.provenance import DeclaringExecutor
from dream_memory.errors import BadReply


class Protocols:
    """Which edit protocol a batch starts with. ``auto`` starts with tools and, once a reply
    came back with no tool call in any form, starts later batches of the run with text."""

    def __init__(self, configured: str) -> None:
        self.configured = configured
        self.start = "tools" if configured == "auto" else configured

    def fell_back(self, protocol: str) -> None:
        if self.configured == "auto":
            self.start = protocol


@dataclass
class _Edits:
    """Phase 2 of one batch: the facts, the files they may go to, and why each protocol tried
    applied nothing (with what the model said, for the report)."""

    ctx: DreamContext
    model: ChatModel
    facts: Facts
    targets: list[str]
    staging: StagingWorkspace
    executor: ScopedExecutor
    today: str
    record: BatchRecord
    why: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)


def dream_batch(
    ctx: DreamContext,
    model: ChatModel,
    batch: Batch,
    staging: StagingWorkspace,
    record: BatchRecord,
    *,
    protocols: Protocols,
) -> None:
    """Both phases for one batch, into ``staging``; ``record`` is filled in as they go.

    Raises BadReply (a content failure) when phase 1 found facts and phase 2 applied none while
    some fact is not in memory yet: a batch that did not do its work is never "nothing new".
    """
    facts = phase1(ctx, model, batch, staging, record)
    if facts.nothing_to_add:
        return
    targets = list(dict.fromkeys(f.target for f in facts.facts))
    if any(f.tag == "ENTITY" for f in facts.facts):
        targets.append(layout.INDEX)
    declaring = DeclaringExecutor(staging)  # which facts each applied edit says it applies
    targeted = TargetedExecutor(declaring, targets, lambda path: _target_hint(path, facts.facts))
    # Outermost: an edit naming another scope's file is refused with where the fact may go.
    scoped = ScopedExecutor(targeted, batch.scope)
    edits = _Edits(ctx, model, facts, targets, staging, scoped, format_timestamp(ctx.clock.now())[:10], record)
    record.declared = declaring.declared
    try:
        _edit_until_changed(edits, protocols)
        _check_applied(edits)
    finally:
        _count_refusals(record, scoped.refused)


def _count_refusals(record: BatchRecord, refused: Sequence[str]) -> None:
    """The batch's refused cross-scope edits, counted in the report and named in a note."""
    record.scope_refusals = len(refused)
    if refused:
        paths = ", ".join(dict.fromkeys(refused))
        record.notes.append(
            f"refused {len(refused)} edit(s) of another scope's file ({paths}): "
            f"scope {record.scope} writes only its own files"
        )


def _edit_until_changed(edits: _Edits, protocols: Protocols) -> str:
    """Run the batch's protocol, and under ``auto`` the next ones, until one changes a file or
    none is left; returns the protocol that ran last."""
    protocol = protocols.start
    while True:
        edits.record.protocol = protocol
        loop = _try(edits, protocol)
        for dialect, n in loop.dialects.items():
            edits.record.dialects[dialect] = edits.record.dialects.get(dialect, 0) + n
        edits.record.tool_calls += loop.tool_calls
        if loop.stop != "done":
            edits.record.notes.append(f"{protocol} edits stopped: {loop.stop} after {loop.tool_calls} call(s)")
        if edits.staging.changes():
            return protocol
        following = _nothing_applied(edits, protocol, loop)
        if following is None:
            return protocol
        if protocol == "tools" and following == "text":
            protocols.fell_back("text")
        protocol = following


def _try(edits: _Edits, protocol: str) -> LoopResult:
    try:
        return _phase2(edits, protocol)
    except BadReply as exc:
        if edits.ctx.options.edit_protocol != "auto" or protocol == "facts":
            raise
        # An empty or cut-off edit reply (Qwen behind its own template answered nothing) is
        # one more way of not editing: auto moves on instead of failing the batch.
        loop = LoopResult(tool_less=True, errors=[exc.message])
        loop.replies.append(f"({exc.message})")
        return loop


def _nothing_applied(edits: _Edits, protocol: str, loop: LoopResult) -> str | None:
    """Note why ``protocol`` applied nothing; the protocol ``auto`` falls back to, or None."""
    reason, quote = _why_nothing(protocol, loop, edits.ctx.redactor)
    edits.why.append(reason)
    edits.said.append(f"{protocol}: {quote}" if quote else "")
    following = _fallback(edits.ctx.options.edit_protocol, protocol, loop)
    if following is not None:
        said = edits.said[-1]
        quoted = f"; it answered {said.partition(': ')[2]}" if said else ""
        edits.record.notes.append(
            f"{protocol} protocol applied nothing ({reason}{quoted}); falling back to {following}"
        )
    return following


def _check_applied(edits: _Edits) -> None:
    """Nothing changed is fine only when every fact is in memory already (the placement rules
    would add none); otherwise the batch failed on its content."""
    facts, record = edits.facts, edits.record
    for number, fact in enumerate(facts.facts, start=1):
        # Removing nothing, it reads as "already in memory": said, never passed over. By number,
        # not quoted: these facts are not redacted (record.found holds them redacted).
        count = forget_not_one(fact.text, edits.staging.disk_text(fact.target))
        if count is not None:
            named = "no line" if count == 0 else f"{count} lines"
            record.notes.append(
                f"fact {number}, a Forget: without (was ...), names {named} of {fact.target}, not one: "
                "nothing was removed for it"
            )
    pending = place_facts(facts.facts, edits.staging.read, edits.today)
    if not edits.staging.changes():
        if not pending:
            record.notes.append("every fact is already in memory")
            return
        raise ModelSaid(
            f"phase 1 found {len(facts.facts)} fact(s) but phase 2 applied none: " + "; then ".join(edits.why),
            edits.said,
            hint="try editProtocol 'auto' or 'facts' for a model that cannot edit (docs/configuration.md)",
        )
    # Not a note: landing holds the facts left out for review (app/dream/unapplied.py). By
    # number: record.found holds them redacted, which the facts here are not.
    if pending:  # one placement of them all says whether any is left out: most batches stop here
        record.unapplied = unapplied_facts(facts.facts, edits.staging.read, edits.today)


def _fallback(configured: str, protocol: str, loop: LoopResult) -> str | None:
    """``auto``'s next protocol after one that applied nothing: text after a tool-less reply,
    the placement rules after anything else."""
    if configured != "auto" or protocol == "facts":
        return None
    if protocol == "tools" and loop.tool_less:
        return "text"
    return "facts"


def _why_nothing(protocol: str, loop: LoopResult, redactor: Redactor) -> tuple[str, str]:
    """Why a protocol applied nothing, and what the model last said (quoted, cut, redacted)."""
    said = redactor.redact(excerpt(loop.replies[-1]))[0] if loop.replies else ""
    if protocol == "facts":
        return "the placement rules changed nothing: " + (loop.errors[-1] if loop.errors else "no change"), ""
    if loop.tool_calls == 0:
        what = "no tool call" if protocol == "tools" else "no SEARCH/REPLACE block"
        return f"{protocol}: the model answered with {what}", said
    if loop.edits_rejected and not loop.edits_applied:
        last = redactor.redact(loop.errors[-1] if loop.errors else "no detail")[0]
        return f"{protocol}: every edit was refused ({loop.edits_rejected}); last: {last}", said
    if loop.stop != "done":
        return f"{protocol}: the edit loop ended ({loop.stop}) after {loop.tool_calls} call(s) with no valid edit", said
    return f"{protocol}: {loop.tool_calls} call(s) changed nothing", said


def _target_hint(path: str, facts: Sequence[Fact]) -> str:
    targets = list(dict.fromkeys(f.target for f in facts))
    if len(targets) == 1:
        return f"Put the facts in {targets[0]}."
    return "Each fact goes to the file it is listed under: " + ", ".join(targets) + "."


def _phase2(edits: _Edits, protocol: str) -> LoopResult:
    ctx, facts, staging, executor = edits.ctx, edits.facts, edits.staging, edits.executor
    if protocol == "facts":
        return place_with_rules(facts.facts, executor, staging.read, edits.today)
    system = PHASE2_TEXT_SYSTEM if protocol == "text" else PHASE2_SYSTEM
    system = with_trail_rule(system) if ctx.options.dated_trail else system
    system = with_scope_rule(system, ctx.options.scope_named(executor.scope))
    budget = prompt_budget(ctx, system)
    query = query_terms("\n".join(f.text for f in facts.facts), limit=16)
    left_out: list[str] = []
    contexts = [
        file_context(ctx, staging, path, query, budget=budget.file_tokens, left_out=left_out) for path in edits.targets
    ]
    if budget.window is not None:
        edits.record.left_out += [f"contextWindow {budget.window}, edits: {item}" for item in left_out]
    messages = phase2_messages(
        facts.facts, contexts, edits.today, system=system, scope=ctx.options.scope_named(executor.scope)
    )
    if protocol == "text":
        single = edits.targets[0] if len(edits.targets) == 1 else None
        return run_text_loop(
            edits.model,
            messages,
            executor,
            max_edits=ctx.options.max_iterations,
            default_path=single,
            read=lambda path: staging.read(policy.check_readable(path, executor.scope)),
            refuse=(TEXT_EXAMPLE_LINE,),
        )
    return run_agent_loop(edits.model, messages, dream_tools(), executor, max_tool_calls=ctx.options.max_iterations)
