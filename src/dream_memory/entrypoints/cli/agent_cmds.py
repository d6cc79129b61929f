"""The agent side: ``dream context``."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import (
    command,
    echo,
    emit_json,
    json_option,
    note,
    runtime,
    workspace_options,
)


@command("context")
@click.option(
    "--budget",
    type=int,
    default=None,
    help="Token budget of the block, 200..200000 (default: agents.defaults.context.budgetTokens).",
)
@click.option(
    "--session-key",
    metavar="KEY",
    default=None,
    help="Read as this session: its scope's files (agents.defaults.scopes) and only its recent history.",
)
@click.option(
    "--scope",
    metavar="NAME",
    default=None,
    help="Read as this scope: the shared files plus its own (default: $DREAM_MEMORY_SCOPE, else shared).",
)
@click.option(
    "--path",
    "work_path",
    default=None,
    help="Also include the entity whose repository root holds this folder (e.g. the current repository).",
)
@click.option(
    "--sources",
    is_flag=True,
    help='After each line Dream wrote, say where it was learned ("learned from session ... on ...").',
)
@json_option
@workspace_options
def context(
    budget: int | None,
    session_key: str | None,
    scope: str | None,
    work_path: str | None,
    sources: bool,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """The memory block an agent puts in its system prompt, bounded by a token budget.

    SOUL.md, USER.md, memory/MEMORY.md (and a private scope's own USER.md and MEMORY.md),
    always-on skills, then the history Dream has not consumed yet (newest kept). Over the budget,
    older history goes first, then large files become outlines. Read-only: it never creates or migrates anything.
    """
    from dream_memory.app.context import ContextRequest
    from dream_memory.app.context import context as memory_context

    block = memory_context(
        runtime(workspace, config_path), ContextRequest(budget, session_key, work_path, sources, scope)
    )
    if as_json:
        emit_json(block.to_json())
    else:
        echo(block.text, nl=False)
        left_out = "; ".join(block.left_out) or "nothing left out"
        note(f"dream context: {block.tokens} of {block.budget} tokens; {left_out}")
    return 0


COMMANDS = [context]
