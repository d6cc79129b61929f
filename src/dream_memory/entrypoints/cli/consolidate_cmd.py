"""``dream consolidate`` / ``dream-consolidate``: fold long sessions into history.jsonl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dream_memory.entrypoints.cli._common import command, emit_json, json_option, runtime, workspace_options
from dream_memory.entrypoints.cli.progress import progress_options, renderer


def _summary(report: dict[str, Any]) -> str:
    usage = report["usage"]
    done = [s for s in report["sessions"] if s["outcome"] in ("consolidated", "would_consolidate")]
    head = (
        f"dream consolidate: {report['status']}, {len(done)} of {len(report['sessions'])} session(s) "
        f"{'would be ' if report['dry_run'] else ''}consolidated, budget {report['budget_tokens']} tokens, "
        f"{usage['llm_calls']} model call(s), {usage['total_tokens']} tokens"
    )
    lines = [head]
    for item in report["recovered"]:
        lines.append(f"  {item['path']}: finished an interrupted slice ({item['outcome']})")
    for s in report["sessions"]:
        span = s["lines"] or {"first": 0, "last": 0}
        what = f"{s['messages_archived']} messages (lines {span['first']}-{span['last']})"
        tokens = f"tokens {s['tokens_before']} -> {s['tokens_after']}"
        if s["outcome"] == "would_consolidate":
            lines.append(f"  {s['path']}: would fold {what}; {tokens}")
        elif s["outcome"] == "consolidated":
            raw = ", archived raw" if s["raw_fallback"] else ""
            count = len(s["entries"])
            lines.append(f"  {s['path']}: {what} -> {count} entr{'y' if count == 1 else 'ies'}{raw}; {tokens}")
        else:
            lines.append(f"  {s['path']}: {s['outcome']}: {s['error'] or s['reason']}")
    lines += [f"  note: {n}" for n in report.get("notes", [])]
    lines += [f"  warning: {w}" for w in report["warnings"]]
    lines += [f"  error: {e}" for e in report["errors"]]
    return "\n".join(lines)


@command("consolidate")
@click.option(
    "--session", "sessions", multiple=True, type=click.Path(dir_okay=False), help="A session file (repeatable)."
)
@click.option(
    "--all",
    "all_sessions",
    is_flag=True,
    help="Every session of the workspace: sessions/*.jsonl and nanobot 0.3.5's session store for it.",
)
@click.option(
    "--budget",
    type=int,  # its range is the service's (app/runs.py), the same for the API
    default=None,
    help="Token budget of unconsolidated messages per session, at least 1 (default: config, else from the "
    "model's window).",
)
@click.option("--force", is_flag=True, help="Consolidate regardless of the budget (up to the last safe cut).")
@click.option("--dry-run", is_flag=True, help="Change nothing and call no model; report what would be archived.")
@click.option(
    "--update-sessions",
    is_flag=True,
    help="Also write the progress into each session file (last_archived and/or last_consolidated, as its agent reads).",
)
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@json_option
@progress_options
@workspace_options
def consolidate(
    sessions: tuple[str, ...],
    all_sessions: bool,
    budget: int | None,
    force: bool,
    dry_run: bool,
    update_sessions: bool,
    model: str | None,
    as_json: bool,
    quiet: bool,
    verbose: bool,
    log_format: str,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Summarize the oldest safe slice of long sessions into memory/history.jsonl.

    A session whose unconsolidated messages exceed the token budget has its oldest slice, cut only
    at the start of a user turn, summarized by the model and appended to history.jsonl, leaving
    about half the budget. Session files are only read; progress is kept in
    memory/.consolidation.json. Prints the JSON report on stdout (--json is accepted and implied).

    Progress on stderr: one line per session as it ends (--quiet: none, --verbose: more,
    --log-format json: JSON lines). SIGTERM or SIGINT stops it before the next session (the slice
    in flight lands whole or not at all) and prints the report with status `interrupted`.

    Exit codes: 0 done or nothing to do, 1 a session failed and nothing of it was archived,
    2 bad usage or config, 75 another consolidation holds the workspace, 130 / 143 stopped by
    SIGINT / SIGTERM (a second signal stops at once; the next run finishes the slice).
    """
    from dream_memory.app import outcome
    from dream_memory.app.consolidate.report import unstarted_report
    from dream_memory.app.dream.stopping import exit_at_once, stop_on_signals
    from dream_memory.app.runs import ConsolidateRequest
    from dream_memory.app.runs import consolidate as run_consolidate
    from dream_memory.errors import DreamError
    from dream_memory.settings import load_read_settings

    request = ConsolidateRequest(
        model=model,
        sessions=sessions,
        all_sessions=all_sessions,
        budget=budget,
        force=force,
        dry_run=dry_run,
        update_sessions=update_sessions,
        cwd=Path.cwd(),
    )
    render = renderer(quiet, verbose, log_format)
    # Held until the command returns (click closes it): the report is printed even after a signal.
    stop = click.get_current_context().with_resource(stop_on_signals(line=render.signal_line))
    try:
        rt = runtime(workspace, config_path)
        rt.log = render.log
        result = run_consolidate(rt, request, stop=stop, progress=render)
    except (DreamError, OSError, RecursionError) as exc:
        # Stopped before it could start (config, model, templates it cannot create on a full
        # disk or a read-only folder): the report is printed all the same, status failed with the
        # error; the error itself then ends the command with its own exit code, as for `dream run`.
        root = load_read_settings(workspace).workspace
        emit_json(unstarted_report(str(root), model, budget, exc).to_json())
        raise
    report = result.to_json()
    del as_json  # the report is JSON either way (docs/reference/commands.md)
    emit_json(report)
    # Quiet silences progress, never an error: a session archived raw because the model failed
    # leaves status ok, but the user must hear why their history holds the raw slice.
    render.note(_summary(report), failed=report["status"] == "failed" or bool(report["errors"]))
    code = outcome.exit_code(result)
    if stop.requested:
        exit_at_once(code)  # a scheduler's grace period is running: no slow interpreter shutdown
    return code


COMMANDS = [consolidate]
