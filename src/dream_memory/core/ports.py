"""The small protocols the core and the use cases depend on; adapters implement them.

Keeping these narrow is what lets the Dream loop run against a scripted model, a frozen clock and
an in-memory staging copy in tests, and against litellm, the system clock and the disk in
production, with the same code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    # Annotations only: the read side imports this module on every `dream search`.
    from dream_memory.core.chat import ChatReply, Message, ToolSpec
    from dream_memory.core.search import Query


class ChatModel(Protocol):
    """One chat-completions endpoint (or the offline engine).

    ``complete`` raises ``ModelError`` (retryable or not) for transport failures; it returns the
    reply as received, and callers judge its content with ``core.chat.check_reply``. The models
    we build also have ``close``, called by the use case that built them (``app.models``); a
    caller's own model need not, so it is no part of this protocol.
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


class Redactor(Protocol):
    """Replaces secrets in text before it reaches durable storage.

    Returns the cleaned text and a count of redactions per kind (never the values).
    """

    def redact(self, text: str) -> tuple[str, dict[str, int]]: ...


class NoRedaction:
    """A Redactor that changes nothing (for tests of other behaviour)."""

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        return text, {}


# --- the read side: where a store's bytes come from, and the search index beside it ----------------

# One searchable file: (store-relative path, display name, kind, found by listing a folder).
# A plain tuple: a search makes one per file of the store.
Source = tuple[str, str, str, bool]


class TooLarge(Exception):
    """A file is larger than the reader's limit (its path is ``args[0]``); it was not read whole."""


class StoreTree(Protocol):
    """A store's files, read-only: the folder as it is now, or as committed at one revision.

    Paths are store-relative POSIX strings that already passed ``core.paths``. A path that leads
    outside the store, or to a file the read side never serves, raises ``Refused``.
    """

    root: str  # the store folder, absolute
    revision: str | None  # the commit read, None for the folder as it is
    real_root: str | None  # the folder's real path when it is read from disk (keys the search index)

    def has_file(self, rel: str) -> bool:
        """True when ``rel`` names a regular file (or something a read would refuse with a reason)."""
        ...

    def open_stream(self, rel: str) -> IO[bytes] | None:
        """The file opened for reading; None when it does not exist."""
        ...

    def kind_of(self, rel: str) -> str | None:
        """What ``rel`` names when something is there that is not a regular file the tree reads
        ("a named pipe", "a folder"; at a revision also "a symlink"), for the message of a
        refusal; None when it is missing or a regular file."""
        ...

    def read(self, rel: str, limit: int, *, listed: bool = False) -> bytes | None:
        """All bytes of the file (None: missing or not a regular file); ``TooLarge`` past ``limit``.
        ``listed``: the path was just listed by ``list_markdown`` (the fast path of search)."""
        ...

    def identity(self, rel: str, listed: os.stat_result | None = None) -> object | None:
        """What makes two names one file (a hard link or a symlink shares it); None when missing.
        ``listed``: the stat ``list_markdown`` recorded for it, to save a look-up."""
        ...

    def identity_of(self, rel: str, stream: IO[bytes]) -> object:
        """The identity of the file behind a stream from ``open_stream``."""
        ...

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        """``*.md`` files under ``folder``, sorted; hidden names skipped. ``stats`` receives the
        lstat of each regular file listed (the search index's freshness proof)."""
        ...

    def close(self) -> None: ...


class CachedAnswer(NamedTuple):
    """What the search index says about one query over a store's sources."""

    # Sources the index answered: (source, occurrences per query term, per term: in a heading).
    scored: list[tuple[Source, list[int], list[bool]]]
    # Sources to read from the store: (source, index it after reading).
    to_read: list[tuple[Source, bool]]
    skips: dict[str, str]  # path -> why the index knows it is not searchable (binary, too large)


class SearchCache(Protocol):
    """The search index of one store, as a search sees it; ``NoSearchCache`` when there is none.

    It can make search faster, never different: whatever it cannot answer goes to ``to_read``.
    """

    # Filled by ``StoreTree.list_markdown`` (None: no index, no stats needed).
    stats: dict[str, os.stat_result] | None

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the user should hear of the index after this search (it was not used, and why)."""
        ...

    def rows(self) -> list[tuple[str, str]] | None:
        """index.md's (entity, file) rows as recorded, while index.md is unchanged since."""
        ...

    def answer(self, query: Query, sources: Sequence[Source]) -> CachedAnswer: ...

    def remember(self, rel: str, folded: bytes | None, headings: bytes = b"", *, skip: str | None = None) -> None:
        """A file read for ``to_read`` with "index it" set: its folded text, or why it is skipped."""
        ...

    def record(
        self, rows: list[tuple[str, str]], *, keep_rows: bool, excluded: Callable[[str], bool] | None
    ) -> tuple[int, bool]:
        """Write what this search read back to the index (rows: index.md's, kept when
        ``keep_rows``; ``excluded``: files whose text must not stay in it). Returns (files
        indexed, index built)."""
        ...

    def close(self) -> None: ...
