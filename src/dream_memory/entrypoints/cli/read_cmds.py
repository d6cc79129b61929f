"""Read side: ``dream resolve|entity|section|search`` and ``dream mcp`` (CONTRACT section 7)."""

from __future__ import annotations

import click

from dream_memory.entrypoints.cli._common import command, json_option, not_available, workspace_options

store_option = click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="Store root (default: $DREAM_MEMORY_STORE, else the workspace).",
)


@command("resolve")
@click.argument("path")
@store_option
@json_option
@workspace_options
def resolve(path: str, store: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """The entity whose repository root contains PATH (the longest matching root wins)."""
    not_available("resolve", 6)
    return 0


@command("entity")
@click.argument("name")
@store_option
@json_option
@workspace_options
def entity(name: str, store: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """An entity's file, bounded at 200 lines or 16 KiB."""
    not_available("entity", 6)
    return 0


@command("section")
@click.argument("name")
@store_option
@json_option
@workspace_options
def section(name: str, store: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """A section (sections/NAME.md, or soul, user, memory), bounded at 200 lines or 16 KiB."""
    not_available("section", 6)
    return 0


@command("search")
@click.argument("query")
@click.option("--max-results", type=int, default=10, show_default=True, help="At most this many sources (1..50).")
@store_option
@json_option
@workspace_options
def search(
    query: str, max_results: int, store: str | None, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    """Sources matching QUERY, at most three matching lines each."""
    not_available("search", 6)
    return 0


@command("mcp")
@store_option
@workspace_options
def mcp(store: str | None, workspace: str | None, config_path: str | None) -> int:
    """Serve the read side as an MCP server over stdio."""
    not_available("mcp", 6)
    return 0


COMMANDS = [resolve, entity, section, search, mcp]
