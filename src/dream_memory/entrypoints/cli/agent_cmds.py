"""The agent side: ``dream context`` and the retention evaluation ``dream eval``."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, json_option, not_available, workspace_options


@command("context")
@click.option("--budget", type=int, default=None, help="Token budget of the block (default from config).")
@click.option("--session-key", default=None, help="Only recent history of this session.")
@json_option
@workspace_options
def context(
    budget: int | None, session_key: str | None, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    """The memory block an agent puts in its system prompt, bounded by a token budget."""
    not_available("context", 10)
    return 0


@command("eval")
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@json_option
@workspace_options
def eval_(model: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Retention evaluation on the bundled scenario set, with the configured model."""
    not_available("eval", 9)
    return 0


COMMANDS = [context, eval_]
