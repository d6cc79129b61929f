"""What a run may spend: the metered model that stops calls once a run budget (tokens, cost,
wall time) is spent, and the prompt budget that fits each prompt in the preset's contextWindow.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from dream_memory.app.dream.options import DreamContext, DreamOptions
from dream_memory.core.chat import ChatReply, Message, ToolSpec, Usage
from dream_memory.core.ports import ChatModel, Clock
from dream_memory.core.stop import StopFlag, StopNow
from dream_memory.errors import ConfigError, ModelError


class BudgetExceeded(ModelError):
    def __init__(self, message: str) -> None:
        super().__init__(message, kind="budget", retryable=False)


class Interrupted(Exception):  # a stop request, not an error: no DreamError, no exit code of its own
    """A stop was requested (a signal): no further model call; the batch in flight is not landed."""

    def __init__(self, signum: int | None) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


class MeteredModel:
    """Counts usage of every call, stops calls once a run budget is spent, and makes none after a
    stop was requested (the call in flight finishes: its reply is paid for either way)."""

    def __init__(self, model: ChatModel, options: DreamOptions, clock: Clock, stop: StopFlag | None = None) -> None:
        self.inner = model
        self.stop = stop or StopFlag()
        self.options = options
        self.clock = clock
        self.started = clock.monotonic()
        self.usage = Usage()
        self.seconds = 0.0  # spent inside model calls (wall clock, for the outside-the-model figure)

    @property
    def name(self) -> str:
        return self.inner.name

    def exhausted(self) -> str | None:
        """Which budget is spent, or None."""
        o = self.options
        if o.max_tokens_per_run is not None and self.usage.total_tokens >= o.max_tokens_per_run:
            return f"token budget of {o.max_tokens_per_run} spent ({self.usage.total_tokens} tokens)"
        if o.max_cost_usd is not None and (self.usage.cost_usd or 0.0) >= o.max_cost_usd:
            return f"cost budget of ${o.max_cost_usd:g} spent (${self.usage.cost_usd or 0:.4f})"
        if o.max_wall_seconds is not None and self.clock.monotonic() - self.started >= o.max_wall_seconds:
            return f"time budget of {o.max_wall_seconds:g} s spent"
        return None

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        if self.stop.requested:
            raise Interrupted(self.stop.signum)
        spent = self.exhausted()
        if spent:
            raise BudgetExceeded(spent)
        started = time.perf_counter()
        try:
            self.stop.in_call = True  # inside the try: the stop may cut in right here too
            reply = self.inner.complete(messages, tools=tools, purpose=purpose)
        except StopNow:
            raise Interrupted(self.stop.signum) from None
        finally:
            self.stop.in_call = False
            self.seconds += time.perf_counter() - started
        self.usage = self.usage + reply.usage
        return reply


def usage_since(now: Usage, before: Usage) -> Usage:
    cost = None if now.cost_usd is None or before.cost_usd is None else now.cost_usd - before.cost_usd
    return Usage(
        now.prompt_tokens - before.prompt_tokens,
        now.completion_tokens - before.completion_tokens,
        cost,
        now.calls - before.calls,
    )


@dataclass(frozen=True)
class PromptBudget:
    """What one prompt may hold: per file shown, and for the history (tokens, our counter)."""

    file_tokens: int
    history_tokens: int
    window: int | None = None


# The server counts with the model's own tokenizer, ours is an estimate of it: keep a margin.
_WINDOW_MARGIN = 0.85


_MIN_ROOM = 400  # tokens of history and files below which a batch could hold nothing useful


def _room(window: int, reply_tokens: int, system_tokens: int) -> int:
    """What a prompt in ``window`` leaves for history and files (grows with the window)."""
    reply = min(reply_tokens, window // 4)
    return int((window - reply) * _WINDOW_MARGIN) - system_tokens - 200


def _smallest_window(window: int, reply_tokens: int, system_tokens: int) -> int:
    """The smallest contextWindow above ``window`` whose room reaches _MIN_ROOM: the figure a
    refusal names, so the user need not work out the margins."""
    low, high = window, max(2 * window, 1024)
    while _room(high, reply_tokens, system_tokens) < _MIN_ROOM:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if _room(mid, reply_tokens, system_tokens) < _MIN_ROOM else (low, mid)
    return high


def prompt_budget(ctx: DreamContext, system: str) -> PromptBudget:
    """The prompt's budgets: the configured ones, tightened to fit the preset's contextWindow."""
    o = ctx.options
    if o.context_window is None:
        return PromptBudget(o.file_context_tokens, o.batch_tokens)
    system_tokens = ctx.counter.count(system)
    reply = min(o.reply_tokens, o.context_window // 4)
    room = _room(o.context_window, o.reply_tokens, system_tokens)
    if room < _MIN_ROOM:
        raise ConfigError(
            f"contextWindow {o.context_window} is too small for Dream's prompt: the system part alone "
            f"is about {system_tokens} tokens, {reply} are kept for the answer, and at least "
            f"{_MIN_ROOM} must be left for history and files after a {round((1 - _WINDOW_MARGIN) * 100)}% "
            f"margin for the server's own tokenizer; this prompt needs a contextWindow of at least "
            f"{_smallest_window(o.context_window, o.reply_tokens, system_tokens)}",
            hint="raise the preset's contextWindow, lower its maxTokens, or shorten prompts/dream.md",
        )
    files = max(100, min(o.file_context_tokens, int(room * 0.45) // 3))
    return PromptBudget(files, max(200, min(o.batch_tokens, room - 3 * files)), o.context_window)
