"""The Consolidator: fold the oldest safe slice of long sessions into history.jsonl.

For each session: read it (never write it, unless ``--update-sessions``), find where the last run
stopped, count the unconsolidated messages' tokens, and when they exceed the budget (or with
``--force``) summarize the oldest slice that ends at a safe cut, with one call without tools per
part. The summary is appended to history.jsonl with the session's key and the timestamp of the
slice's last message; ``(nothing)`` appends nothing but still counts as consolidated. When the
model fails after its retries or answers with something unusable, the slice is archived raw.

Crash safety, in this order for every slice that yields entries:

1. the entries' exact texts go into a ``pending`` record in memory/.consolidation.json;
2. they are appended to history.jsonl (one locked append);
3. the session's progress moves past the slice and ``pending`` is cleared, in one atomic write.

A run that finds a ``pending`` record (the previous one was killed between 1 and 3) finishes it
first, without the model: entries already in history.jsonl after the recorded cursor are not
appended again, missing ones are. So a slice is archived exactly once, whatever the crash point.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dream_memory.adapters.sessions import (
    ConsolidationStore,
    consolidation_lock,
    progress_key,
)
from dream_memory.app.consolidate.options import ConsolidateContext
from dream_memory.app.consolidate.pending import StopRun, finish_pending
from dream_memory.app.consolidate.report import (
    OUTCOME_FAILED,
    OUTCOME_NOT_ATTEMPTED,
    STATUS_LOCKED,
    ConsolidateReport,
    SessionReport,
    status_of,
)
from dream_memory.app.consolidate.slice import one_session
from dream_memory.errors import LockBusy


def consolidate_sessions(ctx: ConsolidateContext, paths: Sequence[Path]) -> ConsolidateReport:
    opts = ctx.options
    report = ConsolidateReport(
        workspace=str(ctx.root), model=ctx.model.name, budget=opts.budget, force=opts.force, dry_run=opts.dry_run
    )
    started = ctx.clock.monotonic()
    store = ConsolidationStore(ctx.root)
    if opts.dry_run:
        state = store.load()
        if state.pending is not None:
            report.warnings.append(
                f"an interrupted run left {len(state.pending.entries)} entries of {state.pending.session} pending; "
                "a real run appends the missing ones first"
            )
        for path in paths:
            report.sessions.append(one_session(ctx, state, store, path, report))
    else:
        try:
            with consolidation_lock(ctx.root):
                state = store.load()
                done = 0
                try:
                    if state.pending is not None:
                        finish_pending(ctx, state, store, report)
                    for path in paths:
                        report.sessions.append(one_session(ctx, state, store, path, report))
                        done += 1
                        last = report.sessions[-1]
                        if last.outcome == OUTCOME_FAILED and (state.pending is not None or last.stops_run):
                            raise StopRun
                except StopRun:
                    for rest in paths[done:]:
                        skipped = SessionReport(path=progress_key(ctx.root, rest), outcome=OUTCOME_NOT_ATTEMPTED)
                        skipped.reason = (
                            "not attempted: an earlier session failed in a way every session would (see errors)"
                        )
                        report.sessions.append(skipped)
        except LockBusy as exc:
            report.status = STATUS_LOCKED
            report.errors.append(exc.message)
    report.duration_s = ctx.clock.monotonic() - started
    if report.status != STATUS_LOCKED:
        report.status = status_of(report)
    return report
