"""The Python API: one workspace, the same use cases the CLI runs.

    from dream_memory import Workspace

    ws = Workspace("~/.nanoinfra/workspaces/default")
    ws.append("- [durable] User prefers dark mode", session_key="cli:direct")
    report = ws.dream(model="offline")
    print(ws.context(budget=4000).text)

Errors are the package's own (``dream_memory.errors.DreamError`` and its kinds). Nothing here
imports litellm until a method calls a model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.entrypoints.wiring import Wiring
from dream_memory.settings import load_settings

if TYPE_CHECKING:
    from dream_memory.adapters.git import CommitInfo
    from dream_memory.app.versioning import Comparison, RestoreResult
    from dream_memory.core.context import ContextBlock
    from dream_memory.core.history import HistoryEntry
    from dream_memory.core.ports import ChatModel, Clock
    from dream_memory.settings import ResolvedModel


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
        self.settings = load_settings(os.path.expanduser(path) if path is not None else None, config, env)
        self._wiring = Wiring(self.settings, clock=clock) if clock is not None else Wiring(self.settings)

    @property
    def path(self) -> Path:
        return self.settings.workspace

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"

    # --- history -----------------------------------------------------------------------------

    def init(self) -> list[str]:
        """Create missing template files and start versioning; returns the files created."""
        from dream_memory.app.versioning import ensure_versioned

        created = self._wiring.ensure_workspace(guide_notes=True)
        git = self._wiring.git(create=True)
        assert git is not None
        with git:
            ensure_versioned(git)
        return created

    def append(self, text: str, *, session_key: str | None = None) -> HistoryEntry:
        """Append one history entry under the history lock; returns it with its cursor."""
        from dream_memory.app.history import append_entry

        self._wiring.ensure_workspace()
        return append_entry(self._wiring.history, text, session_key=session_key, redactor=self._wiring.redactor()).entry

    def status(self) -> dict[str, Any]:
        """The same mapping as ``dream status --json``."""
        from dream_memory.app.history import workspace_status

        git = self._wiring.git(create=False) if self.path.is_dir() else None
        try:
            return workspace_status(self.path, self._wiring.history, git)
        finally:
            if git is not None:
                git.close()

    # --- Dream and the Consolidator -----------------------------------------------------------

    def _resolve(self, model: str | ChatModel | None) -> tuple[ChatModel, ResolvedModel | None]:
        from dream_memory.errors import ConfigError

        if model is not None and not isinstance(model, str):
            return model, None
        resolved = self.settings.model(model)
        if resolved is None:
            raise ConfigError("no model is configured", hint="pass model='offline' or a preset / litellm id")
        return self._wiring.chat_model(resolved), resolved

    def dream(
        self,
        *,
        model: str | ChatModel | None = None,
        dry_run: bool = False,
        batch_size: int | None = None,
        max_batches: int | None = None,
        branch: str | None = None,
    ) -> dict[str, Any]:
        """One Dream run; returns the report (CONTRACT section 6). Raises LockBusy when locked.

        ``model`` is a preset name, a litellm id, ``"offline"``, or any object implementing the
        ChatModel protocol (handy in tests).
        """
        from dream_memory.app.dream import run_dream

        chat, resolved = self._resolve(model)
        options = self._wiring.dream_options(
            batch_size=batch_size, max_batches=max_batches, dry_run=dry_run, branch=branch, resolved=resolved
        )
        report = run_dream(self._wiring.dream_context(chat, options))
        return report.to_json()

    def consolidate(
        self,
        *,
        model: str | ChatModel | None = None,
        sessions: list[str | os.PathLike[str]] | None = None,
        budget: int | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Consolidate sessions (every session of the workspace, ``sessions/`` and nanobot 0.3.5's
        store, when ``sessions`` is None); returns the report."""
        from dream_memory.app.consolidate import consolidate_sessions, select_sessions

        chat, resolved = self._resolve(model)
        paths = select_sessions(
            self.path,
            [str(s) for s in sessions or ()],
            sessions is None,
            self.path,
            nanobot_roots=self._wiring.nanobot_session_roots(),
        )
        if not dry_run:
            self._wiring.ensure_workspace()
        ctx = self._wiring.consolidate_context(
            chat,
            budget=budget,
            force=force,
            dry_run=dry_run,
            context_window=resolved.context_window if resolved else None,
            max_tokens=resolved.max_tokens if resolved else 4096,
        )
        return consolidate_sessions(ctx, paths).to_json()

    # --- reading --------------------------------------------------------------------------------

    def context(self, *, budget: int | None = None, session_key: str | None = None) -> ContextBlock:
        """The memory block for an agent's system prompt (same as ``dream context``)."""
        from dream_memory.app.context import memory_context

        limit = budget if budget is not None else self.settings.config.agents.defaults.context.budget_tokens
        return memory_context(
            self.path, self._wiring.history, budget=limit, counter=self._wiring.token_counter(), session_key=session_key
        )

    def search(self, query: str, *, max_results: int = 10) -> Any:
        """Search the memory store (same results as ``dream search --json``; a large store keeps
        the same search index under the user's cache folder)."""
        from dream_memory.app.read import search_store
        from dream_memory.settings import search_cache_dir

        return search_store(
            self.settings.store,
            query,
            max_results=max_results,
            excludes=self.settings.excludes,
            cache_dir=search_cache_dir(self.settings.env),
        )

    def log(self, rev: str | None = None) -> CommitInfo | Comparison | None:
        """The latest Dream change, the change ``rev``, or the comparison ``"A..B"``."""
        from dream_memory.app.versioning import compare, latest_dream_change

        git = self._wiring.git(create=False) if self.path.is_dir() else None
        if git is None or git.head() is None:
            return None
        with git:
            if rev and ".." in rev:
                old, _, new = rev.partition("..")
                return compare(git, old or "HEAD", new or "HEAD")
            return git.info(git.resolve(rev)) if rev else latest_dream_change(git)

    def restore(self, rev: str, *, force: bool = False, replay: bool = False) -> RestoreResult:
        """Undo exactly the changes of commit ``rev`` (same rules as ``dream restore``)."""
        from dream_memory.adapters.locks import dream_lock
        from dream_memory.app.versioning import restore_commit
        from dream_memory.errors import UsageError

        git = self._wiring.git(create=False) if self.path.is_dir() else None
        if git is None:
            raise UsageError(f"no memory versions in {self.path}")
        with git, dream_lock(self.path, now=self._wiring.clock.now()):
            return restore_commit(
                git, rev, force=force, replay=replay, dream_cursor=self._wiring.history.read_dream_cursor()
            )
