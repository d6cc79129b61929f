"""``dream init``, ``dream append`` and ``dream status``."""

from __future__ import annotations

import re
import sys

import click

from dream_memory.entrypoints.cli._common import (
    DreamCommand,
    command,
    echo,
    emit_json,
    json_option,
    load_settings,
    note,
    workspace_options,
)


@command("init")
@json_option
@workspace_options
def init(as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Create a workspace with templates and start versioning it (idempotent)."""
    from dream_memory.adapters.locks import dream_lock
    from dream_memory.app.versioning import ensure_versioned
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import LockBusy

    wiring = Wiring(load_settings(workspace, config_path))
    created = wiring.ensure_workspace(guide_notes=True)
    git = wiring.git(create=True)
    assert git is not None
    with git:
        # Commits happen under the Dream lock, like every other commit: a run in progress owns
        # the journal, and its first step makes this same commit anyway.
        try:
            with dream_lock(wiring.root, now=wiring.clock.now()):
                commit = ensure_versioned(git)
        except LockBusy:
            note("a Dream run holds the workspace; it commits the workspace itself")
            commit = None
        result = {
            "workspace": str(wiring.root),
            "created": created,
            "repository": str(git.root),
            "enclosing_repository": git.enclosing,
            "commit": commit,
        }
    if as_json:
        emit_json(result)
        return 0
    click.echo(f"workspace {wiring.root}")
    for rel in created:
        click.echo(f"  created {rel}")
    if not created:
        click.echo("  nothing to create: every file is already there")
    where = "the enclosing repository" if git.enclosing else "its own repository"
    click.echo(f"  versioned in {where} at {git.root}")
    if commit:
        click.echo(f"  committed {commit[:10]} memory: init")
    return 0


class _AppendCommand(DreamCommand):
    """History entries are bullet lists: click would read ``"- User prefers dark mode"`` as the
    short options ``- ``, ``U``, ... (``-h`` among them would print the help instead of
    appending). An argument that starts with a dash and then a space or a digit cannot be an
    option, so it is handed over as TEXT, after ``--``. Anything else starting with a dash
    still needs ``dream append -- TEXT``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            texts = [a for a in args if _ENTRY_LIKE.match(a)]
            if texts:
                args = [a for a in args if not _ENTRY_LIKE.match(a)] + ["--", *texts]
        return super().parse_args(ctx, args)


_ENTRY_LIKE = re.compile(r"-[\s\d]")


@command("append", cls=_AppendCommand)
@click.argument("text", required=False)
@click.option("--session-key", default=None, help="Session the entry came from (e.g. cli:direct).")
@workspace_options
def append(text: str | None, session_key: str | None, workspace: str | None, config_path: str | None) -> int:
    """Append one history entry under the lock and print its cursor.

    TEXT is the entry; use - (or omit it with input on a pipe) to read it from stdin.
    """
    from dream_memory.app.history import append_entry, check_entry
    from dream_memory.entrypoints.wiring import Wiring
    from dream_memory.errors import InputError

    if text is None or text == "-":
        if text is None and sys.stdin.isatty():
            raise InputError("nothing to append: give TEXT, or - to read stdin")
        # Bytes, decoded leniently: one stray non-UTF-8 byte must not lose the whole entry.
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    check_entry(text, session_key)  # empty text is exit 2 before any file is created
    wiring = Wiring(load_settings(workspace, config_path))
    wiring.ensure_workspace()
    appended = append_entry(wiring.history, text, session_key=session_key, redactor=wiring.redactor())
    if appended.redactions:
        kinds = ", ".join(f"{kind} x{n}" for kind, n in sorted(appended.redactions.items()))
        note(f"dream: redacted before storing: {kinds}")
    click.echo(str(appended.entry.cursor))
    return 0


@command("status")
@json_option
@workspace_options
def status(as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Cursors, pending entries, last Dream commit, lock holder and unsaved edits."""
    from dream_memory.app.history import workspace_status
    from dream_memory.entrypoints.wiring import Wiring

    wiring = Wiring(load_settings(workspace, config_path))
    git = wiring.git(create=False) if wiring.root.is_dir() else None
    try:
        result = workspace_status(
            wiring.root, wiring.history, git, follow_external=wiring.settings.dream.follow_external_cursor
        )
    finally:
        if git is not None:
            git.close()
    if as_json:
        emit_json(result)
        return 0
    if not result["exists"]:
        note(f"workspace {wiring.root} does not exist yet (dream init creates it)")
    echo(f"workspace      {result['workspace']}")
    echo(f"cursor         {result['cursor']}  (last entry written)")
    echo(f"dream cursor   {result['dream_cursor']}  (last entry Dream consumed)")
    check = result["cursor_check"]
    if check["state"] in ("ahead", "behind", "missing"):
        echo(f"cursor file    {check['on_disk']}: {check['reason']}")
    echo(f"pending        {result['pending']} entr{'y' if result['pending'] == 1 else 'ies'}")
    if result["malformed"]:
        echo(f"malformed      {result['malformed']} line(s) skipped (details on stderr)")
    lock = result["lock"]
    echo(f"lock           {'held by pid ' + str(lock['pid']) + ' on ' + str(lock['host']) if lock else 'free'}")
    last = result["last_dream_commit"]
    echo(f"last dream     {last['commit'][:10] + ' ' + last['subject'] if last else 'none yet'}")
    echo(f"unsaved edits  {', '.join(result['dirty']) if result['dirty'] else 'none'}")
    if result["held"]:
        echo(f"held batches   {', '.join(result['held'])}  (dream restore --apply-held / --discard-held)")
    if result["set_aside"]:
        echo(f"set aside      {', '.join(result['set_aside'])}")
    if result["pending_migration"]:
        echo("migration      memory/HISTORY.md will be migrated by the next writing command")
    if not result["versioned"]:
        echo("versioning     no repository yet (created by dream init or the first dream run)")
    return 0


COMMANDS = [init, append, status]
