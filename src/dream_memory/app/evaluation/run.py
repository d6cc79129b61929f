"""Running the evaluation: each scenario in a fresh workspace, day by day (consolidate, then Dream),
then the checks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dream_memory.adapters import eval_files
from dream_memory.app.evaluation.checks import OpenGit, baseline_items, check_workspace
from dream_memory.app.evaluation.report import EvalReport, Run, ScenarioResult
from dream_memory.app.evaluation.scenarios import SESSIONS_FOLDER, Scenario, canary_value
from dream_memory.app.evaluation.scope_checks import McpProbe, ScopeViews, purge_items, scope_baseline, scope_items
from dream_memory.app.progress import Progress, RunEnded, RunStarted, ScenarioEnded, ScenarioStep
from dream_memory.core import layout
from dream_memory.core.stop import StopFlag


class EvalWorkspace(ScopeViews, Protocol):
    """One fresh, versioned workspace, with the model already chosen (and, for a scope scenario,
    its scope rules); it answers readers in each scope (``ScopeViews``) for the scope checks."""

    def consolidate(self, sessions: Sequence[Path]) -> dict[str, Any]:
        """Consolidate these session files regardless of budget; the consolidation report."""
        ...

    def dream(self) -> dict[str, Any]:
        """One Dream run; the Dream report."""
        ...


class OpenWorkspace(Protocol):
    def __call__(self, root: Path, rules: Mapping[str, str] | None = None) -> EvalWorkspace:
        """A fresh workspace at ``root``; ``rules``: a scope scenario's ``agents.defaults.scopes``."""
        ...


@dataclass(frozen=True)
class Watch:
    """What the face watches an evaluation with: its stop request and its progress events."""

    stop: StopFlag = field(default_factory=StopFlag)
    progress: Progress | None = None
    # Asks an MCP server started for one scope everything (the face builds it; scope scenarios).
    mcp: McpProbe | None = None


def run_evaluation(
    scenarios: Sequence[Scenario],
    open_workspace: OpenWorkspace,
    *,
    model: str,
    base: Path,
    log: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
    open_git: OpenGit | None = None,
    watch: Watch | None = None,
) -> EvalReport:
    """Run every scenario in its own workspace under ``base`` and check the memory it leaves
    (``open_git`` opens a workspace's repository to read it, see ``check_workspace``).

    ``watch.stop`` (set by the face's signal handler) ends the evaluation after the run in
    flight: the scenario it was part of is not checked (its memory is half made) and is named in
    the report, whose status is ``interrupted``; the scenarios done before it keep their scores.
    ``watch.progress`` gets one event per scenario day and per scenario (else each day is a
    ``log`` line).
    """
    watch = watch or Watch()
    stop, progress = watch.stop, watch.progress
    started = clock()
    report = EvalReport(model=model, results=[])
    if progress is not None:
        progress(RunStarted(command="eval", unit="scenario", total=len(scenarios), model=model, where=str(base)))
    for scenario in scenarios:
        if stop.requested:
            report.stopped_by, report.not_run = stop.signum, [s.name for s in scenarios[len(report.results) :]]
            break
        began = clock()
        result = run_scenario(
            scenario,
            open_workspace,
            base / scenario.name,
            log=log,
            open_git=open_git,
            stop=stop,
            progress=progress,
            mcp=watch.mcp,
        )
        result.duration_s = clock() - began
        if result.interrupted:
            report.stopped_by = stop.signum
            report.interrupted = scenario.name
            report.not_run = [s.name for s in scenarios[len(report.results) + 1 :]]
            break
        report.results.append(result)
        if progress is not None:
            progress(
                ScenarioEnded(scenario.name, result.passed, result.passed_items, len(result.items), result.duration_s)
            )
    report.duration_s = clock() - started
    if progress is not None:
        tokens = sum(r.to_json()["tokens"] for r in report.results)
        progress(RunEnded("eval", report.status, len(report.results), report.duration_s, tokens))
    return report


def _install_session(scenario: Scenario, name: str, target: Path, secrets: dict[str, str]) -> Path:
    text = eval_files.read_text(scenario.folder / SESSIONS_FOLDER / name)
    for placeholder, value in secrets.items():
        # The text is JSON: the value is inserted as JSON string content.
        text = text.replace(placeholder, json.dumps(value)[1:-1])
    path = target / layout.SESSIONS_DIR / name
    eval_files.write_text(path, text)
    return path


