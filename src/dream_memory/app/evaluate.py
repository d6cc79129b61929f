"""``eval``: the retention evaluation, each scenario in a fresh workspace run through the same
services as ``dream init``, ``dream consolidate`` and ``dream run``, with the user's
configuration (guards, budgets, secret allowlist) and one model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.app.models import ModelChoice, chosen_model
from dream_memory.core.stop import StopFlag

if TYPE_CHECKING:
    from dream_memory.app.evaluation import EvalReport
    from dream_memory.app.evaluation.scope_checks import McpProbe
    from dream_memory.app.progress import Progress
    from dream_memory.app.runtime import Runtime
    from dream_memory.core.ports import ChatModel


@dataclass(frozen=True)
class EvalRequest:
    base: Path  # where the scenario workspaces are made (the face owns the temporary folder)
    model: str | ChatModel | None = None  # None: the configured model, else the offline engine
    names: Sequence[str] = ()  # only these scenarios (default: every one)
    scenarios_dir: Path | None = None  # a folder of the user's own scenarios
    # Asks an MCP server started for one scope everything (the CLI passes the real server's);
    # None: the scope checks ask the read services only, and say so.
    mcp: McpProbe | None = None


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

    # --- what a reader in one scope is answered (the scope scenario's checks) ---------------------

    def context(self, scope: str) -> str:
        import json

        from dream_memory.app.context import ContextRequest, context

        return json.dumps(context(self.rt, ContextRequest(scope=scope)).to_json(), ensure_ascii=False)

    def search(self, scope: str, query: str) -> str:
        import json

        from dream_memory.app.read import ReaderScope, search_store

        who = ReaderScope(scope, self.rt.settings.scope_rules)
        found = search_store(self.rt.root, query, max_results=50, history=True, scope=who)
        return json.dumps(found.to_json(), ensure_ascii=False)

    def forget(self, value: str) -> dict[str, Any]:
        from dream_memory.app.forget import ForgetRequest, forget

        report: dict[str, Any] = forget(self.rt, ForgetRequest(value=value)).to_json()
        return report


def _with_scopes(rt: Runtime, rules: Mapping[str, str] | None) -> Runtime:
    """``rt`` whose configuration has a scope scenario's rules (``agents.defaults.scopes``)."""
    if rules is None:
        return rt
    config = rt.settings.config
    defaults = dataclasses.replace(config.agents.defaults, scopes=dict(rules))
    agents = dataclasses.replace(config.agents, defaults=defaults)
    settings = dataclasses.replace(rt.settings, config=dataclasses.replace(config, agents=agents))
    return dataclasses.replace(rt, settings=settings)


def evaluate(
    rt: Runtime, request: EvalRequest, *, stop: StopFlag | None = None, progress: Progress | None = None
) -> EvalReport:
    """The evaluation. ``stop`` (the face's signal handler) ends it after the run in flight, status
    ``interrupted``; ``progress`` gets one event per scenario day and per scenario."""
    from dream_memory.app.evaluation import load_scenarios, run_evaluation
    from dream_memory.app.evaluation.run import Watch

    scenarios = load_scenarios(request.scenarios_dir, tuple(request.names))
    # One model for every scenario's runs (they get the choice, so none of them closes it).
    with chosen_model(rt, request.model, fallback_offline=True, what="dream eval") as choice:
        if progress is None:
            rt.log(f"eval: {len(scenarios)} scenario(s) with model {choice.name}, in {request.base}")
        return run_evaluation(
            scenarios,
            lambda root, rules=None: ServiceWorkspace(_with_scopes(rt.for_workspace(root), rules), choice, stop),
            model=choice.name,
            base=request.base,
            log=lambda message: rt.log(f"eval: {message}"),
            watch=Watch(stop or StopFlag(), progress, request.mcp),
        )
