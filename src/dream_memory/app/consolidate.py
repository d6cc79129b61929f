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

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_memory import __version__
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.sessions import (
    SITE_PENDING,
    SITE_PROGRESS,
    ConsolidationState,
    ConsolidationStore,
    SessionSnapshot,
    consolidation_lock,
    find_nanobot_sessions,
    history_cursor_bound,
    is_in_nanobot_store,
    progress_key,
    read_session,
    update_last_consolidated,
)
from dream_memory.core import layout
from dream_memory.core.chat import Usage, check_reply
from dream_memory.core.consolidation import (
    ENTRY_CAP_BYTES,
    Budget,
    Pending,
    PlannedEntry,
    Progress,
    Resume,
    input_budget,
    is_nothing,
    match_entries,
    plan_parts,
    plan_slice,
    progress_at,
    raw_entry_texts,
    raw_label,
    resume_point,
    summary_entry_texts,
)
from dream_memory.core.ports import ChatModel, Clock, NoRedaction, Redactor, TokenCounter
from dream_memory.core.prompts import consolidation_messages, summary_problem
from dream_memory.core.sessions import (
    SessionRecord,
    key_from_file_name,
    record_tokens,
    safe_cuts,
    short_timestamp,
    transcript_lines,
)
from dream_memory.errors import BadReply, DreamError, InputError, LockBusy, ModelError, UsageError
from dream_memory.settings import defaults

STATUS_OK = "ok"
STATUS_NOTHING = "nothing_to_do"
STATUS_DRY_RUN = "dry_run"
STATUS_FAILED = "failed"
STATUS_LOCKED = "locked"

OUTCOME_CONSOLIDATED = "consolidated"
OUTCOME_SKIPPED = "skipped"
OUTCOME_DRY_RUN = "would_consolidate"
OUTCOME_FAILED = "failed"
OUTCOME_NOT_ATTEMPTED = "not_attempted"

# Per transcript line on top of its message's own token count: the "[YYYY-MM-DD HH:MM] role: "
# prefix. Used only to decide whether a slice surely fits one call without counting it again.
_LINE_PREFIX_TOKENS = 12


@dataclass(frozen=True)
class ConsolidateOptions:
    budget: Budget
    force: bool = False
    dry_run: bool = False
    update_sessions: bool = False
    context_window: int | None = None  # of the model; None: defaults.MODEL_CONTEXT_WINDOW_FALLBACK
    max_tokens: int = defaults.MODEL_MAX_TOKENS  # the model's completion limit
    entry_cap_bytes: int = ENTRY_CAP_BYTES
    # How long to wait before reading a session again whose consolidated part no longer matches:
    # an agent rewriting the file is done by then; a file still different was reset.
    reread_delay: float = 0.2


@dataclass
class ConsolidateContext:
    root: Path
    model: ChatModel
    history: HistoryLog
    clock: Clock
    counter: TokenCounter
    options: ConsolidateOptions
    redactor: Redactor = field(default_factory=NoRedaction)
    log: Callable[[str], None] = lambda message: None
    sleep: Callable[[float], None] = time.sleep


@dataclass
class SessionReport:
    path: str
    key: str = ""
    outcome: str = OUTCOME_SKIPPED
    reason: str = ""
    messages_archived: int = 0
    entries: list[int] = field(default_factory=list)
    raw_fallback: bool = False
    stops_run: bool = False  # a failure every later session would repeat (bad key, bad model name)
    tokens_before: int = 0
    tokens_after: int = 0
    lines: tuple[int, int] | None = None
    llm_calls: int = 0
    last_consolidated: int | None = None
    session_file: str | None = None  # what --update-sessions did
    malformed_lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "key": self.key,
            "outcome": self.outcome,
            "reason": self.reason,
            "messages_archived": self.messages_archived,
            "entries": self.entries,
            "raw_fallback": self.raw_fallback,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "lines": None if self.lines is None else {"first": self.lines[0], "last": self.lines[1]},
            "llm_calls": self.llm_calls,
            "last_consolidated": self.last_consolidated,
            "session_file": self.session_file,
            "malformed_lines": self.malformed_lines,
            "notes": self.notes,
            "error": self.error,
        }


@dataclass
class ConsolidateReport:
    workspace: str
    model: str
    budget: Budget
    force: bool = False
    dry_run: bool = False
    status: str = STATUS_NOTHING
    sessions: list[SessionReport] = field(default_factory=list)
    recovered: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where --all looked for sessions
    usage: Usage = field(default_factory=Usage)
    redactions: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.status == STATUS_LOCKED:
            return LockBusy.exit_code
        return 1 if self.status == STATUS_FAILED else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "workspace": self.workspace,
            "version": __version__,
            "model": self.model,
            "budget_tokens": self.budget.tokens,
            "budget_source": self.budget.source,
            "force": self.force,
            "dry_run": self.dry_run,
            "sessions": [s.to_json() for s in self.sessions],
            "recovered": self.recovered,
            "sources": self.sources,
            "usage": self.usage.to_report(),
            "redactions": dict(sorted(self.redactions.items())),
            "warnings": self.warnings,
            "errors": self.errors,
            "duration_s": round(self.duration_s, 4),
        }


