"""The small protocols the core and the use cases depend on; adapters implement them.

Keeping these narrow is what lets the Dream loop run against a scripted model, a frozen clock and
an in-memory staging copy in tests, and against litellm, the system clock and the disk in
production, with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from dream_memory.core.chat import ChatReply, Message, ToolSpec


class ChatModel(Protocol):
    """One chat-completions endpoint (or the offline engine).

    ``complete`` raises ``ModelError`` (retryable or not) for transport failures; it returns the
    reply as received, and callers judge its content with ``core.chat.check_reply``.
    """

    @property
    def name(self) -> str: ...

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        purpose: str = "",
    ) -> ChatReply: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for budgets and durations."""
        ...


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class FileView(Protocol):
    """Read access to workspace files by workspace-relative path (used by the tool layer)."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None if it does not exist."""
        ...


class Redactor(Protocol):
    """Replaces secrets in text before it reaches durable storage.

    Returns the cleaned text and a count of redactions per kind (never the values).
    """

    def redact(self, text: str) -> tuple[str, dict[str, int]]: ...


class NoRedaction:
    """A Redactor that changes nothing (for tests of other behaviour)."""

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        return text, {}
