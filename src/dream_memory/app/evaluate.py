"""``eval``: the retention evaluation, each scenario in a fresh workspace run through the same
services as ``dream init``, ``dream consolidate`` and ``dream run``, with the user's
configuration (guards, budgets, secret allowlist) and one model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.app.models import ModelChoice, choose_model
from dream_memory.core.stop import StopFlag

if TYPE_CHECKING:
    from dream_memory.app.evaluation import EvalReport
    from dream_memory.app.progress import Progress
    from dream_memory.app.runtime import Runtime
    from dream_memory.core.ports import ChatModel


@dataclass(frozen=True)
class EvalRequest:
    base: Path  # where the scenario workspaces are made (the face owns the temporary folder)
    model: str | ChatModel | None = None  # None: the configured model, else the offline engine
    names: Sequence[str] = ()  # only these scenarios (default: every one)
    scenarios_dir: Path | None = None  # a folder of the user's own scenarios


class ServiceWorkspace:
    """One scenario's workspace (``app.evaluation.EvalWorkspace``), driven through the services."""

    def __init__(self, rt: Runtime, model: ModelChoice, stop: StopFlag | None = None) -> None:
        from dream_memory.app.init import init_workspace

        self.rt, self.model, self.stop = rt, model, stop
        init_workspace(rt, guide_notes=False)

    def consolidate(self, sessions: Sequence[Path]) -> dict[str, Any]:
        from dream_memory.app.runs import ConsolidateRequest, consolidate

        request = ConsolidateRequest(model=self.model, sessions=list(sessions), force=True)
        return consolidate(self.rt, request, stop=self.stop).to_json()

    def dream(self) -> dict[str, Any]:
        from dream_memory.app.runs import RunRequest, dream

        return dream(self.rt, RunRequest(model=self.model), stop=self.stop).to_json()


def evaluate(
    rt: Runtime, request: EvalRequest, *, stop: StopFlag | None = None, progress: Progress | None = None
) -> EvalReport:
    """The evaluation. ``stop`` (the face's signal handler) ends it after the run in flight, status
    ``interrupted``; ``progress`` gets one event per scenario day and per scenario."""
    from dream_memory.app.evaluation import load_scenarios, run_evaluation
    from dream_memory.app.evaluation.run import Watch

    scenarios = load_scenarios(request.scenarios_dir, tuple(request.names))
    choice = choose_model(rt, request.model, fallback_offline=True, what="dream eval")
    if progress is None:
        rt.log(f"eval: {len(scenarios)} scenario(s) with model {choice.name}, in {request.base}")
    return run_evaluation(
        scenarios,
        lambda root: ServiceWorkspace(rt.for_workspace(root), choice, stop),
        model=choice.name,
        base=request.base,
        log=lambda message: rt.log(f"eval: {message}"),
        watch=Watch(stop or StopFlag(), progress),
    )
