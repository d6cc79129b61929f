"""``dream run`` / ``dream-run``, ``dream prompt`` and ``dream demo``."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, json_option, not_available, workspace_options


@command("run")
@click.option("--batch-size", type=click.IntRange(1, 20), default=None, help="Entries per batch (1..20).")
@click.option("--max-batches", type=click.IntRange(min=1), default=None, help="Stop after this many batches.")
@click.option("--dry-run", is_flag=True, help="Change nothing; the report carries the would-be diff.")
@click.option("--branch", default=None, help="Commit on this branch (created from HEAD when missing).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Also write the report here.")
@click.option("--model", default=None, help="Model preset or litellm id ('offline' for the built-in engine).")
@workspace_options
def run(
    batch_size: int | None,
    max_batches: int | None,
    dry_run: bool,
    branch: str | None,
    report_path: str | None,
    model: str | None,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Dream: turn new history into memory edits, one commit per batch; prints a JSON report."""
    not_available("run", 4)
    return 0


@command("prompt")
@click.argument("action", required=False, type=click.Choice(["init"]))
@json_option
@workspace_options
def prompt(action: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Show which Dream guide is in use; `init` creates an editable prompts/dream.md."""
    not_available("prompt", 4)
    return 0


@command("demo")
@click.option("--model", default=None, help="Model preset or litellm id (default: offline unless configured).")
@click.option("--keep", is_flag=True, help="Keep the temporary workspace and print its path.")
@workspace_options
def demo(model: str | None, keep: bool, workspace: str | None, config_path: str | None) -> int:
    """Run Dream end to end on a bundled sample workspace copied to a temp folder."""
    not_available("demo", 4)
    return 0


COMMANDS = [run, prompt, demo]