# Model failures that no retry or later slice will fix: the run stops, nothing is archived.
_CONFIGURATION_FAILURES = frozenset({"auth", "bad_request"})


class _StopRun(Exception):
    """A write failed after a slice's pending record may have reached the disk: no other slice
    may start (its pending record would replace this one); the next run finishes this one."""


# --- choosing the sessions -------------------------------------------------------------------------


def select_sessions(
    root: Path,
    given: Sequence[str],
    all_sessions: bool,
    cwd: Path,
    *,
    nanobot_roots: Sequence[Path] = (),
    sources: list[str] | None = None,
) -> list[Path]:
    """The session files to consolidate: ``--session`` paths (taken from the current folder, else
    the workspace, else its sessions/ folder) and, with ``--all``, every ``sessions/*.jsonl`` plus
    every session of this workspace in nanobot 0.3.5's session store (``nanobot_roots``: the
    candidate ``<nanobot data dir>/sessions`` folders). ``sources`` receives where --all looked."""
    if not given and not all_sessions:
        raise UsageError(
            "say which sessions to consolidate",
            hint="pass --all for every session of the workspace, or --session FILE (repeatable)",
        )
    chosen: list[Path] = []
    for raw in given:
        candidate = Path(raw).expanduser()
        places = [cwd, root, root / layout.SESSIONS_DIR]
        options = [candidate] if candidate.is_absolute() else [place / candidate for place in places]
        found = next((p for p in options if p.exists()), None)
        if found is None:
            where = "" if candidate.is_absolute() else f" (looked in {', '.join(map(str, places))})"
            raise InputError(f"session file {raw} does not exist{where}")
        if not found.is_file():
            raise InputError(f"{found} is not a session file")
        chosen.append(found)
    if all_sessions:
        folder = root / layout.SESSIONS_DIR
        local = sorted(p for p in folder.glob("*.jsonl") if p.is_file()) if folder.is_dir() else []
        chosen += local
        store = find_nanobot_sessions(root, nanobot_roots)
        stored = sorted(p for p in store.folder.glob("*.jsonl") if p.is_file()) if store.folder else []
        chosen += stored
        if sources is not None:
            sources.append(f"{layout.SESSIONS_DIR}/: {len(local)} session file(s)")
            sources.append(f"{store.detail}: {len(stored)} session file(s)" if store.folder else store.detail)
    unique: dict[str, Path] = {}
    for path in chosen:
        unique.setdefault(str(path.resolve()), path)
    return list(unique.values())


def _session_key(parsed_key: str | None, path: Path) -> str:
    # nanobot 0.3.5's store names files after the base64url of the key; elsewhere a name is the
    # key with ':' as '_' (nanobot's files carry their key in the metadata line anyway).
    return parsed_key or key_from_file_name(path.name, encoded=is_in_nanobot_store(path))


def _moved_progress(
    ctx: ConsolidateContext, state: ConsolidationState, path: Path, rel: str
) -> tuple[str, Progress] | None:
    """nanobot 0.3.5 moves a workspace's sessions/ files into its store on its first start: the
    progress recorded under the old path, for the same session key, whose file is gone, is this
    file's (its fingerprints still decide whether it applies)."""
    if rel in state.sessions or not is_in_nanobot_store(path):
        return None
    key = _session_key(read_session(path).parsed.meta.key, path)
    for old, progress in state.sessions.items():
        if progress.key == key and not (ctx.root / old).exists() and not Path(old).exists():
            return old, progress
    return None


# --- the run ---------------------------------------------------------------------------------------


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
            report.sessions.append(_one_session(ctx, state, store, path, report))
    else:
        try:
            with consolidation_lock(ctx.root):
                state = store.load()
                done = 0
                try:
                    if state.pending is not None:
                        _finish_pending(ctx, state, store, report)
                    for path in paths:
                        report.sessions.append(_one_session(ctx, state, store, path, report))
                        done += 1
                        last = report.sessions[-1]
                        if last.outcome == OUTCOME_FAILED and (state.pending is not None or last.stops_run):
                            raise _StopRun
                except _StopRun:
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
        report.status = _status(report)
    return report


def _status(report: ConsolidateReport) -> str:
    outcomes = {s.outcome for s in report.sessions}
    if OUTCOME_FAILED in outcomes or any("failed" in r.get("outcome", "") for r in report.recovered):
        return STATUS_FAILED
    if report.dry_run:
        return STATUS_DRY_RUN
    if OUTCOME_CONSOLIDATED in outcomes or report.recovered:
        return STATUS_OK
    return STATUS_NOTHING


