"""The progress of a Dream run's model calls: the retry hook of the litellm adapter as ``Retry``
events, and the model phases of each batch (``PhaseStarted`` / ``PhaseEnded``, for --verbose) told
apart by the purpose each call names (``dream.phase1``, ``dream.phase2``, their retries)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from dream_memory.app.progress import PhaseEnded, PhaseStarted, Progress, Retry
from dream_memory.core.chat import ChatReply, Message, ToolSpec
from dream_memory.core.ports import ChatModel


def _phase(purpose: str) -> int | None:
    for phase in (1, 2):
        if purpose == f"dream.phase{phase}" or purpose.startswith(f"dream.phase{phase}."):
            return phase
    return None


class PhaseWatch:
    """A ChatModel passing every call on, and saying when a phase starts and ends."""

    def __init__(self, inner: ChatModel, progress: Progress) -> None:
        self.inner, self.progress = inner, progress
        self.phase: int | None = None
        self.calls = self.tool_calls = 0
        self.started = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    def _retry(self, attempt: int, attempts: int, wait: float, reason: str) -> None:
        self.progress(Retry(attempt=attempt, attempts=attempts, wait=wait, reason=reason))

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        phase = _phase(purpose)
        if phase is not None and phase != self.phase:
            self.finish()
            self.phase, self.calls, self.tool_calls, self.started = phase, 0, 0, time.perf_counter()
            self.progress(PhaseStarted(phase=phase))
        if phase is not None:
            self.calls += 1
        # The adapter's retry hook, one event before each retry's wait, is ours only for the call:
        # a model outlives the run (eval's, shared by its scenarios), and a later run without
        # progress must not send its retries to this run's listener.
        inner = self.inner
        if not hasattr(inner, "on_retry"):
            reply = inner.complete(messages, tools=tools, purpose=purpose)
        else:
            before, inner.on_retry = inner.on_retry, self._retry
            try:
                reply = inner.complete(messages, tools=tools, purpose=purpose)
            finally:
                inner.on_retry = before
        if phase is not None:
            self.tool_calls += len(reply.tool_calls)
        return reply

    def finish(self) -> None:
        """The phase under way (if any) ended: the batch is over or the other phase begins."""
        if self.phase is None:
            return
        seconds = time.perf_counter() - self.started
        self.progress(PhaseEnded(phase=self.phase, calls=self.calls, tool_calls=self.tool_calls, seconds=seconds))
        self.phase = None
