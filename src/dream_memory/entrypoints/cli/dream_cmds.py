"""``dream run`` / ``dream-run``, ``dream prompt`` and ``dream demo``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dream_memory.entrypoints.cli._common import command, emit_json, json_option, load_settings, note, workspace_options

if TYPE_CHECKING:
    from dream_memory.app.dream import DreamReport
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.settings import ResolvedModel

NO_MODEL_HINT = (
    "choose one with --model (a preset name, a litellm id such as openai/gpt-4o-mini, or 'offline' "
    "for the built-in deterministic engine), DREAM_MODEL, or agents.defaults.model in the config; "
    "see docs/configuration.md"
)


def _summary(report: dict[str, Any]) -> str:
    usage = report["usage"]
    cost = "unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
    parts = [
        f"dream: {report['status']}",
        f"cursor {report['cursor_before']} -> {report['cursor_after']}",
        f"{report['entries_processed']} entries in {len(report['batches'])} batch(es)",
        f"{len(report['commits'])} commit(s)",
        f"{usage['total_tokens']} tokens, {cost}",
    ]
    lines = [", ".join(parts)]
    lines += [f"  {f['path']}: +{f['added']} -{f['removed']}" for f in report["files_changed"]]
    lines += [f"  held {h['id']}: {h['reason']}" for h in report["held"]]
    lines += [f"  set aside {s['cursor_from']}..{s['cursor_to']}: {s['reason']}" for s in report["set_aside"]]
    lines += [f"  note: {n}" for n in report.get("notes", [])]
    lines += [f"  error: {e}" for e in report["errors"]]
    return "\n".join(lines)


def _early_report(wiring: Wiring, model: str, status: str, error: str) -> dict[str, Any]:
    """The report of a run that stopped before its first batch (locked, or the lock could not
    be taken): nothing was done, and a scheduler reading stdout still gets a report saying so."""
    from dream_memory.app.dream import DreamReport
    from dream_memory.errors import DreamError

    report = DreamReport(workspace=str(wiring.root), model=model, status=status)
    try:
        cursor = wiring.history.read_dream_cursor() or 0
    except (DreamError, OSError):
        cursor = 0
    report.cursor_before = report.cursor_after = cursor
    report.errors.append(error)
    return report.to_json()


def _dream(wiring: Wiring, resolved: ResolvedModel, **option_values: Any) -> tuple[dict[str, Any], int]:
    from dream_memory.app.dream import STATUS_FAILED, STATUS_LOCKED, run_dream
    from dream_memory.errors import DreamError, LockBusy

    model = wiring.chat_model(resolved)
    options = wiring.dream_options(**option_values, resolved=resolved)
    try:
        report: DreamReport = run_dream(wiring.dream_context(model, options))
    except LockBusy as exc:
        return _early_report(wiring, model.name, STATUS_LOCKED, exc.message), exc.exit_code
    except DreamError as exc:  # before the first batch: the lock could not be taken (a full disk, ...)
        note(f"dream: error: {exc}")
        return _early_report(wiring, model.name, STATUS_FAILED, exc.message), exc.exit_code
    return report.to_json(), report.exit_code


def _unstarted_report(workspace: str | None, model: str | None, exc: BaseException) -> dict[str, Any]:
    from dream_memory.app.dream import STATUS_FAILED, DreamReport
    from dream_memory.errors import DreamError
    from dream_memory.settings import load_read_settings

    root = load_read_settings(workspace).workspace
    report = DreamReport(workspace=str(root), model=model or "", status=STATUS_FAILED)
    if isinstance(exc, DreamError):
        report.errors.append(exc.message)
    elif isinstance(exc, OSError):
        from dream_memory.adapters import fsutil

        report.errors.append(fsutil.os_error(exc, "use").message)
    else:
        report.errors.append("the input is nested too deeply to be read")
    return report.to_json()


def _check_report_path(report_path: str) -> Path:
    """Where --report goes, checked before any work: a run must not commit batches and then fail
    on a report it could never write. Opening for append creates the file, keeps what is there."""
    from dream_memory.adapters import fsutil
    from dream_memory.errors import UsageError

    path = Path(report_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        error = fsutil.os_error(exc, "write the report to", path)
        raise UsageError(f"--report: {error.message}", hint=error.hint) from exc
    return path


def _write_report(path: Path, text: str) -> str | None:
    """Write the report file; the reason when that failed (the report is on stdout anyway).

    Written in place, not by rename: FILE may be /dev/stderr, a pipe or a symlink a CI step
    reads, which a rename would replace instead of writing into."""
    from dream_memory.adapters import fsutil

    try:
        fsutil.checkpoint("report.write", path)
        path.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        return fsutil.os_error(exc, "write the report to", path).message
    return None


@command("run")
@click.option("--batch-size", type=click.IntRange(1, 20), default=None, help="Entries per batch (1..20).")
@click.option("--max-batches", type=click.IntRange(min=1), default=None, help="Stop after this many batches.")
@click.option("--dry-run", is_flag=True, help="Change nothing; the report carries the would-be diff.")
@click.option("--branch", default=None, help="Commit on this branch (created from HEAD when missing).")
@click.option(
    "--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Also write the report here."
)
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Token budget for this run.")
@click.option("--max-cost", type=click.FloatRange(min=0), default=None, help="Cost budget in USD for this run.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=None, help="Wall-time budget.")
@workspace_options
def run(
    batch_size: int | None,
    max_batches: int | None,
    dry_run: bool,
    branch: str | None,
    report_path: str | None,
    model: str | None,
    max_tokens: int | None,
    max_cost: float | None,
    max_seconds: float | None,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Dream: turn new history into memory edits, one commit per batch; prints a JSON report.

    Exit codes: 0 done (also when batches were held, set aside or a budget stopped the run),
    1 a batch failed (the cursor stays before it), 2 bad usage or config, 75 another run holds
    the workspace.
    """
    from dream_memory.adapters.preflight import prepare_run
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import ConfigError, DreamError

    try:
        settings = load_settings(workspace, config_path)
        # A workspace this process cannot write is exit 2 now, not a PermissionError mid-run.
        prepare_run(settings.workspace, settings.env, dry_run=dry_run)
        resolved = settings.model(model)  # a missing API key fails here, before any lock
        if resolved is None:
            raise ConfigError("no model is configured for dream run", hint=NO_MODEL_HINT)
        report_file = _check_report_path(report_path) if report_path else None
        wiring = Wiring(settings)
    except (DreamError, OSError, RecursionError) as exc:
        # Stopped before it could start (config, model, --report): a scheduler reading stdout
        # still gets a report saying so; the error itself ends the command as usual.
        click.echo(json.dumps(_unstarted_report(workspace, model, exc), indent=2, ensure_ascii=False))
        raise
    report, code = _dream(
        wiring,
        resolved,
        batch_size=batch_size,
        max_batches=max_batches,
        dry_run=dry_run,
        branch=branch,
        max_tokens=max_tokens,
        max_cost=max_cost,
        max_seconds=max_seconds,
    )
    text = json.dumps(report, indent=2, ensure_ascii=False)
    click.echo(text)  # first: whatever happens to the report file, stdout has the report
    note(_summary(report))
    failed = _write_report(report_file, text) if report_file is not None else None
    if failed is not None:
        note(f"dream: error: {failed} (the report is on stdout)")
        return code or 1
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
    from dream_memory.adapters import fsutil
    from dream_memory.adapters.workspace import init_workspace
    from dream_memory.app.dream import builtin_guide, guide_in_use, guide_note
    from dream_memory.core import layout

    settings = load_settings(workspace, config_path)
    root = settings.workspace
    path = root / layout.DREAM_GUIDE
    if action == "init":
        init_workspace(root)
        existing = fsutil.read_text(path)
        if existing is not None and existing.strip():
            message = f"{path} already has content; it was left as it is"
            created = False
        else:
            fsutil.atomic_write(path, builtin_guide(), site="guide")
            message = f"created {path} from the built-in guide; edit it to steer Dream for this workspace"
            created = True
        if as_json:
            emit_json({"path": str(path), "created": created, "message": message})
        else:
            click.echo(message)
        return 0
    text, source = guide_in_use(root)
    in_use = str(path) if source != "built-in" else "built-in"
    if as_json:
        emit_json({"source": source, "path": in_use, "text": text})
        return 0
    if source == "built-in":
        note(f"Dream uses its built-in guide (no content in {path}; `dream prompt init` creates an editable copy)")
    else:
        note(f"Dream uses the workspace guide {path}")
        if (cut := guide_note(root)) is not None:
            note(cut)
    from dream_memory.entrypoints.cli._common import echo  # a workspace file: escapes shown, not sent

    echo(text.rstrip("\n"))
    return 0


