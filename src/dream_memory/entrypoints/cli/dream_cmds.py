"""``dream run`` / ``dream-run``, ``dream prompt`` and ``dream demo``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dream_memory.core.terminal import json_for_terminal
from dream_memory.entrypoints.cli._common import (
    command,
    echo,
    emit_json,
    json_option,
    note,
    runtime,
    workspace_options,
)
from dream_memory.entrypoints.cli.progress import progress_options, renderer

if TYPE_CHECKING:
    pass


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _summary(report: dict[str, Any]) -> str:
    usage = report["usage"]
    cost = "unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
    parts = [
        f"dream: {report['status']}",
        f"cursor {report['cursor_before']} -> {report['cursor_after']}",
        f"{_count(report['entries_processed'], 'entry', 'entries')} in "
        f"{_count(len(report['batches']), 'batch', 'batches')}",
        f"{len(report['commits'])} commit(s)",
        f"{usage['total_tokens']} tokens, {cost}",
    ]
    lines = [", ".join(parts)]
    lines += [f"  {f['path']}: +{f['added']} -{f['removed']}" for f in report["files_changed"]]
    lines += [f"  held {h['id']}: {h['reason']}" for h in report["held"]]
    lines += [f"  set aside {s['cursor_from']}..{s['cursor_to']}: {s['reason']}" for s in report["set_aside"]]
    lines += [
        f"  left pending {p['cursor_from']}..{p['cursor_to']}: ran in the batch set aside, not set aside; "
        "the next run dreams them"
        for b in report["batches"]
        if (p := b["left_pending"])
    ]
    lines += [f"  note: {n}" for n in report.get("notes", [])]
    lines += [f"  error: {e}" for e in report["errors"]]
    return "\n".join(lines)


def _json_out(as_json: bool) -> bool:
    """The JSON report goes to stdout unless a person reads it there (a terminal, no --json):
    scripts, schedulers and pipes always get JSON."""
    return as_json or not sys.stdout.isatty()


def _check_report_path(report_path: str, workspace: Path, config: Path | None) -> Path:
    """Where --report goes, checked before any work: a run must not commit batches and then fail
    on a report it could never write, nor write it over the workspace's own files or its config."""
    from dream_memory.app.report_file import check_report_file

    return check_report_file(Path(report_path), workspace, config)


def _write_report(path: Path, text: str) -> str | None:
    from dream_memory.app.report_file import write_report_file

    return write_report_file(path, text)


