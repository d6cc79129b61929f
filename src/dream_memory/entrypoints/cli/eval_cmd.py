"""``dream eval``: the retention evaluation on the bundled scenario set."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, json_option, not_available, workspace_options


@command("eval")
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@json_option
@workspace_options
def eval_(model: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Retention evaluation on the bundled scenario set, with the configured model."""
    not_available("eval", 9)
    return 0


COMMANDS = [eval_]
