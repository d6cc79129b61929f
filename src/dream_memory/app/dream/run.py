"""The Dream run: drain history.jsonl from .dream_cursor in batches, two model phases per batch, one
commit per batch, and a report built from the real diff (docs/reference/report.md, "How a batch
ends"; the prompts in docs/reference/llm-protocol.md).

How a batch ends is decided here and nowhere else:

- committed: its edits, the new cursor and the state in one commit;
- nothing to add: a commit holding only the cursor ("dream: nothing new in a..b");
- held: a guard or the write policy held some of the edits: each held change waits under
  memory/.dream_held/<id>/ (``dream review``), the rest lands, the cursor passes the batch;
- failed: the cursor stays before the batch and the run stops (exit 1). Only content failures
  count against the batch; after three consecutive runs failing a batch with the same start that
  way, the range all three failed is set aside (core/state.py, DreamState.record_failure).

The commit lands before any memory file is written (versioning.apply_commit), so a crash at any
point is finished or rolled back by the next run, and the cursor on disk is never ahead of the
memory that produced it.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import FileChange, GitStore, unified_diff
from dream_memory.adapters.locks import LockHolder, dream_lock, dream_lock_shared
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.adapters.workspace import ensure_folder, init_workspace
from dream_memory.app.cursor import head_cursor, moved_back
from dream_memory.app.dream.budget import BudgetExceeded, Interrupted, MeteredModel, usage_since
from dream_memory.app.dream.landing import (
    BatchContext,
    as_bytes,
    compact,
    content_failure,
    land_batch,
)
from dream_memory.app.dream.meanwhile import EditedMeanwhile
from dream_memory.app.dream.options import DreamContext
from dream_memory.app.dream.origins import RunOrigins
from dream_memory.app.dream.prompting import guide_note
from dream_memory.app.dream.protocols import Protocols, dream_batch
from dream_memory.app.dream.refusals import refuse_before_any_change
from dream_memory.app.dream.report import (
    STATUS_BUDGET,
    STATUS_DRY_RUN,
    STATUS_FAILED,
    STATUS_HELD,
    STATUS_INTERRUPTED,
    STATUS_NOTHING,
    STATUS_OK,
    STATUS_SET_ASIDE,
    BatchRecord,
    DreamReport,
    scrub,
    scrub_report,
)
from dream_memory.app.dream.watch import PhaseWatch
from dream_memory.app.progress import BatchEnded, RunStarted, emitter
from dream_memory.app.versioning import commit_manual_edits, recover
from dream_memory.core import layout
from dream_memory.core.history import Batch, HistoryEntry, plan_batches
from dream_memory.core.late_entries import late_keys, missed
from dream_memory.core.ports import Redactor
from dream_memory.core.state import DreamState
from dream_memory.core.stop import signal_name
from dream_memory.core.write_policy import pinned_problem
from dream_memory.errors import BadReply, DreamError, InputError, ModelError


def run_dream(ctx: DreamContext) -> DreamReport:
    """One Dream run over ``ctx.root``. Raises LockBusy (exit 75) when another run holds the lock."""
    log, redactor = ctx.log, ctx.redactor
    ctx = replace(ctx, log=lambda message: log(scrub(redactor, message)))
    report = DreamReport(workspace=str(ctx.root), model=ctx.model.name)
    progress = emitter(ctx.progress, redactor)
    if progress is not None:  # retries (the litellm adapter's hook) and phases as progress events
        ctx = replace(ctx, model=PhaseWatch(ctx.model, progress), progress=progress)
    metered = MeteredModel(ctx.model, ctx.options, ctx.clock, ctx.stop)
    started = ctx.clock.monotonic()
    if not ctx.options.dry_run:
        ensure_folder(ctx.root)
    with _lock(ctx) as stale:
        if stale is not None and stale.pid is not None:
            ctx.log(f"took over a stale Dream lock ({stale.describe()})")
        git: GitStore | None = None
        try:
            git = _prepare(ctx, report)
            _run_batches(ctx, git, metered, report)
            if not ctx.options.dry_run and report.status not in (STATUS_FAILED, STATUS_INTERRUPTED):
                compact(ctx, git, report)
        except (DreamError, OSError) as exc:
            # A disk that fills up, a repository that cannot be written: the run stops where it
            # is (the journal lets the next run finish or roll back), and the report still says so.
            _fail_run(ctx, report, exc)
        except Exception as exc:  # a bug: the report still lists the batches committed before it
            ctx.log("internal error:\n" + traceback.format_exc())
            _fail_run(ctx, report, exc)
        finally:
            if git is not None:
                git.close()
    report.usage = metered.usage
    report.duration_s = ctx.clock.monotonic() - started
    scrub_report(report, ctx.redactor)
    return report


@contextlib.contextmanager
def _lock(ctx: DreamContext) -> Iterator[LockHolder | None]:
    """The Dream lock; a dry run only checks no live run holds it (it writes nothing, not even
    the lock file)."""
    if not ctx.options.dry_run:
        with dream_lock(ctx.root, now=ctx.clock.now()) as stale:
            yield stale
        return
    with dream_lock_shared(ctx.root):
        yield None


def _fail_run(ctx: DreamContext, report: DreamReport, exc: Exception) -> None:
    if isinstance(exc, DreamError):
        message = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    elif isinstance(exc, OSError):
        message = fsutil.os_error(exc, "write").message
    else:
        message = f"internal error ({type(exc).__name__}): {exc}"
    open_batch = next((b for b in reversed(report.batches) if not b.outcome), None)
    if open_batch is not None:
        open_batch.outcome, open_batch.error = "failed", message
        report.errors.append(f"batch {open_batch.cursor_from}..{open_batch.cursor_to}: {message}")
        _progress(ctx, open_batch)
    else:
        report.errors.append(message)
        if not report.batches and report.cursor_before == report.cursor_after == 0:
            # Stopped before the cursor was read: "cursor 0 -> 0" would say it is at 0.
            with contextlib.suppress(DreamError, OSError):
                report.cursor_before = report.cursor_after = ctx.history.read_dream_cursor() or 0
    report.status = STATUS_FAILED
    if isinstance(exc, DreamError) and exc.exit_code == 2:
        report.failed_exit = 2


def _prepare(ctx: DreamContext, report: DreamReport) -> GitStore | None:
    """Workspace, migration, crash recovery, branch and hand edits: before any batch."""
    refuse_before_any_change(ctx)  # dry runs included
    if ctx.options.dry_run:
        if ctx.history.legacy_pending():
            report.notes.append("memory/HISTORY.md is waiting to be migrated; a dry run does not migrate")
        return ctx.open_git(False)
    created = init_workspace(ctx.root, guide_notes=False)
    if created:
        report.notes.append("created " + ", ".join(created))
    migrated = ctx.history.migrate_legacy()  # under the history lock: a killed writer's leftovers first
    report.notes.extend(ctx.history.rewrite_notes)  # e.g. late lines carried from a replaced history.jsonl
    if migrated is not None:
        report.notes.append(f"migrated {migrated.entries} entries from memory/HISTORY.md ({migrated.mode})")
    git = ctx.open_git(True)
    assert git is not None
    recovered = recover(git)
    if recovered is not None:
        report.notes.append(f"recovered an interrupted change ({recovered.action}): {recovered.subject}")
        ctx.log(f"recovered an interrupted change ({recovered.action}): {recovered.subject}")
        for note in recovered.notes:
            report.notes.append(note)
            ctx.log(note)
    # Under the Dream lock: nothing of this run is writing yet.
    stale = [
        *fsutil.remove_stale_temps(ctx.root, deep=False),
        *fsutil.remove_stale_temps(ctx.root / "memory", deep=True),
    ]
    if stale:
        names = ", ".join(p.relative_to(ctx.root).as_posix() for p in stale[:5])
        more = f" and {len(stale) - 5} more" if len(stale) > 5 else ""
        report.notes.append(f"removed {len(stale)} temp file(s) a killed writer left: {names}{more}")
    if ctx.options.branch and git.checkout_branch(ctx.options.branch):
        report.notes.append(f"created branch {ctx.options.branch}")
    git.check_can_commit()  # a detached HEAD found before the model is paid, not at the first commit
    report.manual_edits_commit = commit_manual_edits(git, report.notes)
    if (cut := guide_note(ctx.root)) is not None:
        report.notes.append(cut)
    return git


def _read_state(root: Path) -> DreamState:
    return DreamState.from_json(fsutil.read_text(root / layout.DREAM_STATE))


@dataclass
class _Run:
    """The batches of one run and what they share: the state file's content as it goes, the
    protocol later batches start with, and (in a dry run) the one staging copy they all edit."""

    ctx: DreamContext
    git: GitStore | None
    model: MeteredModel
    report: DreamReport
    state: DreamState
    protocols: Protocols
    shared_staging: StagingWorkspace | None
    origins: RunOrigins = field(default_factory=RunOrigins)  # git blames, carried from batch to batch
    late_now: frozenset[str] = frozenset()  # keys of the late entries in history.jsonl (core/late_entries.py)
    head_cursor: int | None = None  # HEAD's committed cursor at the start, then after each batch landed


def _run_batches(ctx: DreamContext, git: GitStore | None, model: MeteredModel, report: DreamReport) -> None:
    state = _read_state(ctx.root)
    report.notes.extend(state.warnings)
    batches, late_now = _plan(ctx, git, report, state)
    if ctx.progress is not None:  # now the number of batches is known: the bar gets its total
        limit = ctx.options.max_batches
        total = len(batches) if limit is None else min(len(batches), limit)
        ctx.progress(RunStarted(command="run", unit="batch", total=total, model=report.model, where=str(ctx.root)))
    if not batches:
        report.status = STATUS_NOTHING
        return
    report.status = STATUS_DRY_RUN if ctx.options.dry_run else STATUS_OK
    shared_staging = _new_staging(ctx) if ctx.options.dry_run else None
    run = _Run(ctx, git, model, report, state, Protocols(ctx.options.edit_protocol), shared_staging, late_now=late_now)
    run.head_cursor = head_cursor(git) if git is not None else None
    for number, batch in enumerate(batches):
        if _stop_before(run, number, batches) or not _one_batch(run, batch):
            break
    if shared_staging is not None:
        report.dry_run_changes = _diffs(shared_staging)
    if report.set_aside and report.status in (STATUS_OK, STATUS_HELD, STATUS_BUDGET):
        report.status = STATUS_SET_ASIDE
    elif report.held and report.status == STATUS_OK:
        report.status = STATUS_HELD


def _plan(
    ctx: DreamContext, git: GitStore | None, report: DreamReport, state: DreamState
) -> tuple[list[Batch], frozenset[str]]:
    """The batches of the entries after the committed cursor, led by the late entries below it
    that no batch has dreamt yet; and the keys of every late entry in history.jsonl."""
    cursor = _trusted_cursor(ctx, git, report)
    report.cursor_before = report.cursor_after = cursor
    scan = ctx.history.scan()
    if scan.problems:  # stderr said so too; the report is what a scheduler keeps
        shown = "; ".join(p.describe() for p in scan.problems[:5])
        more = f"; and {len(scan.problems) - 5} more" if len(scan.problems) > 5 else ""
        report.notes.append(
            f"{len(scan.problems)} history.jsonl line(s) not read as written (left in the file): {shown}{more}"
        )
    behind = missed(scan.entries, cursor, state.late_dreamt)
    if behind:
        report.notes.append(
            f"{len(behind)} entr{'y' if len(behind) == 1 else 'ies'} at or below the cursor not dreamt yet "
            f"({', '.join(str(e.cursor) for e in behind[:10])}{', ...' if len(behind) > 10 else ''}): written after "
            "Dream had passed their cursor (a writer without the lock, or a cursor shared across a batch's end); "
            "dreamt in this run"
        )
    batches = plan_batches(
        ctx.history.pending(cursor, state.late_dreamt, scan),
        max_entries=ctx.options.batch_size,
        max_tokens=ctx.options.batch_tokens,
        count_tokens=ctx.counter.count,
        scope_of=ctx.options.scopes.scope_of if ctx.options.scopes.configured else None,
    )
    return batches, late_keys(scan.entries)


def _stop_before(run: _Run, number: int, batches: Sequence[Batch]) -> bool:
    """True (and a note why) when the run ends before batch ``number``: a stop request, --max-batches,
    or a run budget already spent."""
    if run.ctx.stop.requested:
        _interrupted(
            run.report, run.ctx.stop.signum, f"before batch {batches[number].cursor_from}..{batches[-1].cursor_to}"
        )
        return True
    limit = run.ctx.options.max_batches
    if limit is not None and number >= limit:
        run.report.notes.append(f"stopped after {number} batch(es) (--max-batches); {len(batches) - number} left")
        return True
    spent = run.model.exhausted()
    if spent:
        batch = batches[number]
        run.report.status = STATUS_BUDGET
        run.report.notes.append(f"stopped before batch {batch.cursor_from}..{batch.cursor_to}: {spent}")
        return True
    return False


class _Meter:
    """What one batch spent: tokens and calls, wall time, and of that the time in model calls (as
    MeteredModel times them: the whole call, our request building, HTTP and reply parsing too)."""

    def __init__(self, model: MeteredModel, record: BatchRecord, redactor: Redactor) -> None:
        self.model, self.record, self.redactor = model, record, redactor
        self.usage, self.seconds, self.started = model.usage, model.seconds, time.perf_counter()

    def count(self) -> None:
        self.record.usage = usage_since(self.model.usage, self.usage)

    def stop(self) -> None:
        self.count()
        self.record.duration_s = time.perf_counter() - self.started
        self.record.model_s = self.model.seconds - self.seconds
        # Notes may quote the model (rejected lines, a cut-off line): secrets never pass.
        self.record.notes = [self.redactor.redact(note)[0] for note in self.record.notes]


def _guarded(ctx: DreamContext, batch: Batch, report: DreamReport) -> Batch:
    """The batch as the model may see it: each entry through the secret guard.

    Lines an agent writes into history.jsonl itself pass no guard on the way in, and a model may
    file one line of an entry as a fact of its own: one line of a private key's block is a lone
    run of base64 that the guard on Dream's writes cannot recognise. Whatever the guard
    recognises in the whole entry is gone before any model sees it, so no piece of it comes back.
    """
    entries: list[HistoryEntry] = []
    for entry in batch.entries:
        clean, counts = ctx.redactor.redact(entry.content)
        for kind, count in counts.items():
            report.redactions[kind] = report.redactions.get(kind, 0) + count
        entries.append(entry if clean == entry.content else replace(entry, content=clean))
    if all(new is old for new, old in zip(entries, batch.entries, strict=True)):
        return batch
    # Recounted: a marker can be longer than the secret it replaced.
    whole = plan_batches(entries, max_entries=len(entries), max_tokens=sys.maxsize, count_tokens=ctx.counter.count)
    return replace(whole[0], scope=batch.scope)


def _one_batch(run: _Run, planned: Batch) -> bool:
    """Dream one batch and land it, and say how it ended; False when the run stops after it."""
    try:
        return _dream_and_land(run, planned)
    finally:
        if run.report.batches and run.report.batches[-1].outcome:  # else run_dream's failure says it
            _progress(run.ctx, run.report.batches[-1])


def _interrupted(report: DreamReport, signum: int | None, where: str) -> None:
    report.status = STATUS_INTERRUPTED
    report.stopped_by = signum
    report.notes.append(
        f"stopped by {signal_name(signum)} {where}: every batch before it is committed; "
        "the next run continues from the cursor"
    )


def _progress(ctx: DreamContext, record: BatchRecord) -> None:
    """The batch's end as a progress event: its range, how it ended, what it spent."""
    if ctx.progress is None:
        return
    if isinstance(ctx.model, PhaseWatch):
        ctx.model.finish()
    ctx.progress(
        BatchEnded(
            cursor_from=record.cursor_from,
            cursor_to=record.cursor_to,
            entries=record.entries,
            outcome=record.outcome,
            tokens=record.usage.total_tokens,
            seconds=record.duration_s,
            tool_calls=record.tool_calls,
            error=record.error,
            scope=ctx.options.scope_named(record.scope),
        )
    )


