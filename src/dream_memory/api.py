"""The Python API: one workspace, the same services the CLI runs (``dream_memory.app``).

    from dream_memory import Workspace

    ws = Workspace("~/.nanoinfra/workspaces/default")
    ws.init()                                   # only init creates a workspace (idempotent)
    ws.append("- [durable] User prefers dark mode", session_key="cli:direct")
    report = ws.dream(model="offline")          # a DreamReport: report.status, report.exit_code
    print(ws.context(budget=4000).text)

Every method is one service call and returns its typed report; ``report.to_json()`` is what the
CLI's ``--json`` prints. Errors are the package's own (``dream_memory.errors.DreamError`` and its
kinds), with the CLI's messages but the options the caller passes named as the methods take them
(``as_of 'nope' is not a date``, never the CLI's ``--as-of``); a command to run in a hint stays a
command (``dream init --workspace PATH``), and the errors a report carries (``report.errors``) keep
the CLI's words. A run another process holds the lock for is a report with status ``locked``, as in
the CLI.
Every method but ``init()`` needs the workspace to exist: on a path with none it raises
``dream_memory.errors.NoWorkspace`` (an InputError, exit code 2) and creates nothing.
Log lines (a migration, a stale lock taken over) become ``warnings``. Nothing here imports litellm
until a method calls a model. An argument of a kind its method's annotation does not take (``"3"``
for ``limit: int``, ``True`` for a number, one string for a list, None where None is not named)
raises InputError naming the method, the argument, what was given and what is expected, before
anything is read or written (``app.arguments``).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from dream_memory.app.arguments import checked_arguments, wrap_public_methods
from dream_memory.app.runtime import Runtime, require_read_root
from dream_memory.errors import DreamError
from dream_memory.settings import defaults

if TYPE_CHECKING:
    from dream_memory.app.consolidate import ConsolidateReport
    from dream_memory.app.dream import DreamReport
    from dream_memory.app.forget import ForgetReport
    from dream_memory.app.history import Appended, AppendedMany, NewEntry, WorkspaceStatus
    from dream_memory.app.init import InitReport
    from dream_memory.app.restore import HeldReport, VersionList
    from dream_memory.app.reverting import RestoreResult
    from dream_memory.app.versioning import Comparison
    from dream_memory.core.context import ContextBlock
    from dream_memory.core.history import HistoryEntry
    from dream_memory.core.ports import ChatModel, Clock
    from dream_memory.core.versions import CommitInfo
    from dream_memory.settings import Settings


def _warn(message: str) -> None:
    warnings.warn(f"dream-memory: {message}", UserWarning, stacklevel=3)


_Method = TypeVar("_Method", bound=Callable[..., Any])
_T = TypeVar("_T")


def _own_umask(method: _Method) -> _Method:
    """A writing method sets ``DREAM_UMASK`` for what it writes, and gives the host its own back."""

    @functools.wraps(method)
    def call(self: Workspace, *args: Any, **kwargs: Any) -> Any:
        with self._rt.host_umask_kept():
            return method(self, *args, **kwargs)

    return cast("_Method", call)


# The services name an option in an error as the CLI's flag (errors.DreamError.naming), which a
# Python caller cannot pass: the methods' keyword arguments stand in for the flags. A flag no method
# takes is "" and left out of the advice, as the MCP server does; a flag that is a switch reads as
# the keyword set to True. "--all" is review's every=True; consolidate has no such argument (every
# session is sessions=None), so it keeps the default "".
_KEYWORDS = {
    "--as-of": "as_of",
    "--model": "model=...",
    "--offset-line": "offset_line",
    "--scope": "scope",
    "--session-key": "session_key",
    "--budget": "budget",
    "--batch-size": "batch_size",
    "--max-batches": "max_batches",
    "--max-tokens": "max_tokens",
    "--max-cost": "max_cost",
    "--max-seconds": "max_seconds",
    "--session": "sessions",
    "--purge": "value",
    "--entity": "entity",
    "--force": "force=True",
    "--replay": "replay=True",
    "--config": "Workspace(config=...)",
}
_METHOD_KEYWORDS = {"review": {"--all": "every=True"}}


def _in_api_words(cls: type[_T]) -> type[_T]:
    """A class decorator: each public method (and ``__init__``) re-words a service error that
    names an option the caller gave (``DreamError.naming``) as its keywords name it, and raises
    the same exception on, so the caller's ``except InputError`` and its exit code still hold."""
    return wrap_public_methods(
        cls, lambda name, method: _worded(method, {**_KEYWORDS, **_METHOD_KEYWORDS.get(name, {})})
    )


