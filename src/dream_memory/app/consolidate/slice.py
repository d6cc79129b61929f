"""One session of a run: where the last run stopped, whether the unconsolidated part is over the
budget, and the oldest safe slice summarized and appended in the crash-safe order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dream_memory.adapters.sessions import (
    SITE_PENDING,
    SITE_PROGRESS,
    ConsolidationState,
    ConsolidationStore,
    SessionSnapshot,
    consolidated_prefix,
    history_cursor_bound,
    is_in_nanobot_store,
    progress_key,
    read_session,
    session_file_gone,
    update_last_consolidated,
)
from dream_memory.app.consolidate.options import CONFIGURATION_FAILURES, ConsolidateContext
from dream_memory.app.consolidate.report import (
    OUTCOME_CONSOLIDATED,
    OUTCOME_DRY_RUN,
    OUTCOME_FAILED,
    OUTCOME_INTERRUPTED,
    ConsolidateReport,
    SessionReport,
)
from dream_memory.app.consolidate.summarize import entry_texts, redact
from dream_memory.app.dream.budget import Interrupted
from dream_memory.core.consolidation import (
    Pending,
    PlannedEntry,
    Progress,
    Resume,
    plan_slice,
    progress_at,
    resume_point,
)
from dream_memory.core.sessions import (
    ParsedSession,
    key_from_file_name,
    record_tokens,
    safe_cuts,
    short_timestamp,
)
from dream_memory.core.stop import signal_name
from dream_memory.errors import DreamError, InputError, ModelError


def _session_key(parsed_key: str | None, path: Path) -> str:
    # nanobot 0.3.5's store names files after the base64url of the key; elsewhere a name is the
    # key with ':' as '_' (nanobot's files carry their key in the metadata line anyway).
    return parsed_key or key_from_file_name(path.name, encoded=is_in_nanobot_store(path))


def _moved_progress(
    ctx: ConsolidateContext, state: ConsolidationState, path: Path, rel: str
) -> tuple[str, Progress] | None:
    """nanobot 0.3.5 moves a workspace's sessions/ files into its store on its first start, under
    the same file name: the progress recorded under the old path, for the same session key and
    file name, whose file is gone, is this file's (its fingerprints still decide whether it
    applies). The session's new file (nanobot names it after the key, and starts it when the
    moved one is not loaded) shares the key but not the name: given the moved file's progress,
    it read as reset, and the moved file as never consolidated, so its slice went to history
    twice."""
    if rel in state.sessions or not is_in_nanobot_store(path):
        return None
    key = _session_key(read_session(path).parsed.meta.key, path)
    for old, progress in state.sessions.items():
        if progress.key == key and Path(old).name == path.name and session_file_gone(ctx.root, old):
            return old, progress
    return None


def _now(ctx: ConsolidateContext) -> str:
    return ctx.clock.now().isoformat(timespec="seconds")


def _read_and_resume(
    ctx: ConsolidateContext, path: Path, progress: Progress | None, result: SessionReport
) -> tuple[SessionSnapshot, Resume, bool] | None:
    """The session as read, where to resume, and whether the stored progress no longer applies
    to the file (another session now, or a reset); None when the file is being rewritten."""
    stale = False
    snapshot = read_session(path)
    key = _session_key(snapshot.parsed.meta.key, path)
    resume = resume_point(snapshot.parsed, progress if progress is not None and progress.key == key else None)
    if progress is not None and progress.key != key:
        stale = True
        result.notes.append(f"the file now holds session {key!r} (was {progress.key!r}): starting it over")
    elif resume.index is None:
        # The consolidated part changed: an agent rewriting the file right now, or a reset.
        ctx.sleep(ctx.options.reread_delay)
        again = read_session(path)
        if again.signature != snapshot.signature:
            result.reason = "the session file is being rewritten; it is left for the next run"
            return None
        snapshot = again
        resume = resume_point(snapshot.parsed, progress)
        if resume.index is None:
            stale = True
            resume = resume_point(snapshot.parsed, None)
            result.notes.append(
                "the session file was rewritten or reset since the last consolidation "
                "(its consolidated part changed): starting again from its own last_consolidated"
            )
    if resume.note:
        result.notes.append(resume.note)
    if resume.warning:
        result.notes.append(resume.warning)
    return snapshot, resume, stale


@dataclass
class _Session:
    """One session of a run: the run's wiring and state, and where its outcome is recorded."""

    ctx: ConsolidateContext
    state: ConsolidationState
    store: ConsolidationStore
    report: ConsolidateReport
    path: Path
    rel: str
    result: SessionReport


