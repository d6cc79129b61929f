"""Progress while a run works, as typed events: the use cases emit them, the faces render them
(the CLI: plain lines, JSON lines or a live bar on stderr, ``entrypoints/cli/progress.py``).

Every text field of an event passes the run's secret guard before it is emitted (``redacted``):
a retry reason or a batch's error may quote what a model or a server sent.

The JSON names of the fields are the documented keys of ``--log-format json``
(docs/operations.md, "Progress on stderr"); change them only with that page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from dream_memory.core.ports import Redactor


@dataclass(frozen=True)
class RunStarted:
    """A command started its work: ``total`` units of ``unit`` (None: not known up front)."""

    event: ClassVar[str] = "run_started"
    command: str  # run | consolidate | eval
    unit: str  # batch | session | scenario
    total: int | None = None
    model: str = ""
    where: str = ""  # eval: the folder its scenario workspaces are made in


@dataclass(frozen=True)
class RunEnded:
    event: ClassVar[str] = "run_ended"
    command: str
    status: str  # the report's status (ok, failed, interrupted, ...)
    done: int  # units finished (batches, sessions, scenarios)
    seconds: float
    tokens: int = 0


@dataclass(frozen=True)
class BatchEnded:
    """One Dream batch as it ends: its range, how it ended, what it spent."""

    event: ClassVar[str] = "batch_ended"
    cursor_from: int
    cursor_to: int
    entries: int
    outcome: str  # committed | nothing_new | held | set_aside | failed | dry_run | interrupted
    tokens: int
    seconds: float
    tool_calls: int = 0
    error: str | None = None
    scope: str | None = None  # the batch's scope (docs/scopes.md); None when no scope rule is set


@dataclass(frozen=True)
class Retry:
    """A model call failed and is tried again after ``wait`` seconds."""

    event: ClassVar[str] = "retry"
    attempt: int  # the attempt that failed, from 1
    attempts: int  # how many are allowed in all
    wait: float
    reason: str


@dataclass(frozen=True)
class PhaseStarted:
    """One of a Dream batch's two model phases (1: facts, 2: edits) began."""

    event: ClassVar[str] = "phase_started"
    phase: int


@dataclass(frozen=True)
class PhaseEnded:
    event: ClassVar[str] = "phase_ended"
    phase: int
    calls: int  # model calls made in the phase
    tool_calls: int  # tool calls the model asked for (phase 2)
    seconds: float


@dataclass(frozen=True)
class SessionEnded:
    """One session of ``dream consolidate``: how it ended and what of it landed."""

    event: ClassVar[str] = "session_ended"
    path: str
    outcome: str  # consolidated | skipped | would_consolidate | failed | not_attempted | interrupted
    messages: int  # messages of the slice archived (or that would be)
    entries: int  # history entries appended
    tokens: int
    seconds: float
    reason: str = ""  # why it was skipped, not attempted or interrupted
    error: str | None = None


@dataclass(frozen=True)
class ScenarioStep:
    """One day of an evaluation scenario: its consolidation and its Dream run."""

    event: ClassVar[str] = "scenario_step"
    scenario: str
    date: str
    consolidate: str  # the consolidation's status
    consolidate_detail: str
    dream: str  # the Dream run's status
    dream_detail: str
    commits: int


@dataclass(frozen=True)
class ScenarioEnded:
    event: ClassVar[str] = "scenario_ended"
    scenario: str
    passed: bool
    score: int  # items passed
    items: int
    seconds: float


@dataclass(frozen=True)
class Message:
    """A log line of the run (a stale lock taken over, a recovered change): not a unit of work."""

    event: ClassVar[str] = "message"
    text: str


ProgressEvent = (
    RunStarted
    | RunEnded
    | BatchEnded
    | Retry
    | PhaseStarted
    | PhaseEnded
    | SessionEnded
    | ScenarioStep
    | ScenarioEnded
    | Message
)
Progress = Callable[[ProgressEvent], None]


def to_json(event: ProgressEvent) -> dict[str, Any]:
    """The event's documented keys: ``event`` first, then its fields (seconds rounded to ms)."""
    data: dict[str, Any] = {"event": event.event}
    for f in fields(event):
        value = getattr(event, f.name)
        data[f.name] = round(value, 3) if isinstance(value, float) else value
    return data


def redacted(event: ProgressEvent, redactor: Redactor) -> ProgressEvent:
    """The event with every text field through the secret guard."""
    changes = {
        f.name: redactor.redact(value)[0] for f in fields(event) if isinstance(value := getattr(event, f.name), str)
    }
    return replace(event, **changes)  # type: ignore[arg-type]  # every member is a dataclass


def emitter(progress: Progress | None, redactor: Redactor) -> Progress | None:
    """``progress`` with every event redacted first; None stays None (no progress wanted)."""
    if progress is None:
        return None
    sink = progress
    return lambda event: sink(redacted(event, redactor))
