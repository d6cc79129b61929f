"""Running the evaluation: each scenario in a fresh workspace, day by day (consolidate, then Dream),
then the checks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from dream_memory.adapters import eval_files
from dream_memory.app.evaluation.checks import OpenGit, baseline_items, check_workspace
from dream_memory.app.evaluation.report import EvalReport, Run, ScenarioResult
from dream_memory.app.evaluation.scenarios import SESSIONS_FOLDER, Scenario, canary_value
from dream_memory.core import layout


class EvalWorkspace(Protocol):
    """One fresh, versioned workspace, with the model already chosen."""

    def consolidate(self, sessions: Sequence[Path]) -> dict[str, Any]:
        """Consolidate these session files regardless of budget; the consolidation report."""
        ...

    def dream(self) -> dict[str, Any]:
        """One Dream run; the Dream report."""
        ...


OpenWorkspace = Callable[[Path], EvalWorkspace]


def run_evaluation(
    scenarios: Sequence[Scenario],
    open_workspace: OpenWorkspace,
    *,
    model: str,
    base: Path,
    log: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
    open_git: OpenGit | None = None,
) -> EvalReport:
    """Run every scenario in its own workspace under ``base`` and check the memory it leaves
    (``open_git`` opens a workspace's repository to read it, see ``check_workspace``)."""
    started = clock()
    results = []
    for scenario in scenarios:
        began = clock()
        result = run_scenario(scenario, open_workspace, base / scenario.name, log=log, open_git=open_git)
        result.duration_s = clock() - began
        results.append(result)
    return EvalReport(model=model, results=results, duration_s=clock() - started)


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
) -> ScenarioResult:
    eval_files.fresh_folder(root)
    result = ScenarioResult(scenario=scenario, workspace=root)
    secrets = {spec.placeholder: canary_value(scenario, spec) for spec in scenario.canaries}
    workspace = open_workspace(root)
    for day in scenario.days:
        paths = [_install_session(scenario, name, root, secrets) for name in day.sessions]
        consolidated = workspace.consolidate(paths)
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
        log(
            f"{scenario.name} {day.date}: consolidate {last[0].status} ({last[0].detail}), "
            f"dream {last[1].status} ({last[1].detail}, {last[1].commits} commit(s))"
        )
    result.items = check_workspace(scenario, root, result.runs, secrets, open_git=open_git)
    result.baseline = baseline_items(scenario, result.runs, secrets)
    return result
