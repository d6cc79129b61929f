"""What one Consolidator run is given: its options and the wired ports."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.app.progress import Progress
from dream_memory.core.consolidation import (
    ENTRY_CAP_BYTES,
    Budget,
)
from dream_memory.core.ports import ChatModel, Clock, NoRedaction, Redactor, TokenCounter
from dream_memory.core.scopes import ScopeRules
from dream_memory.core.stop import StopFlag
from dream_memory.settings import defaults


@dataclass(frozen=True)
class ConsolidateOptions:
    budget: Budget
    force: bool = False
    dry_run: bool = False
    update_sessions: bool = False
    context_window: int | None = None  # of the model; None: defaults.MODEL_CONTEXT_WINDOW_FALLBACK
    max_tokens: int = defaults.MODEL_MAX_TOKENS  # the model's completion limit
    entry_cap_bytes: int = ENTRY_CAP_BYTES
    # How long to wait before reading a session again whose consolidated part no longer matches:
    # an agent rewriting the file is done by then; a file still different was reset.
    reread_delay: float = 0.2
    # The workspace's scope rules: a session whose key is only a guess from its file name cannot
    # be filed under anyone's scope, so it is not consolidated while rules are configured.
    scopes: ScopeRules = field(default_factory=ScopeRules)


@dataclass
class ConsolidateContext:
    root: Path
    model: ChatModel
    history: HistoryLog
    clock: Clock
    counter: TokenCounter
    options: ConsolidateOptions
    redactor: Redactor = field(default_factory=NoRedaction)
    log: Callable[[str], None] = lambda message: None
    sleep: Callable[[float], None] = time.sleep
    # Set by the face's signal handler: no model call after it, no session after the one in flight.
    stop: StopFlag = field(default_factory=StopFlag)
    # One event per session as it ends (app/progress.py); None: no progress wanted.
    progress: Progress | None = None


# Model failures that no retry or later slice will fix: the run stops, nothing is archived.
CONFIGURATION_FAILURES = frozenset({"auth", "bad_request"})