@command("demo")
@click.option(
    "--model", default=None, help="Model preset or litellm id (default: offline unless a model is configured)."
)
@click.option("--keep/--no-keep", default=True, show_default=True, help="Keep the temporary workspace afterwards.")
@workspace_options
def demo(model: str | None, keep: bool, workspace: str | None, config_path: str | None) -> int:
    """Run Dream end to end on a bundled sample workspace copied to a temp folder.

    No API key is needed: the built-in offline engine runs unless a model is configured.
    --workspace is ignored for the run itself (the sample is always a fresh copy).
    """
    import shutil
    import tempfile

    from dream_memory.app.demo import copy_sample
    from dream_memory.entrypoints.cli.version_cmds import log
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.settings import OFFLINE_MODEL, ResolvedModel
    from dream_memory.settings import load_settings as _load

    target = Path(tempfile.mkdtemp(prefix="dream-demo-")) / "workspace"
    copy_sample(target)
    settings = _load(str(target), config_path)
    resolved = settings.model(model) or ResolvedModel(name=OFFLINE_MODEL, source="dream demo default")
    note(f"dream demo: sample workspace copied to {target}; model {resolved.name}")
    wiring = Wiring(settings)
    report, code = _dream(wiring, resolved)
    click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    note(_summary(report))
    click.echo("")
    click.echo("$ dream log")
    click.get_current_context().invoke(log, rev=None, as_json=False, workspace=str(target), config_path=config_path)
    if keep:
        note(f"the demo workspace stays at {target}: try `dream status --workspace {target}` or `git -C {target} log`")
    else:
        shutil.rmtree(target.parent, ignore_errors=True)
    return code


COMMANDS = [run, prompt, demo]
