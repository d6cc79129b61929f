"""``dream review``: the changes Dream held for a person, one by one (docs/dream.md, "Review")."""

from __future__ import annotations

from typing import Any

import click

from dream_memory.entrypoints.cli._common import command, echo, emit_json, json_option, runtime, workspace_options


@command("review")
@click.argument("action", required=False, default="list", metavar="[list|show|accept|reject]")
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--all", "every", is_flag=True, help="Accept or reject every held change (one commit each).")
@json_option
@workspace_options
def review(
    action: str, ids: tuple[str, ...], every: bool, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    """List, show, accept or reject the changes Dream held for review.

    A change that replaces or removes a line a person wrote (agents.defaults.dream.writePolicy),
    one a guard stopped, and the facts a batch's edits left out wait under memory/.dream_held/
    instead of landing; the rest of its batch landed. `dream review` lists them, `show ID`
    prints one with its diff, `accept ID...` merges each into the file as it is now (facts left
    out are placed anew there; a conflict exits 1 naming the file and lines, changing nothing),
    `reject ID...` drops it. Every accept and reject is its own commit.
    """
    from dream_memory.app.review import ReviewRequest
    from dream_memory.app.review import review as run_review

    result = run_review(runtime(workspace, config_path), ReviewRequest(action, ids, every))
    if as_json:
        emit_json(result)
    elif action == "list":
        _render_list(result)
    elif action == "show":
        _render_one(result)
    else:
        echo(result["message"])
    return 0


def _render_list(result: dict[str, Any]) -> None:
    if not result["count"]:
        echo("nothing is held for review")
        return
    for item in result["changes"]:
        lines = item.get("lines") or [0, 0]
        span = f"{lines[0]}" if lines[0] == lines[1] else f"{lines[0]}-{lines[1]}"
        problem = f"  (damaged record: {item['problem']})" if item.get("problem") else ""
        echo(f"{item['id']}  {item['path']} line {span}  {item['reason']}{problem}")
    for item in result["batches"]:
        echo(f"{item['id']}  whole batch {item['cursor_from']}..{item['cursor_to']}  {item['reason']}")
    echo(f"{result['count']} held; `dream review show ID`, then `accept ID` or `reject ID`")


def _render_one(result: dict[str, Any]) -> None:
    echo(f"{result['id']}  {result.get('path', 'whole batch')}  {result['reason']}")
    echo(f"from batch {result['cursor_from']}..{result['cursor_to']}")
    for fact in result.get("facts") or []:
        echo(f"asked for by {fact}")
    diff = result.get("diff", "")
    if diff:
        # As it is, with its own last line end: a CRLF file's diff ends in "\r\n", and cut to
        # its "\r" it would end in a literal \x0d.
        echo(diff, nl=not diff.endswith("\n"))


COMMANDS = [review]
