"""``dream log`` and ``dream restore`` / ``dream-restore``: inspect and undo memory changes."""

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

if TYPE_CHECKING:
    from dream_memory.app.restore import LogReport
    from dream_memory.app.reverting import RestoreResult
    from dream_memory.core.versions import CommitInfo, FileChange


def _file_table(files: tuple[FileChange, ...] | list[FileChange]) -> list[str]:
    if not files:
        return ["  (no file changed)"]
    width = max(len(f.path) for f in files)
    return [f"  {f.path.ljust(width)}  +{f.added} -{f.removed}  {f.status}" for f in files]


SHALLOW_NOTE = (
    "dream: this clone is shallow (actions/checkout fetches one commit by default): older versions are "
    "not in it; `git fetch --unshallow` brings them"
)


def _render_commit(info: CommitInfo) -> None:
    echo(f"commit  {info.sha}")
    echo(f"date    {info.time}")
    echo(f"author  {info.author}")
    echo(f"subject {info.subject}")
    echo("")
    if info.shallow:
        echo("  (the oldest commit of this shallow clone: its parent is not here, so its changes are not shown)")
        return
    for line in _file_table(info.files):
        echo(line)
    from dream_memory.core.provenance import removals_in

    removed = removals_in(info.message)
    if removed:
        echo("")
        echo("Removed or replaced, and the fact that asked for it:")
        for line in removed:
            echo(f"  {line}")
    diff = "".join(f.diff for f in info.files)
    if diff:
        echo("")
        echo(diff.rstrip("\n"))


def render_log(report: LogReport, *, as_json: bool) -> None:
    """``dream log``'s output (also the end of ``dream demo``)."""
    if as_json:
        emit_json(report.to_json())
        return
    if not report.versions:
        echo("No memory versions yet: Dream has not committed anything in this workspace.")
        return
    if report.comparison is not None:
        comparison = report.comparison
        echo(f"from    {comparison.old.sha}  {comparison.old.subject}")
        echo(f"to      {comparison.new.sha}  {comparison.new.subject}")
        echo(f"commits {len(comparison.commits)}")
        for c in comparison.commits:
            echo(f"  {c.short}  {c.time}  {c.subject}")
        echo("")
        for line in _file_table(comparison.files):
            echo(line)
        diff = "".join(f.diff for f in comparison.files)
        if diff:
            echo("")
            echo(diff.rstrip("\n"))
        return
    if report.commit is None:
        if report.shallow:
            echo("No Dream change in the commits this shallow clone holds.")
        else:
            echo("No Dream change yet: the repository holds only commits made outside Dream.")
        return
    _render_commit(report.commit)