def _worded(method: Callable[..., Any], keywords: Mapping[str, str]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except DreamError as exc:
            exc.respell(lambda flag: keywords.get(flag, ""))
            raise

    return call


def _annotation_names() -> dict[str, Any]:
    """The names the methods' argument annotations use that this module imports only for type
    checking (loaded at the first call, so ``from dream_memory import Workspace`` stays light)."""
    from dream_memory.app.history import NewEntry
    from dream_memory.core.ports import ChatModel, Clock

    return {"NewEntry": NewEntry, "ChatModel": ChatModel, "Clock": Clock}


@_in_api_words
@checked_arguments(_annotation_names)
class Workspace:
    """A dream-memory workspace. ``path`` None means ``$DREAM_WORKSPACE`` or the default.

    ``config`` is a config file path (else the usual search); ``env`` replaces ``os.environ`` for
    settings resolution (model choice, keys, excludes); ``clock`` replaces the system clock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        config: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        where = os.path.expanduser(path) if path is not None else None
        self._rt = Runtime.load(where, config, env, clock=clock, log=_warn)

    @property
    def settings(self) -> Settings:
        return self._rt.settings

    @property
    def path(self) -> Path:
        return self._rt.root

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"

    @property
    def _ws(self) -> Runtime:
        """The runtime of an existing workspace (NoWorkspace, exit 2, when there is none)."""
        self._rt.require_workspace()
        return self._rt

    # --- history -----------------------------------------------------------------------------

    @_own_umask
    def init(self) -> InitReport:
        """Create missing template files and start versioning (``report.created``: the files made).
        Under a Dream run's lock the commit is left to that run (``report.deferred``)."""
        from dream_memory.app.init import init_workspace

        return init_workspace(self._rt)

    def append(self, text: str, *, session_key: str | None = None) -> HistoryEntry:
        """Append one history entry under the history lock; returns it with its cursor."""
        return self.append_report(text, session_key=session_key).entry

    @_own_umask
    def append_report(self, text: str, *, session_key: str | None = None) -> Appended:
        """``append`` with the secrets redacted before storing (``.redactions``)."""
        from dream_memory.app.history import AppendRequest, append

        return append(self._ws, AppendRequest(text, session_key))

    @_own_umask
    def append_many(self, entries: Iterable[NewEntry | Mapping[str, Any] | str]) -> AppendedMany:
        """Append many entries in one locked, all-or-nothing write (``dream append --jsonl``):
        each a mapping with ``content`` and optional ``session_key`` and ``timestamp`` (or a bare
        string), redacted like ``append``; ``.entries`` carry consecutive cursors. A bad entry
        raises InputError naming it (``entry 3: ...``) and appends none."""
        from dream_memory.app.history import append_many

        return append_many(self._ws, entries)

    def status(self) -> WorkspaceStatus:
        """Cursors, pending entries, lock, unsaved edits; ``.to_json()`` is ``dream status --json``."""
        from dream_memory.app.history import status

        return status(self._ws)

    # --- Dream and the Consolidator -----------------------------------------------------------

    @_own_umask
    def dream(
        self,
        *,
        model: str | ChatModel | None = None,
        dry_run: bool = False,
        batch_size: int | None = None,
        max_batches: int | None = None,
        branch: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        max_seconds: float | None = None,
    ) -> DreamReport:
        """One Dream run; the report (``.status``, ``.exit_code``, ``.to_json()``).

        ``model`` is a preset name, a litellm id, ``"offline"``, or any object implementing the
        ChatModel protocol (handy in tests).
        """
        from dream_memory.app.runs import RunRequest, dream

        request = RunRequest(model, batch_size, max_batches, dry_run, branch, max_tokens, max_cost, max_seconds)
        return dream(self._ws, request)

    @_own_umask
    def consolidate(
        self,
        *,
        model: str | ChatModel | None = None,
        sessions: list[str | os.PathLike[str]] | None = None,
        budget: int | None = None,
        force: bool = False,
        dry_run: bool = False,
        update_sessions: bool = False,
    ) -> ConsolidateReport:
        """Consolidate sessions (every session of the workspace, ``sessions/`` and nanobot 0.3.5's
        store, when ``sessions`` is None; relative paths are relative to the workspace)."""
        from dream_memory.app.runs import ConsolidateRequest, consolidate

        request = ConsolidateRequest(
            model=model,
            sessions=sessions or (),
            all_sessions=sessions is None,
            budget=budget,
            force=force,
            dry_run=dry_run,
            update_sessions=update_sessions,
        )
        return consolidate(self._ws, request)

    # --- reading --------------------------------------------------------------------------------

    def context(
        self,
        *,
        budget: int | None = None,
        session_key: str | None = None,
        path: str | None = None,
        scope: str | None = None,
    ) -> ContextBlock:
        """The memory block for an agent's system prompt (same as ``dream context``; ``budget``
        200..200000 tokens, default ``agents.defaults.context.budgetTokens``). ``session_key`` or
        ``scope`` (not both) is who reads: a private scope's own files are added, other scopes'
        files and history entries never appear (docs/read-side.md#scopes)."""
        from dream_memory.app.context import ContextRequest, context

        return context(self._ws, ContextRequest(budget, session_key, path, scope=scope))

    def _reader(self, scope: str | None, session_key: str | None, *, history: bool = False) -> Any:
        """The caller's scope (``scope`` or ``session_key``, else the environment, else shared)."""
        from dream_memory.app.read import caller_scope

        rt = self._rt
        return caller_scope(scope, session_key, rt.settings.env, lambda: rt.settings.scope_rules, need_rules=history)

    def search(
        self,
        query: str,
        *,
        max_results: int = defaults.SEARCH_MAX_RESULTS,
        history: bool = False,
        scope: str | None = None,
        session_key: str | None = None,
    ) -> Any:
        """Search the memory store (same results as ``dream search --json``; a large store keeps
        the same search index under the user's cache folder), as ``scope`` or ``session_key``."""
        from dream_memory.app.read import search_store
        from dream_memory.settings import search_cache_dir

        rs = self._rt.read_settings
        require_read_root(rs)
        return search_store(
            rs.store,
            query,
            max_results=max_results,
            excludes=rs.excludes,
            history=history,
            cache_dir=search_cache_dir(rs.env),
            scope=self._reader(scope, session_key, history=history),
        )

    def entity(
        self,
        name: str,
        *,
        as_of: str | None = None,
        offset_line: int = 1,
        scope: str | None = None,
        session_key: str | None = None,
    ) -> Any:
        """An entity's page (same as ``dream entity NAME --json``); ``as_of`` a date or time reads
        the store as it was then (the last commit by the end of that day)."""
        from dream_memory.app.read import read_entity

        rs = self._rt.read_settings
        require_read_root(rs)
        who = self._reader(scope, session_key)
        return read_entity(rs.store, name, rs.excludes, offset_line=offset_line, as_of=as_of, scope=who)

    def section(
        self,
        name: str,
        *,
        as_of: str | None = None,
        offset_line: int = 1,
        scope: str | None = None,
        session_key: str | None = None,
    ) -> Any:
        """A section's page (same as ``dream section NAME --json``), now or ``as_of`` a date; a
        private scope also reads ``private-user`` and ``private-memory``."""
        from dream_memory.app.read import read_section

        rs = self._rt.read_settings
        require_read_root(rs)
        who = self._reader(scope, session_key)
        return read_section(rs.store, name, rs.excludes, offset_line=offset_line, as_of=as_of, scope=who)

    def resolve(self, path: str, *, scope: str | None = None, session_key: str | None = None) -> Any:
        """The entity whose repository root holds ``path`` (same as ``dream resolve PATH --json``)."""
        from dream_memory.app.read import resolve_path

        rs = self._rt.read_settings
        require_read_root(rs)
        return resolve_path(rs.store, path, rs.excludes, scope=self._reader(scope, session_key))

    def log(self, rev: str | None = None) -> CommitInfo | Comparison | None:
        """The latest Dream change, the change ``rev``, or the comparison ``"A..B"``."""
        from dream_memory.app.restore import LogRequest, log

        return log(self._ws, LogRequest(rev)).value

    def versions(self, *, limit: int = defaults.RESTORE_LIST_LIMIT) -> VersionList:
        """Recent Dream versions, newest first (``dream restore`` without a commit)."""
        from dream_memory.app.restore import VersionsRequest, versions

        return versions(self._ws, VersionsRequest(limit))

    @_own_umask
    def restore(self, rev: str, *, force: bool = False, replay: bool = False) -> RestoreResult:
        """Undo exactly the changes of commit ``rev``, or of each commit of ``"A..B"`` newest first
        (same rules and report as ``dream restore``)."""
        from dream_memory.app.restore import RestoreRequest, restore

        return restore(self._ws, RestoreRequest(rev, force=force, replay=replay))

    @_own_umask
    def apply_held(self, held_id: str, *, force: bool = False) -> HeldReport:
        """Apply a held batch (``dream restore --apply-held``)."""
        from dream_memory.app.restore import SettleRequest, settle_held

        return settle_held(self._ws, SettleRequest(held_id, "apply", force=force))

    @_own_umask
    def discard_held(self, held_id: str) -> HeldReport:
        """Discard a held batch (``dream restore --discard-held``)."""
        from dream_memory.app.restore import SettleRequest, settle_held

        return settle_held(self._ws, SettleRequest(held_id, "discard"))

    @_own_umask
    def forget(self, value: str | None = None, *, entity: str | None = None, dry_run: bool = False) -> ForgetReport:
        """Purge ``value`` (or the entity ``entity``) from memory and every commit of git history,
        as ``dream forget`` does (docs/forget.md); ``dry_run`` lists what would change."""
        from dream_memory.app.forget import ForgetRequest, forget

        return forget(self._ws, ForgetRequest(value=value, entity=entity, dry_run=dry_run))

    @_own_umask
    def review(self, action: str = "list", *ids: str, every: bool = False) -> dict[str, Any]:
        """The held changes (``dream review``): ``"list"``, ``"show", ID``, ``"accept", ID...`` or
        ``"reject", ID...`` (``every=True``: all of them); the same JSON as ``--json``."""
        from dream_memory.app.review import ReviewRequest, review

        return review(self._ws, ReviewRequest(action, ids, every))