def _dream_and_land(run: _Run, planned: Batch) -> bool:
    ctx, report = run.ctx, run.report
    staging = run.shared_staging or _new_staging(ctx)
    staged_before = staging.snapshot()  # a dry run's staging copy holds the earlier batches' edits
    batch = _guarded(ctx, planned, report)
    staging.scope = batch.scope  # the tools read and write only what this batch's scope may
    record = BatchRecord(batch.cursor_from, batch.cursor_to, len(batch.entries), scope=batch.scope)
    report.batches.append(record)
    meter = _Meter(run.model, record, ctx.redactor)
    # Late entries are keyed as written (the guarded batch may hold redacted text).
    where = BatchContext(
        ctx, run.git, batch, record, report, run.origins, late_now=run.late_now, written=planned.entries
    )
    try:
        dream_batch(ctx, run.model, batch, staging, record, protocols=run.protocols)
    except Interrupted as exc:
        # Nothing of the batch has landed (the edits are only in the staging copy): it is rolled
        # back by not landing it, and the cursor stays before it.
        record.outcome = "interrupted"
        record.error = f"stopped by {signal_name(exc.signum)} before the batch landed; the next run dreams it again"
        meter.stop()
        _interrupted(report, exc.signum, f"in batch {batch.cursor_from}..{batch.cursor_to}")
        return False
    except BudgetExceeded as exc:
        if not any(b.outcome in _LANDED for b in report.batches):  # every run would pay and stop here
            ran_out = f"the run's budget ran out inside its first batch ({exc}): no batch can land within it"
            hint = "raise --max-tokens, --max-cost or --max-seconds (or their settings), or lower --batch-size"
            return _batch_failed(report, record, meter, f"budget: {exc}", f"{ran_out}; {hint}")
        record.outcome, record.error = "failed", str(exc)
        report.status = STATUS_BUDGET
        report.notes.append(f"stopped in batch {batch.cursor_from}..{batch.cursor_to}: {exc}; it will run again")
        meter.stop()
        return False
    except BadReply as exc:
        meter.stop()
        run.state, go_on = content_failure(where, run.state, exc)
        return go_on
    except ModelError as exc:
        return _batch_failed(report, record, meter, f"{exc.kind}: {exc}", f"{exc.kind}: {exc.message}")
    except InputError as exc:
        # Inside a batch the input is the history and the model's replies, nothing the user must
        # fix before the next run: exit 1 with what the batch spent, never exit 2 and 0 tokens.
        # The same entries raise it again next run, so it counts toward setting the batch aside
        # like a reply that cannot be used; uncounted, they blocked every later entry for good.
        meter.stop()
        run.state, go_on = content_failure(where, run.state, BadReply(exc.message))
        return go_on
    meter.count()  # the commit message gives the batch's tokens
    _collect_staging_notes(staging, report)
    if ctx.options.dry_run:
        record.outcome = "dry_run"
        record.files_changed = _diffs(staging, staged_before)
        if record.unapplied:  # landing would weigh them (app/dream/unapplied.py); a dry run says so
            record.notes.append(
                f"the placement rules would still add {len(record.unapplied)} fact(s) phase 2 left "
                "out; a run holds those memory lacks for review"
            )
    elif run.git is not None and (why := moved_back(run.git, run.head_cursor)) is not None:
        return _batch_failed(report, record, meter, why, why)
    else:
        try:
            run.state = land_batch(where, staging, run.state)
        except EditedMeanwhile as exc:
            # Not the content's fault: the model is not counted against (no set-aside), the
            # cursor stays before the batch, and the report says why.
            return _batch_failed(report, record, meter, str(exc), str(exc))
        report.cursor_after = run.head_cursor = max(report.cursor_after, batch.cursor_to)
    report.entries_processed += record.entries
    meter.stop()
    return True


