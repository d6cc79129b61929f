"""``dream forget``: remove a value or an entity from memory and from every commit (docs/forget.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dream_memory.entrypoints.cli._common import command, echo, emit_json, json_option, note, runtime, workspace_options

if TYPE_CHECKING:
    from dream_memory.app.forget import ForgetReport


def _lines(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:8])
    return f"line{'s' if len(numbers) > 1 else ''} {shown}{' ...' if len(numbers) > 8 else ''}"


def render(report: ForgetReport) -> None:
    would = "would be " if report.dry_run else ""
    head = "dry run: nothing written" if report.dry_run else f"purge {report.purge_id}"
    if report.resumed:
        head += " (an interrupted purge, finished)"
    echo(f"{head}; {'entity' if report.kind == 'entity' else 'value'} {would}replaced by [forgotten]")
    for rel, lines in sorted(report.files.items()):
        echo(f"  {rel}: {_lines(lines)}")
    for rel in report.removed:
        echo(f"  {rel}: {would}removed")
    for old, new in sorted(report.renamed.items()):
        echo(f"  {old}: {would}renamed to {new}")
    for rel, lines in sorted(report.history.items()):
        echo(f"  {rel}: {_lines(lines)}")
    for held_id, rel in sorted(report.held_dropped.items()):
        echo(f"  held change {held_id} on {rel}: {would}dropped (its file goes; its history stays consumed)")
    if report.cursors:
        echo(f"  history entries {would}rewritten (cursors kept): {len(report.cursors)}")
    if report.search_index:
        echo(f"  search index {would}removed (built again by the next search)")
    _render_git(report, would)


def _render_git(report: ForgetReport, would: str) -> None:
    echo(
        f"git: {len(report.commits_holding)} of {report.commits} commits hold it; "
        f"{report.commits_rewritten} {would}rewritten, {len(report.refs)} refs {would}moved"
        + ("" if report.dry_run else f", {report.pruned} old objects pruned")
    )
    for name, (old, new) in sorted(report.refs.items()):
        echo(f"  {name}: {old[:10]} -> {new[:10]}")
    if report.push:
        echo("force-push the rewritten refs:" if not report.dry_run else "after the purge, force-push with:")
        for line in report.push:
            echo(f"  {line}")
    if not report.changed:
        echo("nothing held it")
    for warning in report.warnings:
        note(f"dream: warning: {warning}")


@command("forget")
@click.option("--purge", "value", metavar="TEXT", default=None, help="The exact text to remove everywhere.")
@click.option("--entity", metavar="NAME", default=None, help="An entity: its files go, its name is removed everywhere.")
@click.option("--dry-run", is_flag=True, help="List what would change (files, lines, entries, commits); write nothing.")
@json_option
@workspace_options
def forget(
    *,
    value: str | None,
    entity: str | None,
    dry_run: bool,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Remove a value (or an entity) from the memory files, history, archive, held batches, the
    search index and every commit of git history; old commits are pruned. Replaced by
    [forgotten]; an audit record (memory/.forgotten.json) names the purge by keyed hash, never
    the value, and later writes of the value are refused. See docs/forget.md."""
    from dream_memory.app.dream.stopping import end_on_signals
    from dream_memory.app.forget import ForgetRequest, after_a_stop
    from dream_memory.app.forget import forget as run_forget

    request = ForgetRequest(value=value, entity=entity, dry_run=dry_run)
    rt = runtime(workspace, config_path)
    with end_on_signals(after_a_stop(rt.root, dry_run=dry_run)):
        report = run_forget(rt, request)
    if as_json:
        emit_json(report.to_json())
    else:
        render(report)
    return 0


COMMANDS = [forget]
