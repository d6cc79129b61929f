"""``dream schedule``: the effective schedule, or a ready workflow / CronJob."""

from __future__ import annotations

import click

from dream_memory import __version__
from dream_memory.entrypoints.cli._common import command, emit_json, json_option, load_settings, note, workspace_options


@command("schedule")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cron", "github", "k8s"]),
    default="cron",
    show_default=True,
    help="cron: the expression; github: a ready workflow (docs/examples/dream-pr.yml); "
    "k8s: a ready CronJob with its PersistentVolumeClaim (deploy/kubernetes/cronjob-pvc.yaml).",
)
@click.option(
    "--action",
    "action_ref",
    default=None,
    help="For --format github: the action reference (default dream-memory/dream-memory@v"
    + __version__
    + "; pin a full commit SHA in production).",
)
@click.option(
    "--image",
    default=None,
    help=f"For --format k8s: the container image (default dream-memory:{__version__}).",
)
@json_option
@workspace_options
def schedule(
    fmt: str,
    action_ref: str | None,
    image: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """The Dream schedule from config: `cron` wins over `intervalH`.

    intervalH N becomes a cron expression that never waits longer than N hours (hours that do not
    divide 24 round down to one that does: 5 -> every 4 hours); a note on stderr says so. A bad
    cron expression is exit 2, naming the field. Times are UTC on GitHub and in the CronJob.
    """
    from dream_memory.core import schedule as sched
    from dream_memory.errors import UsageError

    # An option the chosen format has no place for would be dropped without a word.
    for given, option, wanted in ((image, "--image", "k8s"), (action_ref, "--action", "github")):
        if given is not None and fmt != wanted:
            raise UsageError(
                f"{option} is for --format {wanted}; --format {fmt} has no place for it",
                hint=f"add --format {wanted}, or leave out {option}",
            )
    settings = load_settings(workspace, config_path)
    dream = settings.dream
    result = sched.effective_schedule(dream.cron, dream.interval_h)
    if result.note:
        note(f"dream: note: {result.note}")
    if fmt == "cron":
        if as_json:
            emit_json(
                {
                    "expression": result.expression,
                    "source": result.source,
                    "exact": result.exact,
                    "note": result.note,
                    "config": str(settings.config_path) if settings.config_path else None,
                }
            )
        else:
            click.echo(result.expression)
        return 0
    if fmt == "github":
        gap = sched.min_gap_minutes(result.expression)
        if gap is not None and gap < 5:
            note("dream: note: GitHub Actions runs scheduled workflows at most every 5 minutes")
        ref = f"{sched.DEFAULT_ACTION}@v{__version__}" if action_ref is None else action_ref
        click.echo(sched.render_github_workflow(result.expression, ref), nl=False)
        return 0
    image = f"dream-memory:{__version__}" if image is None else image
    click.echo(sched.render_k8s_cronjob(result.expression, image), nl=False)
    return 0


COMMANDS = [schedule]
