"""``run`` (Dream) and ``consolidate``: the services every face calls.

Each does, in this order: validate the request, choose the model (a missing key variable fails
here, before any lock), check the workspace (``rt.preflight``), then the run itself, and returns
its typed report. A run another process holds the lock for is a report with status ``locked``
(exit 75) on every face, never an exception; so is a run that stopped before its first batch.
A model built from a name is closed when the run ends (``models.chosen_model``), so a host calling
these again and again keeps no socket per run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.workspace import require_usable_history
from dream_memory.app.models import ModelChoice, chosen_model
from dream_memory.app.outcome import Status, as_error
from dream_memory.app.progress import Progress, ProgressEvent, RunEnded, RunStarted
from dream_memory.errors import DreamError, InputError, LockBusy
from dream_memory.settings.schema import Range

if TYPE_CHECKING:
    from dream_memory.app.consolidate import ConsolidateReport
    from dream_memory.app.dream import DreamReport
    from dream_memory.app.runtime import Runtime
    from dream_memory.core.ports import ChatModel
    from dream_memory.core.stop import StopFlag


# --- run -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest:
    model: str | ChatModel | ModelChoice | None = None  # None: the configured model
    batch_size: int | None = None  # None: agents.defaults.dream.maxBatchSize
    max_batches: int | None = None
    dry_run: bool = False
    branch: str | None = None
    max_tokens: int | None = None  # this run's budgets; None: the config's
    max_cost: float | None = None
    max_seconds: float | None = None


def _check_run(request: RunRequest) -> None:
    from dream_memory.app.inputs import check_number, setting_range
    from dream_memory.settings.schema import DreamSettings

    numbers = (
        ("batch_size", "--batch-size", "the batch size", "max_batch_size", True),
        ("max_tokens", "--max-tokens", "the run's token budget", "max_tokens_per_run", True),
        ("max_cost", "--max-cost", "the run's cost budget in USD", "max_cost_usd", False),
        ("max_seconds", "--max-seconds", "the run's time budget in seconds", "max_wall_seconds", False),
    )
    for name, flag, what, setting, whole in numbers:
        value = getattr(request, name)
        if value is not None:
            check_number(value, what, setting_range(DreamSettings, setting), whole=whole, names=(name, flag))
    if request.max_batches is not None:
        check_number(
            request.max_batches, "max batches", Range(ge=1), whole=True, names=("max_batches", "--max-batches")
        )


def stopped_report(rt: Runtime, model: str, status: str, error: DreamError) -> DreamReport:
    """The report of a run that stopped before its first batch (locked, or the lock could not be
    taken): nothing was done, and a scheduler reading the report still learns why."""
    from dream_memory.app.dream import DreamReport

    report = DreamReport(workspace=str(rt.root), model=model, status=status)
    try:
        cursor = rt.history.read_dream_cursor() or 0
    except (DreamError, OSError):
        cursor = 0
    report.cursor_before = report.cursor_after = cursor
    report.errors.append(error.message)
    if status == Status.FAILED:
        report.failed_exit = error.exit_code
    return report


def unstarted_report(workspace: Path, model: str | None, exc: DreamError | OSError | RecursionError) -> DreamReport:
    """The report of a run that could not start (config, model, the workspace's permissions):
    the CLI prints it on stdout before the error ends the command."""
    from dream_memory.app.dream import DreamReport

    report = DreamReport(workspace=str(workspace), model=model or "", status=Status.FAILED)
    report.errors.append(as_error(exc).message)
    return report


def dream(
    rt: Runtime,
    request: RunRequest,
    *,
    before_start: Callable[[], None] | None = None,
    stop: StopFlag | None = None,
    progress: Progress | None = None,
) -> DreamReport:
    """One Dream run. ``before_start`` is the face's own last check (the CLI's ``--report``
    file), run after the service's checks and before any lock or work. ``stop`` is set by the
    face's signal handler (the run ends between model calls, status ``interrupted``);
    ``progress`` gets the run's events (app/progress.py) as it goes."""
    from dataclasses import replace

    from dream_memory.app.dream import run_dream

    _check_run(request)
    rt.require_workspace()  # a mistyped path is exit 2, never a new workspace (only init makes one)
    rt.preflight(dry_run=request.dry_run)  # a workspace this process cannot write: exit 2 now
    require_usable_history(rt.root, write=False)  # history a folder, or unreadable: exit 2 now
    started: list[ProgressEvent] = []

    def watch(event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            started.append(event)
        if progress is not None:
            progress(event)

    watched: Progress | None = None if progress is None else watch
    with chosen_model(rt, request.model, what="dream run") as choice:
        if before_start is not None:
            before_start()
        options = rt.dream_options(
            batch_size=request.batch_size,
            max_batches=request.max_batches,
            dry_run=request.dry_run,
            branch=request.branch,
            max_tokens=request.max_tokens,
            max_cost=request.max_cost,
            max_seconds=request.max_seconds,
            resolved=choice.resolved,
        )
        try:
            ctx = replace(rt.dream_context(choice.chat, options), progress=watched)
            report = run_dream(ctx if stop is None else replace(ctx, stop=stop))
        except LockBusy as exc:
            report = stopped_report(rt, choice.name, Status.LOCKED, exc)
        except DreamError as exc:  # before the first batch: the lock could not be taken (a full disk, ...)
            rt.log(f"error: {exc}")
            report = stopped_report(rt, choice.name, Status.FAILED, exc)
    if progress is not None:
        if not started:  # ended before it knew its batches (the lock was busy, ...): run_started still frames it
            progress(RunStarted(command="run", unit="batch", model=choice.name, where=str(rt.root)))
        done = sum(1 for b in report.batches if b.outcome not in ("", "failed", "interrupted"))
        progress(RunEnded("run", report.status, done, report.duration_s, report.usage.total_tokens))
    return report


# --- consolidate -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsolidateRequest:
    model: str | ChatModel | ModelChoice | None = None
    sessions: Sequence[str | os.PathLike[str]] = ()
    all_sessions: bool = False  # every session of the workspace (sessions/ and nanobot's store)
    budget: int | None = None  # None: agents.defaults.consolidate.budgetTokens, else from the window
    force: bool = False
    dry_run: bool = False
    update_sessions: bool = False
    cwd: Path | None = None  # relative session paths are relative to this (default: the workspace)


def consolidate(
    rt: Runtime, request: ConsolidateRequest, *, stop: StopFlag | None = None, progress: Progress | None = None
) -> ConsolidateReport:
    """One consolidation. ``stop`` is set by the face's signal handler: the run stops before the
    next session (the slice in flight lands whole or not at all), status ``interrupted``;
    ``progress`` gets the run's events (app/progress.py) as it goes."""
    from dream_memory.app.consolidate import consolidate_sessions, select_sessions

    if isinstance(request.sessions, str | bytes | os.PathLike):
        # Iterated, one path is its characters: "session file s does not exist".
        raise InputError(
            f"sessions must be a list of session files, not one {type(request.sessions).__name__}",
            hint="pass a list, e.g. sessions=['sessions/cli_direct.jsonl']",
        )
    if request.budget is not None:
        from dream_memory.app.inputs import check_number, setting_range
        from dream_memory.settings.schema import ConsolidateSettings

        bounds = setting_range(ConsolidateSettings, "budget_tokens")
        check_number(request.budget, "the consolidation budget", bounds, whole=True, names=("budget", "--budget"))
    rt.require_workspace()
    # Summaries are appended to history.jsonl: one that cannot take them is exit 2 before any
    # model call is paid for (a dry run only reads it).
    require_usable_history(rt.root, write=not request.dry_run)
    with chosen_model(rt, request.model, what="dream consolidate") as choice:
        sources: list[str] = []
        passed_over: list[str] = []
        paths = select_sessions(
            rt.root,
            [str(s) for s in request.sessions],
            request.all_sessions,
            request.cwd or rt.root,
            nanobot_roots=rt.nanobot_session_roots(),
            sources=sources,
            passed_over=passed_over,
        )
        if not request.dry_run:
            rt.ensure_workspace()
        ctx = rt.consolidate_context(
            choice.chat,
            budget=request.budget,
            force=request.force,
            dry_run=request.dry_run,
            update_sessions=request.update_sessions,
            context_window=choice.context_window,
            max_tokens=choice.max_tokens,
        )
        if stop is not None:
            ctx.stop = stop
        ctx.progress = progress
        if progress is not None:
            progress(RunStarted(command="consolidate", unit="session", total=len(paths), model=choice.name))
        report = consolidate_sessions(ctx, paths)
    report.sources = sources
    report.warnings[:0] = passed_over
    if progress is not None:
        done = sum(1 for s in report.sessions if s.outcome not in ("failed", "not_attempted", "interrupted"))
        progress(RunEnded("consolidate", report.status, done, report.duration_s, report.usage.total_tokens))
    return report
