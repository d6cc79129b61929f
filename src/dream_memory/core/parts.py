"""Text divided into parts of at most a number of tokens: a history entry too large for one
prompt, a session message larger than a consolidation slice. Nothing is cut: the parts join back
to the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def split_text(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """Split text into parts of at most ``max_tokens`` each, on line boundaries where possible.

    Joining the parts with "" gives back the text exactly: nothing is cut, only divided. Each line
    is counted once and a part by the sum of its lines' counts (re-counting the growing part at
    every line was quadratic: one 107,000-token tool result took over two minutes to divide);
    joined lines can count a little differently from their sum, so each part is checked once,
    and one that came out over is divided again.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if count_tokens(text) <= max_tokens:
        return [text]
    lines = text.splitlines(keepends=True)
    groups = pack(lines, max_tokens, count_tokens, lambda line: _split_long_line(line, max_tokens, count_tokens))
    return [piece for group in groups for piece in _fit(group, max_tokens, count_tokens)]


def pack(
    items: Iterable[T], max_tokens: int, cost: Callable[[T], int], oversized: Callable[[T], list[T]]
) -> list[list[T]]:
    """``items`` grouped in order, each group's summed ``cost`` at most ``max_tokens``; an item
    that costs more on its own is replaced by ``oversized(item)``, each piece a group of its own."""
    groups: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        spent = cost(item)
        if spent > max_tokens:
            groups += [current, *([piece] for piece in oversized(item))]
            current, used = [], 0
            continue
        if current and used + spent > max_tokens:
            groups.append(current)
            current, used = [], 0
        current.append(item)
        used += spent
    groups.append(current)
    return [group for group in groups if group]


def _fit(lines: list[str], max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """The lines joined as one part, or as several when together they count over ``max_tokens``."""
    joined = "".join(lines)
    if count_tokens(joined) <= max_tokens:
        return [joined]
    if len(lines) == 1:
        return _split_long_line(joined, max_tokens, count_tokens)
    half = len(lines) // 2
    return _fit(lines[:half], max_tokens, count_tokens) + _fit(lines[half:], max_tokens, count_tokens)


def _split_long_line(line: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    parts: list[str] = []
    start = 0
    while start < len(line):
        # Grow a window by halving the step: token counts are not linear in characters.
        size = max(1, min(len(line) - start, max_tokens * 4))
        while size > 1 and count_tokens(line[start : start + size]) > max_tokens:
            size //= 2
        parts.append(line[start : start + size])
        start += size
    return parts
