"""``dream why`` and ``dream blame``: where a memory line comes from (docs/provenance.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from dream_memory.entrypoints.cli.read_cmds import scope_options

if TYPE_CHECKING:
    from dream_memory.app.read import ReaderScope
    from dream_memory.app.runtime import Runtime


def _reader(rt: Runtime, scope: str | None, session_key: str | None) -> ReaderScope:
    """The caller's scope, with the rules that judge each source entry's session key."""
    from dream_memory.app.read import caller_scope

    return caller_scope(scope, session_key, rt.settings.env, lambda: rt.settings.scope_rules, need_rules=True)


def _warn(warning: str | None) -> None:
    if warning:
        note(f"dream: warning: {warning}")


@command("why")
# Both forms in the usage line: a line by its place, or every line holding a text.
@click.argument("target", required=False, metavar="(PATH:LINE | --text TEXT)")
@click.option("--text", default=None, help="Explain every committed memory line holding this text.")
@scope_options
@json_option
@workspace_options
def why(
    target: str | None,
    text: str | None,
    scope: str | None,
    session_key: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Where a memory line comes from: the commit that wrote it, when, the model, the fact, and
    each history entry the fact was learnt from (cursor, time, session, content).

    Hand-written lines say so (memory: manual edits, or a commit of your own, with its author);
    template lines say memory: init. Reads what is committed (read-only).
    """
    from dream_memory.app.why_scope import why_for

    rt = runtime(workspace, config_path)
    found = why_for(rt, _reader(rt, scope, session_key), target, text)
    _warn(found[0].warning if found and text is None else None)
    if as_json:
        emit_json([f.to_json() for f in found] if text is not None else found[0].to_json())
        return 0
    echo("\n".join(item.to_text() for item in found).rstrip("\n"))
    return 0


@command("blame")
@click.argument("path")
@click.option("--rev", default="HEAD", show_default=True, help="The version of the file to explain.")
@scope_options
@json_option
@workspace_options
def blame(
    path: str,
    rev: str,
    scope: str | None,
    session_key: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Every line of a memory file with the commit that wrote it and its sources, like git blame
    (read-only): Dream lines with the history entries they come from, hand-written lines as
    manual, template lines as init."""
    from dream_memory.app.why_scope import blame_for

    rt = runtime(workspace, config_path)
    lines = blame_for(rt, _reader(rt, scope, session_key), path, rev)
    _warn(lines[0].warning if lines else None)
    if as_json:
        emit_json([line.to_json() for line in lines])
        return 0
    width = len(str(len(lines)))
    for line in lines:
        if line.sources:
            origin = "entries " + ",".join(str(s.cursor) for s in line.sources)
        elif line.kind == "dream":
            origin = "source unknown"
        else:
            origin = line.kind
        when = line.time[:16].replace("T", " ")
        # A CRLF file's line keeps its CR in --json (the bytes as stored); on screen it would
        # show as a literal \x0d on every line (docs/provenance.md).
        text = line.text.removesuffix("\r")
        echo(f"{line.commit[:8]} {when} {origin[:24]:<24} {line.line:>{width}}| {text}")
    return 0


COMMANDS = [why, blame]