def one_session(
    ctx: ConsolidateContext,
    state: ConsolidationState,
    store: ConsolidationStore,
    path: Path,
    report: ConsolidateReport,
) -> SessionReport:
    rel = progress_key(ctx.root, path)
    session = _Session(ctx, state, store, report, path, rel, SessionReport(path=rel))
    result = session.result
    try:
        _consolidate(session)
    except Interrupted as exc:
        # Only the model calls are interrupted, and they all come before the slice lands: nothing
        # of it was appended, its progress did not move, and the next run summarizes it again.
        result.outcome, result.messages_archived, result.raw_fallback = OUTCOME_INTERRUPTED, 0, False
        result.reason = (
            f"stopped by {signal_name(exc.signum)} before its slice landed; the next run consolidates it again"
        )
    except DreamError as exc:
        result.outcome = OUTCOME_FAILED
        result.error = str(exc)
        result.stops_run = isinstance(exc, ModelError) and exc.kind in CONFIGURATION_FAILURES
        report.errors.append(f"{rel}: {exc.message}")
    return result


def _resume(session: _Session) -> tuple[SessionSnapshot, Resume] | None:
    """The session as read and where to resume it, the stored progress moved or forgotten as the
    file says; None when the file is being rewritten."""
    ctx, state, store, rel, result = session.ctx, session.state, session.store, session.rel, session.result
    dry_run = ctx.options.dry_run
    moved = _moved_progress(ctx, state, session.path, rel)
    if moved is not None and not dry_run:
        old, progress = moved
        state.sessions[rel] = progress
        del state.sessions[old]
        store.save(state, site=SITE_PROGRESS)
        result.notes.append(f"nanobot moved {old} here; its consolidation progress moved with it")
    found = _read_and_resume(ctx, session.path, state.sessions.get(rel, moved[1] if moved else None), result)
    if found is None:
        return None
    snapshot, resume, stale = found
    if resume.warning:
        session.report.warnings.append(f"{rel}: {resume.warning}")
    if stale and not dry_run:
        # Forget the old file's position now, so later runs need not detect the reset again.
        del state.sessions[rel]
        store.save(state, site=SITE_PROGRESS)
    return snapshot, resume


def _consolidate(session: _Session) -> None:
    ctx, rel, result, report = session.ctx, session.rel, session.result, session.report
    opts = ctx.options
    found = _resume(session)
    if found is None:
        return
    snapshot, resume = found
    parsed = snapshot.parsed
    key = _session_key(parsed.meta.key, session.path)
    result.key = key
    if parsed.meta.key is None and not is_in_nanobot_store(session.path) and ctx.options.scopes.configured:
        # The name cannot be turned back into the key (":" and "_" both became "_"): filed under
        # the guess, a private chat's summary went to the shared files every reader is served.
        raise InputError(
            f"{rel} has no session key in its metadata line, and scope rules are configured: its file name cannot "
            "say whose conversation it is, so it is not consolidated",
            hint='add "key": "<channel>:<id>" to its first line ({"_type": "metadata", ...}), then run again',
        )
    start = resume.index or 0
    records = parsed.records
    for record in records[start:]:
        if not record.is_message:
            result.malformed_lines.append({"line": record.line_no, "detail": record.problem})
            report.warnings.append(f"{rel} line {record.line_no}: {record.problem}")
    costs = [0] * start + [record_tokens(r, ctx.counter.count) for r in records[start:]]
    decision = plan_slice(costs, safe_cuts(records, start), start, opts.budget.tokens, force=opts.force)
    result.tokens_before = result.tokens_after = decision.tokens
    result.reason = decision.reason
    plan = decision.plan
    if plan is None:
        # Only a position valid for the file as it is now (never a stale one after a reset).
        _update_session_file(session, parsed, parsed.messages_before(start))
        return
    chosen = records[plan.start : plan.end]
    result.lines = (chosen[0].line_no, chosen[-1].line_no)
    result.messages_archived = sum(1 for r in chosen if r.is_visible)
    result.tokens_after = plan.tokens_after
    if opts.dry_run:
        result.outcome = OUTCOME_DRY_RUN
        return
    texts = entry_texts(ctx, chosen, costs[plan.start : plan.end], result, report)
    timestamp = next((t for r in reversed(chosen) if (t := short_timestamp(r.timestamp))), None)
    entries = tuple(PlannedEntry(redact(ctx, text, report), timestamp) for text in texts)
    progress = progress_at(parsed, key, plan.end, _now(ctx))
    _land(session, key, entries, progress, parsed.messages_before(plan.start) + 1)
    result.outcome = OUTCOME_CONSOLIDATED
    result.last_consolidated = progress.messages
    _update_session_file(session, parsed, progress.messages)


