"""``dream init``, ``dream append`` and ``dream status``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from dream_memory.entrypoints.cli._common import (
    DreamCommand,
    command,
    echo,
    emit_json,
    json_option,
    note,
    runtime,
    workspace_options,
)


@command("init")
@json_option
@workspace_options
def init(as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Create a workspace with templates and start versioning it (idempotent)."""
    from dream_memory.app.init import DEFERRED_NOTE, init_workspace

    report = init_workspace(runtime(workspace, config_path, require=False))
    if as_json:
        emit_json(report.to_json())
        return 0
    click.echo(f"workspace {report.workspace}")
    for rel in report.created:
        click.echo(f"  created {rel}")
    if not report.created:
        click.echo("  nothing to create: every file is already there")
    where = "the enclosing repository" if report.enclosing_repository else "its own repository"
    click.echo(f"  versioned in {where} at {report.repository}")
    for said in report.notes:
        if said != DEFERRED_NOTE:  # the run holding the lock already said so on stderr
            click.echo(f"  note: {said}")
    if report.commit:
        click.echo(f"  committed {report.commit[:10]} memory: init")
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
@click.option(
    "--jsonl",
    "jsonl",
    metavar="FILE|-",
    type=click.Path(allow_dash=True),  # opened by the command: a bad path is its one-line error
    default=None,
    help='Append many entries at once: one JSON object per line ({"content", optional "session_key", "timestamp"}).',
)
@json_option
@workspace_options
def append(
    text: str | None,
    session_key: str | None,
    jsonl: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """Append one history entry under the lock and print its cursor.

    TEXT is the entry; use - (or omit it with input on a pipe) to read it from stdin. With
    --jsonl, every line of FILE (- for stdin) is an entry: all are appended in one locked write
    with consecutive cursors, printed one per line, or none when any line is bad (exit 2, naming
    the line).
    """
    from dream_memory.app.history import AppendRequest, append, check_entry
    from dream_memory.errors import InputError

    if jsonl is not None:
        if text is not None or session_key is not None:
            raise InputError("--jsonl takes the entries from the file: give no TEXT and no --session-key")
        return _append_jsonl(jsonl, as_json, workspace, config_path)
    if text is None or text == "-":
        if text is None and sys.stdin.isatty():
            raise InputError("nothing to append: give TEXT, or - to read stdin")
        # Bytes, decoded leniently: one stray non-UTF-8 byte must not lose the whole entry.
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    check_entry(text, session_key)  # empty text is exit 2 before the config is even read
    appended = append(runtime(workspace, config_path), AppendRequest(text, session_key))
    _note_redactions(appended.redactions)
    if as_json:
        emit_json({"cursor": appended.entry.cursor, "redactions": appended.redactions})
    else:
        click.echo(str(appended.entry.cursor))
    return 0


def _read_jsonl(path: str) -> str:
    """The --jsonl input as text: a missing or unreadable file is exit 2 naming it; a UTF-8
    byte-order mark (Windows editors write one) is dropped, not an error on line 1."""
    from dream_memory.errors import InputError

    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise InputError(
                f"--jsonl: no such file {path}", hint="check the path, or give - to read the entries from stdin"
            ) from None
        except OSError as exc:
            raise InputError(
                f"--jsonl: cannot read {path}: {exc.strerror or exc}", hint="give a readable file, or - for stdin"
            ) from exc
    return data.decode("utf-8-sig", errors="replace")


def _append_jsonl(source: str, as_json: bool, workspace: str | None, config_path: str | None) -> int:
    from dream_memory.app.history import append_many, parse_jsonl

    # Every line is checked before the config is read or anything is touched.
    entries = parse_jsonl(_read_jsonl(source))
    appended = append_many(runtime(workspace, config_path), entries)
    _note_redactions(appended.redactions)
    if as_json:
        emit_json(appended.to_json())
    else:
        click.echo("".join(f"{e.cursor}\n" for e in appended.entries), nl=False)
    return 0


def _note_redactions(redactions: dict[str, int]) -> None:
    if redactions:
        kinds = ", ".join(f"{kind} x{n}" for kind, n in sorted(redactions.items()))
        note(f"dream: redacted before storing: {kinds}")


@command("status")
@json_option
@workspace_options
def status(as_json: bool, workspace: str | None, config_path: str | None) -> int:
    """Cursors, pending entries, last Dream commit, lock holder and unsaved edits."""
    from dream_memory.app.history import REPLACED_HISTORY_HINT, replaced_history_message
    from dream_memory.app.history import status as workspace_status

    result = workspace_status(runtime(workspace, config_path))
    if as_json:
        emit_json(result.to_json())
        return 0
    echo(f"workspace      {result.workspace}")
    echo(f"cursor         {result.cursor}  (last entry written)")
    echo(f"dream cursor   {result.dream_cursor}  (last entry Dream consumed)")
    check = result.cursor_check
    if check["state"] in ("ahead", "behind", "missing"):
        echo(f"cursor file    {check['on_disk']}: {check['reason']}")
    echo(f"pending        {result.pending} entr{'y' if result.pending == 1 else 'ies'}")
    if result.malformed:
        echo(f"malformed      {result.malformed} line(s) skipped (details on stderr)")
    lock = result.lock
    echo(f"lock           {'held by pid ' + str(lock['pid']) + ' on ' + str(lock['host']) if lock else 'free'}")
    last = result.last_dream_commit
    echo(f"last dream     {last['commit'][:10] + ' ' + last['subject'] if last else 'none yet'}")
    echo(f"unsaved edits  {', '.join(result.dirty) if result.dirty else 'none'}")
    if result.held:
        echo(f"held           {len(result.held)}: {', '.join(result.held)}  (dream review)")
    if result.set_aside:
        echo(f"set aside      {', '.join(result.set_aside)}")
    if result.pending_migration:
        echo("migration      memory/HISTORY.md will be migrated by the next writing command")
    if result.interrupted_forget is not None:
        from dream_memory.app.history import FORGET_UNFINISHED_HINT, forget_unfinished_message

        echo(f"forget         {forget_unfinished_message(result.interrupted_forget)}: {FORGET_UNFINISHED_HINT}")
    for waiting in result.replaced_history:
        echo(f"replaced       {replaced_history_message(waiting)}: {REPLACED_HISTORY_HINT}")
    if not result.versioned:
        echo("versioning     no repository yet (created by dream init or the first dream run)")
    return 0


COMMANDS = [init, append, status]
