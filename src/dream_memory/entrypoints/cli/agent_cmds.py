"""The agent side: ``dream context``."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import (
    command,
    echo,
    emit_json,
    json_option,
    load_settings,
    note,
    workspace_options,
)


@command("context")
@click.option("--budget", type=int, default=None, help="Token budget of the block (default from config).")
@click.option("--session-key", default=None, help="Only recent history of this session.")
@click.option(
    "--path",
    "work_path",
    default=None,
    help="Also include the entity whose repository root holds this folder (e.g. the current repository).",
)
@json_option
@workspace_options
def context(
    budget: int | None,
    session_key: str | None,
    work_path: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """The memory block an agent puts in its system prompt, bounded by a token budget.

    SOUL.md, USER.md, memory/MEMORY.md, always-on skills, then the history Dream has not consumed
    yet (newest kept). Over the budget, older history goes first, then large files become outlines.
    Read-only: it never creates or migrates anything.
    """
    from dream_memory.app.context import entity_for_path, memory_context
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import UsageError

    settings = load_settings(workspace, config_path)
    wiring = Wiring(settings)
    limit = budget if budget is not None else settings.config.agents.defaults.context.budget_tokens
    if limit < 50:
        raise UsageError("--budget must be at least 50 tokens")
    extra = []
    if work_path is not None:
        found = entity_for_path(settings.store, work_path, excludes=settings.excludes, home=settings.env.get("HOME"))
        extra = [found] if found is not None else []
    block = memory_context(
        wiring.root,
        wiring.history,
        budget=limit,
        counter=wiring.token_counter(),
        session_key=session_key,
        extra_parts=extra,
    )
    if as_json:
        emit_json(block.to_json())
    else:
        echo(block.text, nl=False)
        note(f"dream context: {block.tokens} of {limit} tokens; " + ("; ".join(block.left_out) or "nothing left out"))
    return 0


COMMANDS = [context]
