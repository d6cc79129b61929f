"""``dream doctor``: the workspace's health for an operator, rendered from ``app.doctor``."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, echo, emit_json, json_option, workspace_options

MARKS = {"ok": "ok", "info": "info", "warning": "WARN", "problem": "PROBLEM"}


@command("doctor")
@click.option(
    "--check-model",
    is_flag=True,
    help="Also send one tiny request to the configured model (one attempt, 30 s at most).",
)
@click.option("--model", "cli_model", default=None, help="Check this model instead of the configured one.")
@json_option
@workspace_options
def doctor(
    check_model: bool, cli_model: str | None, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    """Check that the workspace is ready for its scheduled job; say what to fix.

    Looks at the workspace and its git repository (HEAD, unsaved edits, lock files left behind,
    an interrupted change, a pending migration, held batches), the config file, the model and
    where its key comes from (never the key itself), always-on skills, index.md rows that lead
    nowhere and free disk space. Reads only: nothing is created, locked or fixed.

    Exit codes: 0 healthy (warnings may be shown), 1 a problem was found (each named with its
    fix), 2 bad usage.
    """
    from dream_memory.app.doctor import DoctorInputs, diagnose
    from dream_memory.app.runtime import Runtime
    from dream_memory.errors import DreamError
    from dream_memory.settings import Settings, load_settings, resolve_workspace
    from dream_memory.settings.precedence import environment
    from dream_memory.settings.schema import Config

    env = environment(None)
    import warnings as _warnings

    try:
        # The unknown keys every command warns about are one of the doctor's findings.
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            settings = load_settings(workspace, config_path)
        error: DreamError | None = None
    except DreamError as exc:
        # A bad config is one of the things the doctor reports, not a reason to stop.
        settings, error = None, exc
    root = settings.workspace if settings else resolve_workspace(workspace, env)
    # Without readable settings the workspace is still checked, with the defaults.
    rt = Runtime(settings or Settings(workspace=root, config=Config(), config_path=None, env=env))
    if root.exists() and not root.is_dir():  # bad usage (exit 2, naming the path), not a finding
        rt.require_workspace()
    report = diagnose(
        DoctorInputs(
            root=root,
            settings=settings,
            config_error=error,
            config_path=settings.config_path if settings else None,
            env=env,
            history=lambda: rt.history,
            git=lambda: rt.git(create=False),
            chat_model=rt.chat_model,
            cli_model=cli_model,
            check_model=check_model,
            config_warnings=tuple(str(w.message) for w in caught if issubclass(w.category, UserWarning)),
        )
    )
    if as_json:
        emit_json(report.to_json())
        return report.exit_code
    echo(f"dream doctor: {report.workspace}")
    for check in report.checks:
        echo(f"  {MARKS[check.status]:<8} {check.name:<13} {check.summary}")
        for detail in check.details:
            echo(f"  {'':<8} {'':<13} {detail}")
        if check.fix and check.status in ("warning", "problem"):
            echo(f"  {'':<8} {'':<13} fix: {check.fix}")
    problems = report.problems
    if problems:
        echo(f"dream doctor: {len(problems)} problem(s): {', '.join(c.name for c in problems)}")
    else:
        warnings = [c.name for c in report.checks if c.status == "warning"]
        echo("dream doctor: healthy" + (f" ({len(warnings)} warning(s): {', '.join(warnings)})" if warnings else ""))
    return report.exit_code


COMMANDS = [doctor]
