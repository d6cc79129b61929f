"""``dream eval``: the retention evaluation on the bundled scenario set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from dream_memory.entrypoints.cli._common import command, emit_json, json_option, runtime, workspace_options
from dream_memory.entrypoints.cli.progress import progress_options, renderer


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
@progress_options
@workspace_options
def eval_(
    model: str | None,
    names: tuple[str, ...],
    scenarios_dir: str | None,
    keep: bool,
    as_json: bool,
    quiet: bool,
    verbose: bool,
    log_format: str,
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

    Progress on stderr: one line per scenario day and per scenario (--quiet: none, --verbose:
    more, --log-format json: JSON lines). SIGTERM or SIGINT stops it after the run in flight: the
    scenarios done keep their scores, the one in flight is named, status `interrupted`.

    Exit codes: 0 every scenario met its threshold, 1 one did not, 2 bad usage, config or scenario,
    130 / 143 stopped by SIGINT / SIGTERM.
    """
    import shutil
    import tempfile

    from dream_memory.app import outcome
    from dream_memory.app.dream.stopping import exit_at_once, stop_on_signals
    from dream_memory.app.evaluate import EvalRequest, evaluate

    render = renderer(quiet, verbose, log_format)
    stop = click.get_current_context().with_resource(stop_on_signals(line=render.signal_line))
    rt = runtime(workspace, config_path, require=False)  # only the config is read there
    rt.log = render.log
    base = Path(tempfile.mkdtemp(prefix="dream-eval-"))
    folder = Path(scenarios_dir) if scenarios_dir else None
    request = EvalRequest(base, model=model, names=names, scenarios_dir=folder, mcp=_mcp_probe)
    try:
        report = evaluate(rt, request, stop=stop, progress=render)
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
            render.log(f"eval: {result.scenario.name} workspace kept at {result.workspace}")
    code = outcome.exit_code(report)
    if stop.requested:
        exit_at_once(code)  # a scheduler's grace period is running: no slow interpreter shutdown
    return code


def _mcp_probe(root: Path, scope: str, rules: Mapping[str, str], queries: Sequence[str]) -> list[str]:
    """The scope scenario asks a real MCP server started for each scope (mcp is imported only then)."""
    from dream_memory.entrypoints.mcp_server import probe_answers

    return probe_answers(root, scope, rules, queries)


COMMANDS = [eval_]
