"""``dream eval``: the retention evaluation on the bundled scenario set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dream_memory.entrypoints.cli._common import command, emit_json, json_option, load_settings, note, workspace_options

if TYPE_CHECKING:
    from dream_memory.core.ports import ChatModel
    from dream_memory.settings import ResolvedModel, Settings


class WiredWorkspace:
    """A fresh workspace at ``root`` run through the same wiring as ``dream consolidate`` and
    ``dream run``, with the user's configuration (guards, budgets, secret allowlist) and one model."""

    def __init__(self, root: Path, base: Settings, resolved: ResolvedModel, model: ChatModel) -> None:
        from dataclasses import replace

        from dream_memory.app.versioning import ensure_versioned
        from dream_memory.entrypoints.wiring import Wiring

        self.resolved = resolved
        self.model = model
        self.wiring = Wiring(replace(base, workspace=root), log=lambda message: note(f"dream eval: {message}"))
        self.wiring.ensure_workspace()
        git = self.wiring.git(create=True)
        assert git is not None
        with git:
            ensure_versioned(git)

    def consolidate(self, sessions: Sequence[Path]) -> dict[str, Any]:
        from dream_memory.app.consolidate import consolidate_sessions

        ctx = self.wiring.consolidate_context(
            self.model,
            force=True,
            context_window=self.resolved.context_window,
            max_tokens=self.resolved.max_tokens,
        )
        return consolidate_sessions(ctx, list(sessions)).to_json()

    def dream(self) -> dict[str, Any]:
        from dream_memory.app.dream import run_dream

        options = self.wiring.dream_options(resolved=self.resolved)
        return run_dream(self.wiring.dream_context(self.model, options)).to_json()


@command("eval")
@click.option(
    "--model", default=None, help="Model preset or litellm id (default: offline unless a model is configured)."
)
@click.option(
    "--scenario",
    "names",
    multiple=True,
    help="Run only this scenario (repeatable; default: all of them).",
)
@click.option(
    "--scenarios",
    "scenarios_dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="A folder of your own scenarios (see docs/benchmarks.md), instead of the bundled set.",
)
@click.option("--keep", is_flag=True, help="Keep the evaluation workspaces (their paths are printed).")
@json_option
@workspace_options
def eval_(
    model: str | None,
    names: tuple[str, ...],
    scenarios_dir: str | None,
    keep: bool,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Retention evaluation: does the model keep what matters, and only that?

    Copies each bundled scenario (dated sessions with facts, a preference, updates, a request to
    forget, small talk and a planted fake secret) into a temporary workspace, runs consolidate and
    Dream day by day with the model, then checks the memory deterministically: facts kept, in the
    right file, on one line; superseded values gone from the files but still in git history; noise
    left out; no secret committed. Prints the score table (--json: the full report).

    The model is --model, else the configured one, else the built-in offline engine (like
    `dream demo`). Run it with a real model before trusting that model with your memory.
    --workspace and --config only say where the configuration is: your workspace is never touched.

    Exit codes: 0 every scenario met its threshold, 1 one did not, 2 bad usage, config or scenario.
    """
    import shutil
    import tempfile

    from dream_memory.app.evaluation import load_scenarios, run_evaluation
    from dream_memory.settings import OFFLINE_MODEL, ResolvedModel

    scenarios = load_scenarios(Path(scenarios_dir) if scenarios_dir else None, names)
    settings = load_settings(workspace, config_path)
    resolved = settings.model(model) or ResolvedModel(name=OFFLINE_MODEL, source="dream eval default")
    from dream_memory.entrypoints.wiring import Wiring

    chat = Wiring(settings).chat_model(resolved)
    base = Path(tempfile.mkdtemp(prefix="dream-eval-"))
    note(f"dream eval: {len(scenarios)} scenario(s) with model {chat.name}, in {base}")
    try:
        report = run_evaluation(
            scenarios,
            lambda root: WiredWorkspace(root, settings, resolved, chat),
            model=chat.name,
            base=base,
            log=lambda message: note(f"dream eval: {message}"),
        )
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    data = report.to_json()
    if not keep:
        for item in data["scenarios"]:
            item["workspace"] = None
    if as_json:
        emit_json(data)
    else:
        click.echo(report.table())
    if keep:
        for result in report.results:
            note(f"dream eval: {result.scenario.name} workspace kept at {result.workspace}")
    return report.exit_code


COMMANDS = [eval_]
