"""``dream why`` and ``dream blame``: where a memory line comes from (docs/provenance.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dream_memory.entrypoints.cli._common import command, echo, emit_json, json_option, runtime, workspace_options

if TYPE_CHECKING:
    from dream_memory.app.provenance import LineWhy, SourceEntry

_CONTENT_SHOWN = 400  # characters of an entry's content in the human view (--json has it whole)


def _fact_line(fact: dict[str, object]) -> str:
    name = f"{fact.get('name')}: " if fact.get("name") else ""
    sources = fact.get("sources") or []
    cited = ", ".join(str(c) for c in sources) if isinstance(sources, list) and sources else "unknown"
    return f"fact {fact.get('id')}  [{fact.get('tag')}] {name}{fact.get('text')}  (entries: {cited})"


def _source_lines(entry: SourceEntry) -> list[str]:
    meta = [entry.timestamp or "no timestamp"]
    if entry.session_key:
        meta.append(f"session {entry.session_key}")
    lines = [f"source  entry {entry.cursor}  {', '.join(meta)}  ({entry.where})"]
    if entry.session_file:
        lines.append(f"        from {entry.session_file}" + (f", messages {entry.messages}" if entry.messages else ""))
    content = (entry.content or "").strip()
    if content:
        shown = content if len(content) <= _CONTENT_SHOWN else content[: _CONTENT_SHOWN - 3] + "..."
        lines += [f"        | {line}" for line in shown.splitlines()]
    return lines


def render_why(found: LineWhy) -> None:
    echo(f"{found.path}:{found.line}  {found.text}")
    echo(f"commit  {found.commit[:10]}  {found.subject}")
    echo(f"when    {found.time}")
    echo(f"kind    {found.kind}  (author {found.author})")
    if found.model:
        echo(f"model   {found.model}")
    for fact in found.facts:
        echo(_fact_line(fact))
    for entry in found.sources:
        for line in _source_lines(entry):
            echo(line)
    if found.note:
        echo(f"note    {found.note}")


@command("why")
@click.argument("target", required=False, metavar="PATH:LINE")
@click.option("--text", default=None, help="Explain every committed memory line holding this text.")
@json_option
@workspace_options
def why(target: str | None, text: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Where a memory line comes from: the commit that wrote it, when, the model, the fact, and
    each history entry the fact was learnt from (cursor, time, session, content).

    Hand-written lines say so (memory: manual edits, or a commit of your own, with its author);
    template lines say memory: init. Reads what is committed (read-only).
    """
    from dream_memory.app.provenance import why as explain

    found = explain(runtime(workspace, config_path), target, text)
    if as_json:
        emit_json([f.to_json() for f in found] if text is not None else found[0].to_json())
        return 0
    for i, item in enumerate(found):
        if i:
            echo("")
        render_why(item)
    return 0


@command("blame")
@click.argument("path")
@click.option("--rev", default="HEAD", show_default=True, help="The version of the file to explain.")
@json_option
@workspace_options
def blame(path: str, rev: str, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Every line of a memory file with the commit that wrote it and its sources, like git blame
    (read-only): Dream lines with the history entries they come from, hand-written lines as
    manual, template lines as init."""
    from dream_memory.app.provenance import blame_of

    lines = blame_of(runtime(workspace, config_path), path, rev)
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
        echo(f"{line.commit[:8]} {line.time[:10]} {origin[:24]:<24} {line.line:>{width}}| {line.text}")
    return 0


COMMANDS = [why, blame]