def run_scenario(
    scenario: Scenario,
    open_workspace: OpenWorkspace,
    root: Path,
    *,
    log: Callable[[str], None] = lambda m: None,
    open_git: OpenGit | None = None,
    stop: StopFlag | None = None,
    progress: Progress | None = None,
    mcp: McpProbe | None = None,
) -> ScenarioResult:
    """One scenario, day by day, then its checks; stopped after the run in flight once ``stop``
    is requested (``result.interrupted``, nothing checked). A scope scenario's workspace runs
    with its rules, and its scope checks (and the purge, last: it rewrites history) follow."""
    stop = stop or StopFlag()
    eval_files.fresh_folder(root)
    result = ScenarioResult(scenario=scenario, workspace=root)
    secrets = {spec.placeholder: canary_value(scenario, spec) for spec in scenario.canaries}
    planted = (
        {c.placeholder: canary_value(scenario, c) for _, c in scenario.scopes.canaries()} if scenario.scopes else {}
    )
    workspace = open_workspace(root, scenario.scopes.rules) if scenario.scopes else open_workspace(root)
    for day in scenario.days:
        paths = [_install_session(scenario, name, root, {**secrets, **planted}) for name in day.sessions]
        consolidated = workspace.consolidate(paths)
        if stop.requested:
            result.interrupted = True
            return result
        entries = sum(len(s.get("entries", [])) for s in consolidated.get("sessions", []))
        result.runs.append(
            Run(
                date=day.date,
                step="consolidate",
                status=str(consolidated.get("status")),
                detail=f"{entries} history entr{'y' if entries == 1 else 'ies'}",
                tokens=int(consolidated.get("usage", {}).get("total_tokens") or 0),
                errors=[str(e) for e in consolidated.get("errors", [])],
            )
        )
        dreamt = workspace.dream()
        if stop.requested:
            result.interrupted = True
            return result
        held = [f"held {h.get('id')}: {h.get('reason')}" for h in dreamt.get("held", [])]
        aside = [f"set aside {s.get('cursor_from')}..{s.get('cursor_to')}" for s in dreamt.get("set_aside", [])]
        # A failed batch says what it did get: phase-1 facts, tool calls, time (a model that
        # found facts and could not edit is not the same as one that found nothing).
        aside += [
            f"batch {b.get('cursor_from')}..{b.get('cursor_to')} {b.get('outcome')}: {b.get('facts')} fact(s), "
            f"{b.get('tool_calls')} tool call(s), {b.get('duration_s')} s"
            for b in dreamt.get("batches", [])
            if b.get("outcome") in ("failed", "set_aside")
        ]
        result.runs.append(
            Run(
                date=day.date,
                step="dream",
                status=str(dreamt.get("status")),
                detail=f"{dreamt.get('entries_processed', 0)} entries",
                tokens=int(dreamt.get("usage", {}).get("total_tokens") or 0),
                commits=len(dreamt.get("commits", [])),
                errors=[str(e) for e in dreamt.get("errors", [])] + held + aside,
            )
        )
        last = result.runs[-2:]
        if progress is not None:
            progress(
                ScenarioStep(
                    scenario.name,
                    day.date,
                    last[0].status,
                    last[0].detail,
                    last[1].status,
                    last[1].detail,
                    last[1].commits,
                )
            )
        else:
            log(
                f"{scenario.name} {day.date}: consolidate {last[0].status} ({last[0].detail}), "
                f"dream {last[1].status} ({last[1].detail}, {last[1].commits} commit(s))"
            )
    result.items = check_workspace(scenario, root, result.runs, secrets, open_git=open_git)
    result.baseline = baseline_items(scenario, result.runs, secrets)
    if scenario.scopes is not None:
        opener = open_git or eval_files.open_repository
        result.items += scope_items(scenario, root, workspace, planted, open_git=opener, mcp=mcp)
        result.items += purge_items(scenario.scopes, root, workspace, planted, open_git=opener, mcp=mcp)
        result.baseline += scope_baseline(scenario.scopes)
    return result