_LANDED = ("committed", "nothing_new", "held", "set_aside", "dry_run")  # a batch of the run got through


def _batch_failed(report: DreamReport, record: BatchRecord, meter: _Meter, error: str, reported: str) -> bool:
    """A batch that did not land for a reason its content did not cause: the run stops there."""
    record.outcome, record.error = "failed", error
    report.status = STATUS_FAILED
    report.errors.append(f"batch {record.cursor_from}..{record.cursor_to}: {reported}")
    meter.stop()
    return False


def _collect_staging_notes(staging: StagingWorkspace, report: DreamReport) -> None:
    """What the staging copy redacted and which files it left alone, into the report."""
    for kind, count in staging.redactions.items():
        report.redactions[kind] = report.redactions.get(kind, 0) + count
    staging.redactions.clear()
    for path, reason in staging.unreadable.items():
        note = f"{path} was left alone: {reason}"
        if note not in report.notes:
            report.notes.append(note)


def _diffs(staging: StagingWorkspace, since: dict[str, str] | None = None) -> list[FileChange]:
    """What the staging copy changed: against the disk, or (``since``: a snapshot taken before a
    dry run's batch) what that batch alone changed, not the earlier batches' edits too."""
    if since is None:
        return [unified_diff(p, as_bytes(b), as_bytes(a)) for p, (b, a) in staging.changes().items()]
    found: list[FileChange] = []
    for path, (disk, after) in staging.changes().items():
        before = since.get(path, disk)
        if before != after:
            found.append(unified_diff(path, as_bytes(before), as_bytes(after)))
    return found


def _new_staging(ctx: DreamContext) -> StagingWorkspace:
    return StagingWorkspace(
        ctx.root,
        count_tokens=ctx.counter.count,
        file_budget_tokens=ctx.options.file_context_tokens,
        redactor=ctx.redactor,
        write_check=lambda rel, before, after: pinned_problem(rel, before, after, ctx.options.write_policy),
    )


def _trusted_cursor(ctx: DreamContext, git: GitStore | None, report: DreamReport) -> int:
    """The committed cursor, not a file another program moved (app/cursor.py, issue 15)."""
    from dream_memory.app.cursor import dream_cursor_check

    check = dream_cursor_check(ctx.history, git, follow_external=ctx.options.follow_external_cursor)
    if check.trouble:
        report.notes.append(check.reason)
        ctx.log(check.reason)
    return check.value
