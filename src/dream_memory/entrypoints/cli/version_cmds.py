"""``dream log`` and ``dream restore`` / ``dream-restore``: inspect and undo memory changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from dream_memory.adapters.git import CommitInfo, FileChange, GitStore


def _open_git(workspace: str | None, config_path: str | None) -> GitStore | None:
    from dream_memory.entrypoints.wiring import Wiring

    wiring = Wiring(load_settings(workspace, config_path))
    if not wiring.root.is_dir():
        return None
    return wiring.git(create=False)


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
    diff = "".join(f.diff for f in info.files)
    if diff:
        echo("")
        echo(diff.rstrip("\n"))


@command("log")
@click.argument("rev", required=False)
@json_option
@workspace_options
def log(rev: str | None, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Show the latest Dream change, the change REV, or the difference A..B between two versions."""
    from dream_memory.app.versioning import compare, latest_dream_change

    git = _open_git(workspace, config_path)
    if git is None or git.head() is None:
        if as_json:
            emit_json(None)
        else:
            echo("No memory versions yet: Dream has not committed anything in this workspace.")
        return 0
    with git:
        if rev and ".." in rev:
            old, _, new = rev.partition("..")
            comparison = compare(git, old or "HEAD", new or "HEAD")
            if as_json:
                emit_json(comparison.to_json())
                return 0
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
            return 0
        info = git.info(git.resolve(rev)) if rev else latest_dream_change(git)
        if git.is_shallow:
            note(SHALLOW_NOTE)
        if info is None:
            if as_json:
                emit_json(None)
            elif git.is_shallow:
                echo("No Dream change in the commits this shallow clone holds.")
            else:
                echo("No Dream change yet: the repository holds only commits made outside Dream.")
            return 0
        if as_json:
            emit_json(info.to_json())
        else:
            _render_commit(info)
    return 0


@command("restore")
@click.argument("rev", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="Versions to list.")
@click.option("--force", is_flag=True, help="Put files back even if they changed since; later work in them is lost.")
@click.option("--replay", is_flag=True, help="Also move the Dream cursor back so the next run re-reads that range.")
@click.option("--apply-held", "apply_held", metavar="ID", default=None, help="Apply a held batch.")
@click.option("--discard-held", "discard_held", metavar="ID", default=None, help="Discard a held batch.")
@json_option
@workspace_options
def restore(
    *,
    rev: str | None,
    limit: int,
    force: bool,
    replay: bool,
    apply_held: str | None,
    discard_held: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Without REV: list recent Dream versions. With REV: undo exactly that commit's changes.

    Files the commit never touched are not written. If a file it touched has changed since, the
    restore refuses and names it (exit 1) unless --force. The undo is a new commit
    ("dream: revert ...") that can itself be restored. memory/.dream_cursor and
    memory/.dream_state.json are left alone unless --replay.
    """
    from dream_memory.app.versioning import dream_versions
    from dream_memory.errors import UsageError

    chosen = [x for x in (rev, apply_held, discard_held) if x]
    if len(chosen) > 1:
        raise UsageError("give either a commit, --apply-held ID or --discard-held ID, not several")
    if apply_held or discard_held:
        return _settle_held(apply_held, discard_held, force, as_json, workspace, config_path)
    if rev is None:
        git = _open_git(workspace, config_path)
        shallow = False
        if git is not None:
            with git:
                versions = dream_versions(git, limit=limit)
                shallow = git.is_shallow and len(versions) < limit
        else:
            versions = []
        if shallow:
            note(SHALLOW_NOTE)
        if as_json:
            emit_json([v.to_json(with_diff=False) for v in versions])
            return 0
        if not versions:
            echo("No Dream versions yet.")
            return 0
        for v in versions:
            files = ", ".join(f"{f.path} (+{f.added} -{f.removed})" for f in v.files) or "no file"
            if v.shallow:
                files = "(its changes are not in this shallow clone)"
            echo(f"{v.short}  {v.time}  {v.subject}")
            echo(f"            {files}")
        note("restore one with: dream restore <sha>")
        return 0
    return _restore_one(
        rev=rev, force=force, replay=replay, as_json=as_json, workspace=workspace, config_path=config_path
    )


def _restore_one(
    *, rev: str, force: bool, replay: bool, as_json: bool, workspace: str | None, config_path: str | None
) -> int:
    from dream_memory.adapters.locks import dream_lock
    from dream_memory.app.versioning import restore_commit
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import UsageError

    wiring = Wiring(load_settings(workspace, config_path))
    git = wiring.git(create=False) if wiring.root.is_dir() else None
    if git is None or git.head() is None:
        raise UsageError(f"no memory versions in {wiring.root} to restore")
    with git, dream_lock(wiring.root, now=wiring.clock.now()):
        result = restore_commit(
            git,
            rev,
            force=force,
            replay=replay,
            dream_cursor=wiring.history.read_dream_cursor(),
            history=wiring.history,
        )
    if as_json:
        emit_json(result.to_json())
        return 0
    if result.saved_edits:
        echo(f"committed your unsaved edits first: {result.saved_edits[:10]} memory: manual edits")
    if result.commit:
        echo(f"restored {result.restored[:10]}: undid its changes in a new commit {result.commit[:10]}")
        for line in _file_table(result.files):
            echo(line)
    else:
        echo(f"restored {result.restored[:10]}: nothing to write")
    if result.forced_over:
        echo(
            f"--force: later work in {', '.join(result.forced_over)} was thrown away "
            "(it stays in the git history: dream log shows it)"
        )
    if replay:
        echo(f"--replay: the Dream cursor moved from {result.cursor_before} to {result.cursor_after}")
        if result.replay_entries is not None:
            archived = ""
            if result.replay_from_archive:
                archived = f", {result.replay_from_archive} of them from memory/archive/"
            start = (result.cursor_after or 0) + 1
            reads = f"{result.replay_entries} entries from cursor {start} on"
            echo(f"--replay: the next Dream run reads {reads}{archived}")
    for line in result.notes:
        echo(line)
    return 0


def _settle_held(
    apply_held: str | None,
    discard_held: str | None,
    force: bool,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    from dream_memory.adapters.locks import dream_lock
    from dream_memory.app.held import apply_held_batch, discard_held_batch
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import UsageError

    wiring = Wiring(load_settings(workspace, config_path))
    git = wiring.git(create=False) if wiring.root.is_dir() else None
    if git is None:
        raise UsageError(f"no memory versions in {wiring.root}")
    with git, dream_lock(wiring.root, now=wiring.clock.now()):
        if apply_held:
            result = apply_held_batch(git, apply_held, force=force)
        else:
            assert discard_held is not None
            result = discard_held_batch(git, discard_held)
    if as_json:
        emit_json(result)
        return 0
    echo(result["message"])
    return 0


COMMANDS = [log, restore]