@command("run")
# The numbers are checked by the service (app/runs.py), as they are for the API: click only parses.
@click.option("--batch-size", type=int, default=None, help="Entries per batch (1..20).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON report on stdout (the default unless it is a terminal)."
)
@click.option("--max-batches", type=int, default=None, help="Stop after this many batches (at least 1).")
@click.option("--dry-run", is_flag=True, help="Change nothing; the report carries the would-be diff.")
@click.option("--branch", default=None, help="Commit on this branch (created from HEAD when missing).")
@click.option(
    "--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Also write the report here."
)
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@click.option("--max-tokens", type=int, default=None, help="Token budget for this run (at least 1).")
@click.option("--max-cost", type=float, default=None, help="Cost budget in USD for this run (at least 0).")
@click.option("--max-seconds", type=float, default=None, help="Wall-time budget in seconds (more than 0).")
@progress_options
@workspace_options
def run(
    batch_size: int | None,
    max_batches: int | None,
    dry_run: bool,
    as_json: bool,
    branch: str | None,
    report_path: str | None,
    model: str | None,
    max_tokens: int | None,
    max_cost: float | None,
    max_seconds: float | None,
    quiet: bool,
    verbose: bool,
    log_format: str,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Dream: turn new history into memory edits, one commit per batch; prints a JSON report.

    The report is JSON on stdout for scripts and schedulers; when stdout is a terminal and --json
    is not given, a short summary instead (--report FILE still gets the JSON).

    Exit codes: 0 done (also when batches were held, set aside or a budget stopped the run),
    1 a batch failed (the cursor stays before it), 2 bad usage or config, 75 another run holds
    the workspace, 130 / 143 stopped by SIGINT / SIGTERM (after the model call in flight; the
    report lists every batch committed before; a second signal stops at once).
    """
    from dream_memory.app import outcome
    from dream_memory.app.dream.stopping import exit_at_once, stop_on_signals
    from dream_memory.app.runs import RunRequest, dream, unstarted_report
    from dream_memory.errors import DreamError
    from dream_memory.settings import load_read_settings

    request = RunRequest(
        model=model,
        batch_size=batch_size,
        max_batches=max_batches,
        dry_run=dry_run,
        branch=branch,
        max_tokens=max_tokens,
        max_cost=max_cost,
        max_seconds=max_seconds,
    )
    report_file: list[Path] = []

    def check_report_file() -> None:
        if report_path:
            report_file.append(_check_report_path(report_path, rt.root, rt.settings.config_path))

    # Held until the command returns (click closes it): the report is printed even after a signal.
    render = renderer(quiet, verbose, log_format)
    stop = click.get_current_context().with_resource(stop_on_signals(line=render.signal_line))
    try:
        rt = runtime(workspace, config_path)
        rt.log = render.log
        report = dream(rt, request, before_start=check_report_file, stop=stop, progress=render)
    except (DreamError, OSError, RecursionError) as exc:
        # Stopped before it could start (config, model, permissions, --report): a scheduler
        # reading stdout still gets a report saying so; the error itself ends the command as usual.
        if _json_out(as_json):
            root = load_read_settings(workspace).workspace
            emit_json(unstarted_report(root, model, exc).to_json())
        raise
    code = outcome.exit_code(report)
    text = json_for_terminal(report.to_json())  # stdout and --report FILE: the same valid UTF-8
    if _json_out(as_json):
        click.echo(text)  # first: whatever happens to the report file, stdout has the report
        render.note(_summary(report.to_json()), failed=report.status == outcome.Status.FAILED)
    else:
        echo(_summary(report.to_json()) + "\n  (the full report: dream run --json, or --report FILE)")
    failed = _write_report(report_file[0], text) if report_file else None
    if failed is not None:
        note(f"dream: error: {failed} (the report is on stdout)")
        return code or 1
    if stop.requested:
        exit_at_once(code)  # a scheduler's grace period is running: no slow interpreter shutdown
    return code


@command("prompt")
@click.argument("action", required=False, type=click.Choice(["init"]))
@json_option
@workspace_options
def prompt(action: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Show which Dream guide is in use; `init` creates an editable prompts/dream.md.

    When prompts/dream.md has content, Dream follows it for this workspace instead of the built-in
    guide. Delete it or leave it empty to return to the built-in guide.
    """
    from dream_memory.app.prompt import guide, init_guide

    rt = runtime(workspace, config_path)
    if action == "init":
        created = init_guide(rt)
        if as_json:
            emit_json(created.to_json())
        else:
            click.echo(created.message)
        return 0
    report = guide(rt)
    if as_json:
        emit_json(report.to_json())
        return 0
    if report.source == "built-in" and report.note is None:
        note(
            f"Dream uses its built-in guide (no content in {rt.root / 'prompts' / 'dream.md'}; "
            "`dream prompt init` creates an editable copy)"
        )
    elif report.source != "built-in":
        note(f"Dream uses the workspace guide {report.path}")
    if report.note is not None:
        note(report.note)
    echo(report.text.rstrip("\n"))  # a workspace file: escapes shown, not sent
    return 0


@command("demo")
@click.option(
    "--model", default=None, help="Model preset or litellm id (default: offline unless a model is configured)."
)
@click.option("--keep/--no-keep", default=True, show_default=True, help="Keep the temporary workspace afterwards.")
@json_option
@workspace_options
def demo(model: str | None, keep: bool, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Run Dream end to end on a bundled sample workspace copied to a temp folder.

    No API key is needed: the built-in offline engine runs unless a model is configured.
    --workspace is ignored for the run itself (the sample is always a fresh copy).
    """
    from dream_memory.app import outcome
    from dream_memory.app.demo import DemoRequest
    from dream_memory.app.demo import demo as run_demo
    from dream_memory.app.runtime import stderr_logger
    from dream_memory.entrypoints.cli.version_cmds import render_log

    done = run_demo(DemoRequest(model=model, config=config_path, keep=keep), log=stderr_logger)
    report = done.dream.to_json()
    if as_json:  # one document: the run's report and the change it made
        kept = str(done.workspace) if keep else None
        emit_json({"workspace": kept, "report": report, "latest": done.latest.to_json()})
        note(_summary(report))
    else:
        emit_json(report)
        note(_summary(report))
        click.echo("")
        click.echo("$ dream log")
        render_log(done.latest, as_json=False)
    target = done.workspace
    if keep:
        note(f"the demo workspace stays at {target}: try `dream status --workspace {target}` or `git -C {target} log`")
    return outcome.exit_code(done)


COMMANDS = [run, prompt, demo]
