"""Finishing the slice an interrupted run was appending (its ``pending`` record), without the
model: entries already in history.jsonl are not appended again, missing ones are."""

from __future__ import annotations

from typing import Any

from dream_memory.adapters.sessions import (
    SITE_PROGRESS,
    ConsolidationState,
    ConsolidationStore,
)
from dream_memory.app.consolidate.options import ConsolidateContext
from dream_memory.app.consolidate.report import ConsolidateReport
from dream_memory.core.consolidation import (
    match_entries,
)
from dream_memory.errors import DreamError


class StopRun(Exception):
    """A write failed after a slice's pending record may have reached the disk: no other slice
    may start (its pending record would replace this one); the next run finishes this one."""


def finish_pending(
    ctx: ConsolidateContext, state: ConsolidationState, store: ConsolidationStore, report: ConsolidateReport
) -> None:
    """Complete the slice an interrupted run was appending, without calling the model again."""
    pending = state.pending
    assert pending is not None
    item: dict[str, Any] = {"path": pending.session, "key": pending.key, "planned": len(pending.entries)}
    try:
        found = [e for e in ctx.history.entries_after(pending.after_cursor) if e.session_key == pending.key]
        matches = match_entries([e.content for e in pending.entries], [e.content for e in found])
        missing = [pending.entries[i] for i, m in enumerate(matches) if m is None]
        written = ctx.history.append_many([(e.content, pending.key, e.timestamp) for e in missing]) if missing else []
        origin = pending.origin()
        if origin is not None:
            cursors = [found[m].cursor for m in matches if m is not None] + [e.cursor for e in written]
            state.origins.update((cursor, origin) for cursor in cursors)
        state.sessions[pending.session] = pending.progress
        state.pending = None
        store.save(state, site=SITE_PROGRESS)
    except DreamError as exc:
        item.update(outcome="failed", error=str(exc))
        report.recovered.append(item)
        report.errors.append(f"{pending.session}: the interrupted slice could not be finished: {exc.message}")
        raise StopRun from exc
    present = [found[m].cursor for m in matches if m is not None]
    item.update(
        outcome="finished",
        already_present=present,
        entries=sorted(present + [e.cursor for e in written]),
        appended=[e.cursor for e in written],
        messages_archived=pending.messages_archived,
        raw_fallback=pending.raw_fallback,
    )
    report.recovered.append(item)
    ctx.log(
        f"finished an interrupted consolidation of {pending.session}: {len(written)} entries appended, "
        f"{len(present)} were already in history"
    )
