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

A stop request (the face's SIGTERM/SIGINT handler sets ``ctx.stop``) ends the run before the next
session. The slice in flight lands whole or not at all: a stop during its model calls abandons it
before step 1 (``stopping.StoppableModel``), a stop after them lets steps 1 to 3 finish. The report
says ``interrupted`` and lists what landed; a second signal kills the process, and the pending
record above makes the next run finish the slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dream_memory.adapters.sessions import (
    ConsolidationState,
    ConsolidationStore,
    consolidation_lock,
    progress_key,
)
from dream_memory.app.consolidate.options import ConsolidateContext
from dream_memory.app.consolidate.pending import StopRun, finish_pending
from dream_memory.app.consolidate.report import (
    OUTCOME_CONSOLIDATED,
    OUTCOME_FAILED,
    OUTCOME_INTERRUPTED,
    OUTCOME_NOT_ATTEMPTED,
    STATUS_FAILED,
    STATUS_LOCKED,
    ConsolidateReport,
    SessionReport,
    record_failure,
    status_of,
)
from dream_memory.app.consolidate.slice import one_session
from dream_memory.app.consolidate.stopping import StoppableModel
from dream_memory.app.progress import SessionEnded, emitter
from dream_memory.errors import DreamError, LockBusy


def consolidate_sessions(ctx: ConsolidateContext, paths: Sequence[Path]) -> ConsolidateReport:
    opts = ctx.options
    report = ConsolidateReport(
        workspace=str(ctx.root), model=ctx.model.name, budget=opts.budget, force=opts.force, dry_run=opts.dry_run
    )
    ctx = replace(ctx, model=StoppableModel(ctx.model, ctx.stop), progress=emitter(ctx.progress, ctx.redactor))
    started = ctx.clock.monotonic()
    store = ConsolidationStore(ctx.root)
    try:
        if opts.dry_run:
            _dry_run(ctx, store, paths, report)
        else:
            with consolidation_lock(ctx.root):
                _locked_run(ctx, store, paths, report)
    except LockBusy as exc:
        report.status = STATUS_LOCKED
        report.errors.append(exc.message)
    except (DreamError, OSError) as exc:
        # A lock or state file that cannot be read or written (a read-only folder, a full disk):
        # the run ends here and its report still says so, listing what landed before.
        record_failure(report, exc)
    report.duration_s = ctx.clock.monotonic() - started
    if report.status not in (STATUS_LOCKED, STATUS_FAILED):
        report.status = status_of(report)
    return report


def _dry_run(
    ctx: ConsolidateContext, store: ConsolidationStore, paths: Sequence[Path], report: ConsolidateReport
) -> None:
    state = store.load()
    if state.pending is not None:
        report.warnings.append(
            f"an interrupted run left {len(state.pending.entries)} entries of {state.pending.session} pending; "
            "a real run appends the missing ones first"
        )
    for number, path in enumerate(paths):
        if _stopped(ctx, report, paths[number:]):
            break
        _one(ctx, state, store, path, report)


def _locked_run(
    ctx: ConsolidateContext, store: ConsolidationStore, paths: Sequence[Path], report: ConsolidateReport
) -> None:
    state = store.load()
    done = 0
    try:
        if state.pending is not None:
            finish_pending(ctx, state, store, report)
        for path in paths:
            if _stopped(ctx, report, paths[done:]):
                return
            last = _one(ctx, state, store, path, report)
            done += 1
            if last.outcome == OUTCOME_INTERRUPTED:
                _stopped(ctx, report, paths[done:])
                return
            if last.outcome == OUTCOME_FAILED and (state.pending is not None or last.stops_run):
                raise StopRun
    except StopRun:
        for rest in paths[done:]:
            skipped = SessionReport(path=progress_key(ctx.root, rest), outcome=OUTCOME_NOT_ATTEMPTED)
            skipped.reason = "not attempted: an earlier session failed in a way every session would (see errors)"
            report.sessions.append(skipped)
            _session_ended(ctx, skipped, 0.0)


def _one(
    ctx: ConsolidateContext, state: ConsolidationState, store: ConsolidationStore, path: Path, report: ConsolidateReport
) -> SessionReport:
    began = ctx.clock.monotonic()
    usage = report.usage
    result = one_session(ctx, state, store, path, report)
    report.sessions.append(result)
    _session_ended(ctx, result, ctx.clock.monotonic() - began, (report.usage.total_tokens - usage.total_tokens))
    return result


def _stopped(ctx: ConsolidateContext, report: ConsolidateReport, rest: Sequence[Path]) -> bool:
    """True once a stop was requested: the run ends here, ``rest`` listed as not attempted and
    the report saying where it stopped."""
    if not ctx.stop.requested:
        return False
    report.stopped_by = ctx.stop.signum
    landed = [s.path for s in report.sessions if s.outcome == OUTCOME_CONSOLIDATED]
    report.notes.append(
        f"stopped by {ctx.stop.name}: {len(landed)} session slice(s) landed before it, each whole; "
        f"{len(rest)} session(s) left for the next run"
    )
    for path in rest:
        skipped = SessionReport(path=progress_key(ctx.root, path), outcome=OUTCOME_NOT_ATTEMPTED)
        skipped.reason = f"not attempted: stopped by {ctx.stop.name}; the next run picks it up"
        report.sessions.append(skipped)
        _session_ended(ctx, skipped, 0.0)
    return True


def _session_ended(ctx: ConsolidateContext, result: SessionReport, seconds: float, tokens: int = 0) -> None:
    if ctx.progress is None:
        return
    ctx.progress(
        SessionEnded(
            path=result.path,
            outcome=result.outcome,
            messages=result.messages_archived,
            entries=len(result.entries),
            tokens=tokens,
            seconds=seconds,
            reason=result.reason,
            error=result.error,
        )
    )
