"""The Consolidator's report: the run's status, one record per session, and the JSON the faces
print."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dream_memory import __version__
from dream_memory.app.outcome import as_error
from dream_memory.core.chat import Usage
from dream_memory.core.consolidation import (
    Budget,
)
from dream_memory.errors import DreamError

STATUS_OK = "ok"
STATUS_NOTHING = "nothing_to_do"
STATUS_DRY_RUN = "dry_run"
STATUS_FAILED = "failed"
STATUS_LOCKED = "locked"
STATUS_INTERRUPTED = "interrupted"

OUTCOME_CONSOLIDATED = "consolidated"
OUTCOME_SKIPPED = "skipped"
OUTCOME_DRY_RUN = "would_consolidate"
OUTCOME_FAILED = "failed"
OUTCOME_NOT_ATTEMPTED = "not_attempted"
OUTCOME_INTERRUPTED = "interrupted"  # stopped by a signal before its slice landed: nothing of it did


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
    stopped_by: int | None = None  # the signal that stopped the run (status interrupted, exit 128 + it)
    notes: list[str] = field(default_factory=list)
    failed_exit: int = 1  # 2 when the workspace must be fixed first (permissions, a folder in the way)

    @property
    def exit_code(self) -> int:
        from dream_memory.app.outcome import exit_code

        return exit_code(self)

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
            "notes": self.notes,
            "stopped_by": self.stopped_by,
            "duration_s": round(self.duration_s, 4),
        }


def status_of(report: ConsolidateReport) -> str:
    if report.stopped_by is not None:  # what landed before the signal is listed all the same
        return STATUS_INTERRUPTED
    outcomes = {s.outcome for s in report.sessions}
    if OUTCOME_FAILED in outcomes or any("failed" in r.get("outcome", "") for r in report.recovered):
        return STATUS_FAILED
    if report.dry_run:
        return STATUS_DRY_RUN
    if OUTCOME_CONSOLIDATED in outcomes or report.recovered:
        return STATUS_OK
    return STATUS_NOTHING


def record_failure(report: ConsolidateReport, exc: DreamError | OSError | RecursionError) -> None:
    """``exc`` ended the run (a lock or state file it cannot write, templates it cannot create):
    status failed, the error and its hint in ``errors``, the error's exit code. Sessions that
    landed before it stay listed."""
    error = as_error(exc)
    report.errors.append(f"{error.message} ({error.hint})" if error.hint else error.message)
    report.failed_exit = error.exit_code
    report.status = STATUS_FAILED


def unstarted_report(
    workspace: str, model: str | None, budget: int | None, exc: DreamError | OSError | RecursionError
) -> ConsolidateReport:
    """The report of a run that could not start (config, model, templates it cannot create): a
    scheduler reading stdout still gets a report naming the error, as for `dream run`."""
    known = Budget(budget, "--budget") if budget is not None else Budget(0, "unknown: the run did not start")
    report = ConsolidateReport(workspace=workspace, model=model or "", budget=known)
    record_failure(report, exc)
    return report