@command("log")
@click.argument("rev", required=False)
@json_option
@workspace_options
def log(rev: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Show the latest Dream change, the change REV, or the difference A..B between two versions."""
    from dream_memory.app.restore import LogRequest, log_read_only

    report = log_read_only(workspace, config_path, LogRequest(rev))
    if report.shallow:
        note(SHALLOW_NOTE)
    render_log(report, as_json=as_json)
    return 0


@command("restore")
@click.argument("rev", required=False)
@click.option("--limit", type=int, default=None, help="Versions to list, 1..1000 (default 10).")
@click.option(
    "--force",
    is_flag=True,
    help="Where the same lines changed since, take the restore's side for those lines only.",
)
@click.option("--replay", is_flag=True, help="Also move the Dream cursor back so the next run re-reads that range.")
@click.option("--apply-held", "apply_held", metavar="ID", default=None, help="Apply a held batch.")
@click.option("--discard-held", "discard_held", metavar="ID", default=None, help="Discard a held batch.")
@json_option
@workspace_options
def restore(
    *,
    rev: str | None,
    limit: int | None,
    force: bool,
    replay: bool,
    apply_held: str | None,
    discard_held: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Without REV: list recent Dream versions. With REV: undo exactly that commit's changes
    (A..B: those of every commit after A up to B, newest first, in one commit).

    As `git revert`: the inverse of the commit is merged into each file it touched, so later work
    on other lines stays. Where the same lines changed since, the restore refuses and names the
    file and lines (exit 1) unless --force. Files the commit never touched are not written. The
    undo is a new commit ("dream: revert ...") that can itself be restored. memory/.dream_cursor
    and memory/.dream_state.json are left alone unless --replay.
    """
    from dream_memory.app.restore import VersionsRequest, versions
    from dream_memory.errors import UsageError

    chosen = [x for x in (rev, apply_held, discard_held) if x]
    if len(chosen) > 1:
        raise UsageError("give either a commit, --apply-held ID or --discard-held ID, not several")
    # Options that would be ignored are refused, so nobody believes they took effect.
    if chosen and limit is not None:
        raise UsageError("--limit sets how many versions `dream restore` lists; it goes without a commit or an ID")
    if (apply_held or discard_held) and replay:
        raise UsageError("--replay moves the cursor back before a restored commit; it goes with a commit, not an ID")
    if apply_held or discard_held:
        return _settle_held(apply_held, discard_held, force, as_json, workspace, config_path)
    if rev is not None:
        return _restore_one(
            rev=rev, force=force, replay=replay, as_json=as_json, workspace=workspace, config_path=config_path
        )
    found = versions(runtime(workspace, config_path), VersionsRequest() if limit is None else VersionsRequest(limit))
    if found.shallow:
        note(SHALLOW_NOTE)
    if as_json:
        emit_json(found.to_json())
        return 0
    if not found.versions:
        echo("No Dream versions yet.")
        return 0
    for v in found.versions:
        files = ", ".join(f"{f.path} (+{f.added} -{f.removed})" for f in v.files) or "no file"
        if v.shallow:
            files = "(its changes are not in this shallow clone)"
        echo(f"{v.short}  {v.time}  {v.subject}")
        echo(f"            {files}")
    note("restore one with: dream restore <sha>")
    return 0


def _restore_one(
    *, rev: str, force: bool, replay: bool, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    from dream_memory.app.restore import RestoreRequest
    from dream_memory.app.restore import restore as restore_commit

    result = restore_commit(runtime(workspace, config_path), RestoreRequest(rev, force=force, replay=replay))
    if as_json:
        emit_json(result.to_json())
        return 0
    if result.saved_edits:
        echo(f"committed your unsaved edits first: {result.saved_edits[:10]} memory: manual edits")
    what = f"{result.restored[:10]}: undid its changes"
    if len(result.reverted) > 1 or ".." in result.restored:
        old, _, new = result.restored.partition("..")
        what = f"{old[:10]}..{new[:10]}: undid the changes of {len(result.reverted)} commits, newest first,"
    if result.commit:
        echo(f"restored {what} in a new commit {result.commit[:10]}")
        for line in _file_table(result.files):
            echo(line)
    else:
        echo(f"restored {what.partition(':')[0]}: nothing to write")
    if result.merged:
        echo(f"kept the later changes to {', '.join(result.merged)}")
    if result.forced_over:
        where = "; ".join(result.forced_places())
        echo(f"--force: took the restore's side in {where} (what was there stays in git history: dream log shows it)")
    if replay:
        _render_replay(result)
    for line in result.notes:
        echo(line)
    return 0


def _render_replay(result: RestoreResult) -> None:
    if result.cursor_before == result.cursor_after:
        echo(f"--replay: the Dream cursor stays at {result.cursor_after}")
    else:
        echo(f"--replay: the Dream cursor moved from {result.cursor_before} to {result.cursor_after}")
    if result.replay_entries is not None:
        archived = ""
        if result.replay_from_archive:
            archived = f", {result.replay_from_archive} of them from memory/archive/"
        start = (result.cursor_after or 0) + 1
        count = f"{result.replay_entries} {'entry' if result.replay_entries == 1 else 'entries'}"
        echo(f"--replay: the next Dream run reads {count} from cursor {start} on{archived}")


def _settle_held(
    apply_held: str | None,
    discard_held: str | None,
    force: bool,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    from dream_memory.app.restore import SettleRequest, settle_held

    held_id = apply_held or discard_held
    assert held_id is not None
    request = SettleRequest(held_id, "apply" if apply_held else "discard", force=force)
    result = settle_held(runtime(workspace, config_path), request)
    if as_json:
        emit_json(result.to_json())
        return 0
    echo(result.message)
    return 0


COMMANDS = [log, restore]
