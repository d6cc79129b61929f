"""The composition root: builds adapters for one workspace from resolved settings.

Every face (the CLI, the Python API, the MCP server, the fault suite, eval) makes one ``Runtime``
(``Runtime.load``) and hands it to the services in ``app``; the services ask it for the history
log, git, the Dream lock, the token counter, the redactor and the model, and never build them.
The face chooses only the clock and where log lines go (CLI: stderr; API: warnings).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.settings import ReadSettings, Settings, defaults, load_settings

if TYPE_CHECKING:
    from dream_memory.adapters.git import GitStore
    from dream_memory.adapters.history_log import HistoryLog, MigrationResult
    from dream_memory.adapters.locks import LockHolder
    from dream_memory.app.consolidate import ConsolidateContext
    from dream_memory.app.dream import DreamContext, DreamOptions
    from dream_memory.core.ports import ChatModel, Clock, Redactor, TokenCounter
    from dream_memory.settings import ResolvedModel


def stderr_logger(message: str) -> None:
    print(f"dream: {message}", file=sys.stderr)


def require_read_root(settings: ReadSettings) -> None:
    """The read side's workspace check: a store named by --store or DREAM_MEMORY_STORE is any
    folder (its own checks say when it is missing); the workspace as the store must exist
    (NoWorkspace, exit 2, naming the path and `dream init`)."""
    from dream_memory.adapters.workspace import is_folder, require_workspace

    if settings.store == settings.workspace and not is_folder(settings.store):
        require_workspace(settings.store)


@dataclass
class Runtime:
    settings: Settings
    clock: Clock = field(default=None)  # type: ignore[assignment]
    log: Callable[[str], None] = stderr_logger
    store: Path | None = None  # the read side's store when --store names one (else the settings')

    def __post_init__(self) -> None:
        if self.clock is None:
            from dream_memory.adapters.clock import SystemClock

            self.clock = SystemClock()

    @classmethod
    def load(
        cls,
        workspace: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        clock: Clock | None = None,
        log: Callable[[str], None] | None = None,
    ) -> Runtime:
        """Settings resolved once (the config file read and validated), then the runtime."""
        settings = load_settings(workspace, config, env)
        return cls(settings, clock=clock, log=log or stderr_logger)  # type: ignore[arg-type]

    def for_workspace(self, root: Path) -> Runtime:
        """The same configuration, clock and log for another workspace (eval's, demo's)."""
        return Runtime(dataclasses.replace(self.settings, workspace=root), clock=self.clock, log=self.log)

    def with_store(self, store: str | os.PathLike[str] | None) -> Runtime:
        return self if store is None else dataclasses.replace(self, store=Path(store))

    @property
    def root(self) -> Path:
        return self.settings.workspace

    @property
    def read_settings(self) -> ReadSettings:
        return self.settings.read_settings(self.store)

    def has_workspace(self) -> bool:
        return self.root.is_dir()

    @contextlib.contextmanager
    def dream_lock(self) -> Iterator[LockHolder | None]:
        """The Dream lock, held for the block (LockBusy at once when another run holds it)."""
        from dream_memory.adapters.locks import dream_lock

        self.apply_umask()
        with dream_lock(self.root, now=self.clock.now()) as holder:
            yield holder

    @contextlib.contextmanager
    def commit_lock(self, command: str) -> Iterator[LockHolder | None]:
        """The Dream lock for ``command``, which commits: refused (exit 2) while a purge is
        unfinished. Checked once the lock is held, since a forget that still holds it is running,
        not interrupted."""
        from dream_memory.app.history import refuse_while_a_purge_is_unfinished

        with self.dream_lock() as holder:
            refuse_while_a_purge_is_unfinished(self.root, command)
            yield holder

    def apply_umask(self) -> None:
        """``DREAM_UMASK``, set before a command writes anything (exit 2 for one that is not an
        octal umask, or that denies the files' own owner)."""
        from dream_memory.adapters.preflight import apply_umask

        apply_umask(self.settings.env)

    @staticmethod
    def host_umask_kept() -> contextlib.AbstractContextManager[None]:
        """For a library call: the process's own umask back once no call is left running (the
        CLI's process ends with its command, the API's host goes on creating files)."""
        from dream_memory.adapters.preflight import host_umask_kept

        return host_umask_kept()

    def preflight(self, *, dry_run: bool = False) -> None:
        """The umask, then whether this process can write what a run writes (exit 2 if not)."""
        from dream_memory.adapters.preflight import check_workspace_writable

        self.apply_umask()
        check_workspace_writable(self.root, lock_only=dry_run)

    @cached_property
    def history(self) -> HistoryLog:
        from dream_memory.adapters.history_log import HistoryLog

        return HistoryLog(self.root, clock=self.clock, on_problem=lambda msg: self.log(f"warning: {msg}"))

    def git(self, *, create: bool = True) -> GitStore | None:
        from dream_memory.adapters.git import GitStore

        return GitStore.open(self.root, author=self.settings.dream.git_author, clock=self.clock, create=create)

    def require_workspace(self) -> None:
        """NoWorkspace (exit 2, naming the path and `dream init`) unless the workspace exists:
        only init creates one (docs/reference/files.md, "What counts as a workspace")."""
        from dream_memory.adapters.workspace import require_workspace

        require_workspace(self.root)

    def ensure_workspace(self) -> list[str]:
        """What every writing command does first, in a workspace that must exist: templates for
        a missing durable file, then any pending legacy HISTORY.md migration."""
        self.require_workspace()
        return self.create_workspace()

    def create_workspace(self, *, guide_notes: bool = False) -> list[str]:
        """`dream init`'s part (and eval's scenario workspaces): the folders and templates, made
        wherever missing, then the migration. Only init asks for prompts/README.md."""
        from dream_memory.adapters.workspace import init_workspace

        self.apply_umask()
        created = init_workspace(self.root, guide_notes=guide_notes)
        migrated = self.history.migrate_legacy()
        if migrated is not None:
            self._report_migration(migrated)
        return created

    def _report_migration(self, result: MigrationResult) -> None:
        how = "already consolidated" if result.mode == "initial" else "as new entries for Dream"
        self.log(
            f"migrated {result.entries} entries from memory/HISTORY.md ({how}), "
            f"cursors {result.first_cursor}..{result.last_cursor}; kept the old file as {result.backup}"
        )

    def nanobot_session_roots(self) -> list[Path]:
        """Where nanobot 0.3.5 may keep this workspace's sessions: ``sessions/`` beside the
        nanobot config.json in use (nanobot's data dir is its config's folder), then
        ``~/.nanobot/sessions``."""
        roots: list[Path] = []
        if self.settings.config_path is not None:
            roots.append(self.settings.config_path.parent / "sessions")
        home = self.settings.env.get("HOME")
        if home:
            roots.append(Path(home) / ".nanobot" / "sessions")
        return roots

    def token_counter(self) -> TokenCounter:
        from dream_memory.adapters.tokens import DeferredCounter

        return DeferredCounter()

    def chat_model(self, resolved: ResolvedModel) -> ChatModel:
        """A new model for ``resolved``, the caller's to close (``models.chosen_model``)."""
        from dream_memory.adapters.llm import build_chat_model

        return build_chat_model(resolved)

    def redactor(self) -> Redactor:
        from dream_memory.adapters.forgotten import purged_values
        from dream_memory.adapters.secrets import SecretScanner

        purged = purged_values(self.root) if self.has_workspace() else None  # dream forget's values
        return SecretScanner(allowlist=self.settings.dream.secret_allowlist, purged=purged)

    def dream_options(
        self,
        *,
        batch_size: int | None = None,
        max_batches: int | None = None,
        dry_run: bool = False,
        branch: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        max_seconds: float | None = None,
        resolved: ResolvedModel | None = None,
    ) -> DreamOptions:
        from dream_memory.app.dream import DreamOptions
        from dream_memory.core.guards import GuardSettings
        from dream_memory.core.write_policy import from_settings

        d = self.settings.dream
        model_settings: dict[str, Any] = {}
        if resolved is not None:  # the preset's editProtocol, contextWindow and maxTokens
            model_settings = {
                "edit_protocol": resolved.edit_protocol,
                "context_window": resolved.context_window,
                "reply_tokens": resolved.max_tokens,
            }
        return DreamOptions(
            **model_settings,
            batch_size=batch_size or d.max_batch_size,
            max_batches=max_batches,
            dry_run=dry_run,
            branch=branch,
            max_iterations=d.max_iterations,
            batch_tokens=d.batch_tokens,
            file_context_tokens=d.file_context_tokens,
            max_tokens_per_run=max_tokens if max_tokens is not None else d.max_tokens_per_run,
            max_cost_usd=max_cost if max_cost is not None else d.max_cost_usd,
            max_wall_seconds=max_seconds if max_seconds is not None else d.max_wall_seconds,
            max_history_entries=d.max_history_entries,
            follow_external_cursor=d.follow_external_cursor,
            dated_trail=d.dated_trail,
            guard=GuardSettings(
                max_share=d.deletion_guard.max_share,
                min_lines=d.deletion_guard.min_lines,
                window_batches=d.deletion_guard.window_batches,
                hold_soul_changes=d.hold_soul_changes,
            ),
            write_policy=from_settings(d.write_policy),
            scopes=self.settings.scope_rules,
        )

    def dream_context(self, model: ChatModel, options: DreamOptions) -> DreamContext:
        from dream_memory.app.dream import DreamContext

        return DreamContext(
            root=self.root,
            model=model,
            history=self.history,
            clock=self.clock,
            counter=self.token_counter(),
            options=options,
            open_git=lambda create: self.git(create=create),
            redactor=self.redactor(),
            log=self.log,
        )

    def consolidate_context(
        self,
        model: ChatModel,
        *,
        budget: int | None = None,
        force: bool = False,
        dry_run: bool = False,
        update_sessions: bool = False,
        context_window: int | None = None,
        max_tokens: int = defaults.MODEL_MAX_TOKENS,
    ) -> ConsolidateContext:
        from dream_memory.app.consolidate import ConsolidateContext, ConsolidateOptions
        from dream_memory.core.consolidation import resolve_budget

        configured = self.settings.config.agents.defaults.consolidate.budget_tokens
        options = ConsolidateOptions(
            budget=resolve_budget(
                budget, configured, context_window, max_tokens, fallback_window=defaults.MODEL_CONTEXT_WINDOW_FALLBACK
            ),
            force=force,
            dry_run=dry_run,
            update_sessions=update_sessions,
            context_window=context_window,
            max_tokens=max_tokens,
            scopes=self.settings.scope_rules,
        )
        return ConsolidateContext(
            root=self.root,
            model=model,
            history=self.history,
            clock=self.clock,
            counter=self.token_counter(),
            options=options,
            redactor=self.redactor(),
            log=self.log,
        )
