"""Text helpers of the read side: telling text from binary, reading a stream line by line with
a cap, history.jsonl as searchable text, entity and section names, and how a truncated page
tells its reader to go on."""

from __future__ import annotations

import codecs
import io
from collections.abc import Callable, Iterator
from typing import IO, Any

from dream_memory.core import layout
from dream_memory.core.bounded import cli_hint
from dream_memory.errors import InputError

EXCLUDE_VARIABLE = "DREAM_MEMORY_EXCLUDE"

# Section names that reach the durable workspace files instead of sections/NAME.md.
SECTION_ALIASES: dict[str, str] = {
    "soul": layout.SOUL,
    "user": layout.USER,
    "memory": layout.MEMORY,
    "observations": layout.OBSERVATIONS,
}
DURABLE_NAMES: dict[str, str] = {layout.SOUL: "soul", layout.USER: "user", layout.MEMORY: "memory"}

# Bytes looked at to tell text from binary: a NUL, or bytes that are not UTF-8, mean binary.
SNIFF_BYTES = 8192
# Search reads whole files; larger ones are skipped and reported rather than read.
MAX_SEARCH_FILE_BYTES = 16 * 1024 * 1024
MAX_NAME_CHARS = 256


def looks_binary(head: bytes) -> bool:
    """A NUL byte, or bytes that cannot start valid UTF-8 text, in the first block."""
    if b"\0" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return True
    return False


def stream_lines(stream: IO[bytes], first: bytes, max_line_bytes: int) -> Iterator[str]:
    """Lines of a stream without their newline, each read with a cap so a huge line is never held
    whole (the rest of an over-long line is skipped). A carriage return stays in its line: the
    answer is the file's exact text (a CRLF file reads back as CRLF), and a human rendering shows
    the CR of a CRLF end as it is and any other as an escape (``core.terminal``)."""
    buffered = io.BufferedReader(_Prefixed(first, stream))
    while True:
        chunk = buffered.readline(max_line_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield chunk[:-1].decode("utf-8", errors="replace")
            continue
        if len(chunk) >= max_line_bytes:
            while True:
                rest = buffered.readline(64 * 1024)
                if not rest or rest.endswith(b"\n"):
                    break
            yield chunk.decode("utf-8", errors="ignore")
            continue
        yield chunk.decode("utf-8", errors="replace")


class _Prefixed(io.RawIOBase):
    """A raw stream that yields ``prefix`` and then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream: IO[bytes]) -> None:
        self._prefix = prefix
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(view))
        view[: len(data)] = data
        return len(data)


def history_text(data: bytes, visible: Callable[[str | None], bool] | None = None) -> str:
    """history.jsonl as searchable text: one line per physical line, entries rendered readably.
    ``visible(session_key)`` False leaves an entry out (one of a scope the reader cannot see);
    its line stays, empty, so the line numbers still count physical lines."""
    from dream_memory.core.history import parse_lines, split_physical_lines

    rendered: list[str] = []
    for parsed in parse_lines(split_physical_lines(data.decode("utf-8", errors="replace"))):
        shown = [e for e in parsed.entries if visible is None or visible(e.session_key)]
        parts = [f"cursor {e.cursor} · {e.timestamp} · {' '.join(e.content.split())}" for e in shown]
        rendered.append(" | ".join(parts))
    return "\n".join(rendered)


def _mcp_hint(tool: str) -> Callable[[int], str]:
    def hint(next_line: int) -> str:
        return f"{tool}(offsetLine={next_line})"

    return hint


def hint_for(surface: str, kind: str) -> Callable[[int], str]:
    """How the ``[truncated]`` marker tells the reader to go on, per surface."""
    if surface == "mcp":
        return _mcp_hint("dream_entity" if kind == "entity" else "dream_section")
    return cli_hint


def check_name(name: str, what: str) -> str:
    clean = name.strip()
    if not clean:
        raise InputError(f"give the {what} name to read")
    if len(clean) > MAX_NAME_CHARS or "\0" in clean or any(ord(c) < 32 for c in clean):
        raise InputError(f"that {what} name is not usable (too long or holding control characters)")
    return clean
