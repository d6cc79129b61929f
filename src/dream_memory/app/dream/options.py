"""What one Dream run is given: its options (from the config file and the command line) and
the wired ports (model, history, clock, git).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.app.progress import Progress
from dream_memory.core.guards import GuardSettings
from dream_memory.core.ports import ChatModel, Clock, NoRedaction, Redactor, TokenCounter
from dream_memory.core.scopes import ScopeRules
from dream_memory.core.stop import StopFlag
from dream_memory.core.write_policy import WritePolicy
from dream_memory.settings import defaults

EDIT_PROTOCOLS = ("tools", "text", "auto", "facts")


@dataclass(frozen=True)
class DreamOptions:
    batch_size: int = defaults.BATCH_SIZE
    max_batches: int | None = None
    dry_run: bool = False
    branch: str | None = None
    max_iterations: int = defaults.MAX_ITERATIONS
    batch_tokens: int = defaults.BATCH_TOKENS
    file_context_tokens: int = defaults.FILE_CONTEXT_TOKENS
    max_tokens_per_run: int | None = None
    max_cost_usd: float | None = None
    max_wall_seconds: float | None = None
    max_history_entries: int = defaults.MAX_HISTORY_ENTRIES
    guard: GuardSettings = field(default_factory=GuardSettings)
    edit_protocol: str = "tools"  # tools | text | auto | facts (the preset's editProtocol)
    context_window: int | None = None  # the preset's contextWindow: bounds every prompt
    reply_tokens: int = defaults.MODEL_MAX_TOKENS  # the preset's maxTokens: room kept for the answer
    follow_external_cursor: bool = False  # a .dream_cursor moved outside a commit is followed
    write_policy: WritePolicy = field(default_factory=WritePolicy)  # which changes wait for `dream review`
    dated_trail: bool = False  # a replaced value stays on the new line as "(was X until DATE)"
    # agents.defaults.scopes: which scope each entry's session key falls into (docs/scopes.md).
    scopes: ScopeRules = field(default_factory=ScopeRules)

    def scope_named(self, scope: str) -> str | None:
        """The scope as prompts, commits and progress name it; None when no rule is configured
        (everything is then shared, and nothing says so: a run is as it always was)."""
        return scope if self.scopes.configured else None


@dataclass
class DreamContext:
    """What one run needs, wired by the entrypoint."""

    root: Path
    model: ChatModel
    history: HistoryLog
    clock: Clock
    counter: TokenCounter
    options: DreamOptions
    open_git: Callable[[bool], GitStore | None]
    redactor: Redactor = field(default_factory=NoRedaction)
    log: Callable[[str], None] = lambda message: None
    # Set by the face's signal handler; the run checks it before every model call and batch.
    stop: StopFlag = field(default_factory=StopFlag)
    # Progress events (app/progress.py: each batch's end, retries, the model phases) as the run
    # goes; the CLI renders them on stderr. None: no progress wanted.
    progress: Progress | None = None
