"""``dream schedule``: the effective schedule, or a ready workflow / CronJob."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, not_available, workspace_options


@command("schedule")
@click.option("--format", "fmt", type=click.Choice(["cron", "github", "k8s"]), default="cron", show_default=True)
@workspace_options
def schedule(fmt: str, workspace: str | None, config_path: str | None) -> int:
    """The Dream schedule from config (cron wins over intervalH)."""
    not_available("schedule", 7)
    return 0


COMMANDS = [schedule]