def _now(ctx: ConsolidateContext) -> str:
    return ctx.clock.now().isoformat(timespec="seconds")


def _finish_pending(
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
        state.sessions[pending.session] = pending.progress
        state.pending = None
        store.save(state, site=SITE_PROGRESS)
    except DreamError as exc:
        item.update(outcome="failed", error=str(exc))
        report.recovered.append(item)
        report.errors.append(f"{pending.session}: the interrupted slice could not be finished: {exc.message}")
        raise _StopRun from exc
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


def _one_session(
    ctx: ConsolidateContext,
    state: ConsolidationState,
    store: ConsolidationStore,
    path: Path,
    report: ConsolidateReport,
) -> SessionReport:
    rel = progress_key(ctx.root, path)
    result = SessionReport(path=rel)
    opts = ctx.options
    try:
        moved = _moved_progress(ctx, state, path, rel)
        if moved is not None and not opts.dry_run:
            old, progress = moved
            state.sessions[rel] = progress
            del state.sessions[old]
            store.save(state, site=SITE_PROGRESS)
            result.notes.append(f"nanobot moved {old} here; its consolidation progress moved with it")
        found = _read_and_resume(ctx, path, state.sessions.get(rel, moved[1] if moved else None), result)
        if found is None:
            return result
        snapshot, resume, stale = found
        if resume.warning:
            report.warnings.append(f"{rel}: {resume.warning}")
        if stale and not opts.dry_run:
            # Forget the old file's position now, so later runs need not detect the reset again.
            del state.sessions[rel]
            store.save(state, site=SITE_PROGRESS)
        parsed = snapshot.parsed
        key = _session_key(parsed.meta.key, path)
        result.key = key
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
            _update_session_file(ctx, parsed.messages_before(start), path, result)
            return result
        chosen = records[plan.start : plan.end]
        result.lines = (chosen[0].line_no, chosen[-1].line_no)
        result.messages_archived = sum(1 for r in chosen if r.is_visible)
        result.tokens_after = plan.tokens_after
        if opts.dry_run:
            result.outcome = OUTCOME_DRY_RUN
            return result
        texts = _entry_texts(ctx, chosen, costs[plan.start : plan.end], result, report)
        timestamp = next((t for r in reversed(chosen) if (t := short_timestamp(r.timestamp))), None)
        entries = tuple(PlannedEntry(_redact(ctx, text, report), timestamp) for text in texts)
        progress = progress_at(parsed, key, plan.end, _now(ctx))
        _land(ctx, state, store, rel, key, entries, progress, result)
        result.outcome = OUTCOME_CONSOLIDATED
        result.last_consolidated = progress.messages
        _update_session_file(ctx, progress.messages, path, result)
    except DreamError as exc:
        result.outcome = OUTCOME_FAILED
        result.error = str(exc)
        result.stops_run = isinstance(exc, ModelError) and exc.kind in _CONFIGURATION_FAILURES
        report.errors.append(f"{rel}: {exc.message}")
    return result


def _land(
    ctx: ConsolidateContext,
    state: ConsolidationState,
    store: ConsolidationStore,
    rel: str,
    key: str,
    entries: tuple[PlannedEntry, ...],
    progress: Progress,
    result: SessionReport,
) -> None:
    """Append the slice's entries and move the progress past it, in the crash-safe order."""
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
    state.sessions[rel] = progress
    state.pending = None
    try:
        store.save(state, site=SITE_PROGRESS)
    except DreamError:
        state.pending = pending
        if previous is None:
            state.sessions.pop(rel, None)
        else:
            state.sessions[rel] = previous
        raise


def _redact(ctx: ConsolidateContext, text: str, report: ConsolidateReport) -> str:
    # Redacted before the pending record is written, so the record holds the texts exactly as
    # history.jsonl will (a redactor applied again at the append finds nothing more to change).
    clean, counts = ctx.redactor.redact(text)
    for kind, n in counts.items():
        report.redactions[kind] = report.redactions.get(kind, 0) + n
    return clean


def _entry_texts(
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
        if exc.kind in _CONFIGURATION_FAILURES:
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


def _update_session_file(ctx: ConsolidateContext, messages: int, path: Path, result: SessionReport) -> None:
    """--update-sessions. A failure here is reported but fails nothing: the slice is archived and
    the progress recorded; the next run writes the value again."""
    if not ctx.options.update_sessions or ctx.options.dry_run or messages <= 0:
        return
    try:
        update = update_last_consolidated(path, messages)
    except DreamError as exc:
        result.session_file = f"failed: {exc.message}"
        result.notes.append(f"last_consolidated was not written back: {exc.message}")
        return
    result.session_file = f"{update.status}: {update.detail}" if update.detail else update.status
    if update.status == "skipped":
        result.notes.append(f"last_consolidated was not written back: {update.detail}")
