"""Read side: ``dream resolve|entity|section|search`` and ``dream mcp`` (docs/reference/read-side.md).

Thin faces over ``dream_memory.app.read``: parse options, open a ``ReadStore``, print its result
(text or ``--json``) on stdout. Notes and warnings go to stderr. Exit codes come from the errors
the store raises: 1 for an unknown/excluded entity, an unknown section, an unresolvable path or a
refused read; 2 for bad usage. This path imports neither mcp nor litellm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dream_memory.core.terminal import for_terminal, json_for_terminal
from dream_memory.entrypoints.cli._common import (
    command,
    echo,
    emit_json,
    json_option,
    load_settings,
    note,
    runtime,
    workspace_options,
)

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from pathlib import Path

    from dream_memory.app.read import ReaderScope, ReadStore, StoreWatch

store_option = click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="Store root (default: $DREAM_MEMORY_STORE, else the workspace).",
)
at_option = click.option(
    "--at",
    "at",
    metavar="REV",
    default=None,
    help="Read as of a commit (SHA prefix of at least 4 hex digits, HEAD, HEAD~N or a branch).",
)
as_of_option = click.option(
    "--as-of",
    "as_of",
    metavar="DATE",
    default=None,
    help="Read the store as it was then: the last commit by the end of DATE (YYYY-MM-DD), or by "
    "an exact time ('YYYY-MM-DD HH:MM[:SS]', optionally +HH:MM).",
)


def scope_options(func: F) -> F:
    """``--scope`` and ``--session-key``: who reads (docs/read-side.md#scopes)."""
    func = click.option(
        "--session-key",
        "session_key",
        metavar="KEY",
        default=None,
        help="Read as the scope this session key has under agents.defaults.scopes (not with --scope).",
    )(func)
    return click.option(
        "--scope",
        "scope",
        metavar="NAME",
        default=None,
        help="Read as this scope: the shared files plus its own (default: $DREAM_MEMORY_SCOPE, else shared).",
    )(func)


def reader_scope(
    scope: str | None,
    session_key: str | None,
    env: Mapping[str, str],
    workspace: str | None,
    config_path: str | None,
    *,
    need_rules: bool = False,
) -> ReaderScope:
    """The caller's scope; the config file (and pydantic) is loaded only when a session key or
    history needs the rules."""
    from dream_memory.app.read import caller_scope

    return caller_scope(
        scope, session_key, env, lambda: load_settings(workspace, config_path).scope_rules, need_rules=need_rules
    )


offset_option = click.option(
    "--offset-line",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="First line to show; a [truncated] marker says where to continue.",
)


def open_store(
    store: str | None,
    workspace: str | None,
    config_path: str | None,
    at: str | None,
    *,
    use_cache: bool = False,
    as_of: str | None = None,
    scope: str | None = None,
    session_key: str | None = None,
    need_rules: bool = False,
    env: Mapping[str, str] | None = None,
    watch_for: Callable[[Path], StoreWatch] | None = None,
) -> ReadStore:
    """The store from ``--store`` > DREAM_MEMORY_STORE > the workspace, with the excludes, read
    as the caller's scope. A resident reader passes its client's ``env`` and the watch it keeps
    on its store (``watch_for`` raises when the store resolved is another one)."""

    from dream_memory.app.read import ReadStore
    from dream_memory.app.runtime import require_read_root
    from dream_memory.settings import load_read_settings, search_cache_dir

    # The read side needs no config file: skipping it (and pydantic) keeps `dream search` fast.
    settings = load_read_settings(workspace, store, env)
    require_read_root(settings)  # no workspace there: exit 2 naming the path and `dream init`
    who = reader_scope(scope, session_key, settings.env, workspace, config_path, need_rules=need_rules)
    reader = ReadStore(
        settings.store,
        excludes=settings.excludes,
        at=at,
        as_of=as_of,
        home=settings.env.get("HOME") or None,
        scope=who,
        cache_dir=search_cache_dir(settings.env) if use_cache else None,
        watch=watch_for(settings.store) if watch_for is not None and at is None and as_of is None else None,
    )
    if reader.as_of_commit is not None:
        chosen = reader.as_of_commit
        note(f"dream: as of {as_of}: commit {chosen.sha[:10]} ({chosen.time}) {chosen.subject}")
    return reader


def report_problems(reader: ReadStore, say: Callable[[str], None] = note) -> None:
    for problem in reader.index_problems:
        say(f"dream: warning: {problem}")


sources_option = click.option(
    "--sources",
    is_flag=True,
    help="Also say where each shown line comes from (learned from which history entry, by hand, template).",
)


@command("resolve")
@click.argument("path")
@at_option
@scope_options
@store_option
@json_option
@workspace_options
def resolve(
    *,
    path: str,
    at: str | None,
    scope: str | None,
    session_key: str | None,
    store: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """The entity whose repository root contains PATH (the longest matching root wins).

    Roots come from the Repos column of index.md and match whole path components. Exit 1 when no
    entity resolves PATH.
    """
    with open_store(store, workspace, config_path, at, scope=scope, session_key=session_key) as reader:
        try:
            result = reader.resolve(path)
        finally:
            report_problems(reader)
    if as_json:
        emit_json(result.to_json())
    else:
        echo(result.to_text(), nl=False)
    return 0


@command("entity")
@click.argument("name")
@offset_option
@sources_option
@at_option
@as_of_option
@scope_options
@store_option
@json_option
@workspace_options
def entity(
    *,
    name: str,
    offset_line: int,
    sources: bool,
    at: str | None,
    as_of: str | None,
    scope: str | None,
    session_key: str | None,
    store: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """An entity's file, bounded at 200 lines or 16 KiB (exit 1 when unknown or excluded)."""
    with open_store(store, workspace, config_path, at, as_of=as_of, scope=scope, session_key=session_key) as reader:
        try:
            result = reader.entity(name, offset_line=offset_line)
        finally:
            report_problems(reader)
        who = reader.scope
    _emit_page(result, as_json, _sources(result, workspace, config_path, who) if sources else None)
    return 0


@command("section")
@click.argument("name")
@offset_option
@sources_option
@at_option
@as_of_option
@scope_options
@store_option
@json_option
@workspace_options
def section(
    *,
    name: str,
    offset_line: int,
    sources: bool,
    at: str | None,
    as_of: str | None,
    scope: str | None,
    session_key: str | None,
    store: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
) -> int:
    """A section, bounded at 200 lines or 16 KiB.

    NAME is sections/NAME.md, or one of soul, user, memory, observations for SOUL.md, USER.md,
    memory/MEMORY.md and observations.md; in a private scope, private-user and private-memory are
    its own USER.md and MEMORY.md.
    """
    with open_store(store, workspace, config_path, at, as_of=as_of, scope=scope, session_key=session_key) as reader:
        try:
            result = reader.section(name, offset_line=offset_line)
        finally:
            report_problems(reader)
        who = reader.scope
    _emit_page(result, as_json, _sources(result, workspace, config_path, who) if sources else None)
    return 0


def _sources(
    result: object, workspace: str | None, config_path: str | None, who: ReaderScope
) -> list[dict[str, object]]:
    """Each shown line's origin (docs/provenance.md); the workspace's own files only. Entries of
    scopes the reader cannot see are named as such, without their session."""
    from dream_memory.app.read import ReadResult
    from dream_memory.app.sources import page_sources

    assert isinstance(result, ReadResult)
    rt = runtime(workspace, config_path)
    who = who if who.rules is not None else replace(who, rules=rt.settings.scope_rules)
    return page_sources(rt, result.path, result.first_line, result.last_line, who)


def _emit_page(result: object, as_json: bool, sources: list[dict[str, object]] | None = None) -> None:
    from dream_memory.app.read import ReadResult

    assert isinstance(result, ReadResult)
    if as_json:
        emit_json(result.to_json() if sources is None else {**result.to_json(), "sources": sources})
        return
    echo(result.to_text(), nl=False)
    if sources is not None:
        echo("")
        echo("Sources:")
        for row in sources:
            origin = row["learned"] or {"init": "template (memory: init)", "manual": "written by hand"}.get(
                str(row["kind"]), "not committed yet" if row["kind"] is None else f"{row['kind']} commit"
            )
            echo(f"  {row['line']}: {origin}")
    if result.last_line == 0 and not result.truncated:
        note(f"dream: {result.path} has no line {result.first_line}")


class _Captured:
    """``dream search``'s stdout and stderr as a resident reader returns them: the same text
    ``echo``, ``note`` and ``emit_json`` would print (click adds nothing to a str written to a
    text stream: no colour is ever sent, for_terminal escapes it)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []

    def echo(self, text: str = "", *, nl: bool = True) -> None:
        self.out.append(for_terminal(text) + ("\n" if nl else ""))

    def note(self, message: str) -> None:
        self.err.append(for_terminal(message) + "\n")

    def emit_json(self, value: Any) -> None:
        self.out.append(json_for_terminal(value) + "\n")


@command("search")
@click.argument("query")
@click.option(
    "--max-results",
    type=int,
    default=10,
    show_default=True,
    help="At most this many sources (1..50; anything else is exit 2).",
)
@click.option(
    "--history", is_flag=True, help="Also search memory/history.jsonl (entries of the scopes the reader sees)."
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Read every file; keep no search index (large stores keep one under $XDG_CACHE_HOME/dream-memory).",
)
@at_option
@scope_options
@store_option
@json_option
@workspace_options
def search(
    *,
    query: str,
    max_results: int,
    history: bool,
    no_cache: bool,
    at: str | None,
    scope: str | None,
    session_key: str | None,
    store: str | None,
    as_json: bool,
    workspace: str | None,
    config_path: str | None,
    # Not options: a resident reader runs this same body with its client's environment, the
    # watch it keeps on its store, and the output captured (answer_search); click passes none.
    env: Mapping[str, str] | None = None,
    watch_for: Callable[[Path], StoreWatch] | None = None,
    out: _Captured | None = None,
) -> int:
    """Sources matching QUERY, best first, at most three matching lines each.

    Every word (or "quoted phrase") is matched case-insensitively. Sources rank by terms covered,
    then terms in their name or headings, then hits, then path. Searched: entities/, sections/,
    SOUL.md, USER.md, memory/MEMORY.md and observations.md (and history with --history).
    Stores of 500 files or more keep a search index outside the store, refreshed from changed files.
    """
    from dream_memory.core.search import check_max_results

    say, show, show_json = (note, echo, emit_json) if out is None else (out.note, out.echo, out.emit_json)
    limit = check_max_results(max_results)  # the read side's one rule: 1..50, else exit 2 (before any read)
    opened = open_store(
        store,
        workspace,
        config_path,
        at,
        use_cache=not no_cache,
        scope=scope,
        session_key=session_key,
        need_rules=history,  # each entry is judged by its session key's scope
        env=env,
        watch_for=watch_for,
    )
    with opened as reader:
        try:
            result = reader.search(query, max_results=limit, history=history)
        finally:
            report_problems(reader, say)
    for warning in result.warnings:
        say(f"dream: warning: {warning}")
    for skipped in result.skipped:
        say(f"dream: skipped {skipped}")
    if as_json:
        show_json(result.to_json())
        return 0
    if not result.results:
        say(f"dream: no source matches {query!r}")
        return 0
    show(result.to_text(), nl=False)
    return 0


def answer_search(
    argv: list[str], env: dict[str, str], watch_for: Callable[[Path], StoreWatch]
) -> tuple[int, str, str] | None:
    """A resident reader's answer to ``dream search ARGV`` run with ``env``: (exit code, stdout,
    stderr) exactly as the one-shot command would give them, or None when it is not answered
    here and the client runs the command itself: help, a usage error, any error (its message and
    exit code are the one-shot command's own), and what needs the config file (``--history``,
    a session key), which the server would read with its own environment."""
    from dream_memory.app.read.resident import NotThisStore
    from dream_memory.app.read.scoping import SESSION_KEY_VARIABLE

    if any(arg in ("-h", "--help") for arg in argv):
        return None
    try:
        ctx = search.make_context("search", list(argv))
    except (click.exceptions.ClickException, click.exceptions.Exit):
        return None
    params = dict(ctx.params)
    if params["history"] or params["session_key"] is not None or env.get(SESSION_KEY_VARIABLE):
        return None
    captured = _Captured()
    try:
        assert search.callback is not None
        code = search.callback(**params, env=env, watch_for=watch_for, out=captured)
    except NotThisStore:
        raise
    except Exception:
        return None  # every failure is the one-shot command's to report, in its own words and exit code
    return code, "".join(captured.out), "".join(captured.err)


@command("mcp")
@scope_options
@store_option
@workspace_options
def mcp(
    *, scope: str | None, session_key: str | None, store: str | None, workspace: str | None, config_path: str | None
) -> int:
    """Serve the read side as an MCP server over stdio (stdout is the protocol; logs on stderr).

    Tools: dream_resolve, dream_entity, dream_section, dream_search, dream_why. Resources: memory://index,
    memory://entities/{name}, memory://sections/{name}, memory://context; prompt memory_context.
    The configuration, the store, DREAM_MEMORY_EXCLUDE and the scope (--scope, --session-key, else
    DREAM_MEMORY_SCOPE / DREAM_MEMORY_SESSION_KEY) are read once at start; no tool argument changes them.
    While it runs, it also answers `dream search` on the same store over a unix socket private to
    this user ($XDG_RUNTIME_DIR/dream-memory/, else under the search cache's base), so those
    searches skip start-up and answer exactly as a one-shot search would; where neither folder
    exists, or another server holds the store, it serves MCP only (docs/read-side.md).
    """
    # The whole configuration, read once at start: memory://context follows budgetTokens, and a
    # bad config file is exit 2 now rather than an error on every request. The read side's
    # workspace rule, not the writers': a store named by --store or DREAM_MEMORY_STORE is served
    # without a workspace around it.
    from dream_memory.app.read import caller_scope
    from dream_memory.app.runtime import require_read_root
    from dream_memory.entrypoints.mcp_server import serve_runtime

    rt = runtime(workspace, config_path, store=store, require=False)
    require_read_root(rt.read_settings)
    who = caller_scope(scope, session_key, rt.settings.env, lambda: rt.settings.scope_rules, need_rules=True)
    from dream_memory.app.read.resident import ResidentReader

    # While it runs, the server also answers `dream search` on the store's socket (another
    # server already there, or no folder for the socket: it serves MCP only).
    with ResidentReader(rt.read_settings.store, answer_search, rt.read_settings.env):
        serve_runtime(rt, scope=who)
    return 0


COMMANDS = [resolve, entity, section, search, mcp]