def _land(
    session: _Session, key: str, entries: tuple[PlannedEntry, ...], progress: Progress, first_message: int
) -> None:
    """Append the slice's entries and move the progress past it, in the crash-safe order; each
    entry's origin (the session file and the slice's messages) is saved with that progress."""
    ctx, state, store, rel, result = session.ctx, session.state, session.store, session.rel, session.result
    if not entries:
        state.sessions[rel] = progress
        store.save(state, site=SITE_PROGRESS)
        return
    state.pending = Pending(
        session=rel,
        key=key,
        after_cursor=history_cursor_bound(ctx.history.path),
        entries=entries,
        progress=progress,
        messages_archived=result.messages_archived,
        raw_fallback=result.raw_fallback,
        first_message=first_message,
    )
    try:
        store.save(state, site=SITE_PENDING)
    except DreamError:
        # Not on disk: this slice simply did not happen, and other sessions may still go.
        state.pending = None
        raise
    # From here a failure leaves the pending record on disk; it stays set in memory too, so the
    # run stops instead of writing another slice's record over it.
    written = ctx.history.append_many([(e.content, key, e.timestamp) for e in entries])
    result.entries = [e.cursor for e in written]
    previous, pending = state.sessions.get(rel), state.pending
    origin = pending.origin()
    if origin is not None:
        state.origins.update((e.cursor, origin) for e in written)
    state.sessions[rel] = progress
    state.pending = None
    try:
        store.save(state, site=SITE_PROGRESS)
    except DreamError:
        for e in written:
            state.origins.pop(e.cursor, None)
        state.pending = pending
        if previous is None:
            state.sessions.pop(rel, None)
        else:
            state.sessions[rel] = previous
        raise


def _update_session_file(session: _Session, parsed: ParsedSession, messages: int) -> None:
    """--update-sessions. A failure here is reported but fails nothing: the slice is archived and
    the progress recorded; the next run writes the value again."""
    ctx, result = session.ctx, session.result
    if not ctx.options.update_sessions or ctx.options.dry_run or messages <= 0:
        return
    try:
        # The model call may take minutes; the count is only true of the file as it was read.
        update = update_last_consolidated(session.path, messages, prefix=consolidated_prefix(parsed, messages))
    except DreamError as exc:
        result.session_file = f"failed: {exc.message}"
        result.notes.append(f"last_consolidated was not written back: {exc.message}")
        return
    result.session_file = f"{update.status}: {update.detail}" if update.detail else update.status
    if update.status in ("skipped", "replaced"):
        result.notes.append(f"last_consolidated was not written back: {update.detail}")
    if update.status == "replaced":
        # The next run sees the reset and consolidates the new session from its own watermark.
        session.report.warnings.append(f"{session.rel}: last_consolidated was not written back: {update.detail}")
