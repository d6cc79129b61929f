"""``dream consolidate`` / ``dream-consolidate``: fold long sessions into history.jsonl."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, not_available, workspace_options


@command("consolidate")
@click.option(
    "--session", "sessions", multiple=True, type=click.Path(dir_okay=False), help="A session file (repeatable)."
)
@click.option("--all", "all_sessions", is_flag=True, help="Every sessions/*.jsonl of the workspace.")
@click.option("--budget", type=int, default=None, help="Token budget of unconsolidated messages per session.")
@click.option("--force", is_flag=True, help="Consolidate regardless of the budget.")
@click.option("--dry-run", is_flag=True, help="Change nothing; report what would be archived.")
@click.option("--update-sessions", is_flag=True, help="Also write last_consolidated into each session file.")
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@workspace_options
def consolidate(
    sessions: tuple[str, ...],
    all_sessions: bool,
    budget: int | None,
    force: bool,
    dry_run: bool,
    update_sessions: bool,
    model: str | None,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Summarize the oldest safe slice of long sessions into memory/history.jsonl."""
    not_available("consolidate", 5)
    return 0


COMMANDS = [consolidate]
