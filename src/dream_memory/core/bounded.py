"""Bounded reads: at most 200 lines and 16 KiB of UTF-8 per answer, marker included.

Clients reject tool output much beyond ~25k tokens (docs/reference/read-side.md, "Bounds"), so
every read is cut before it reaches them, and the cut says so on its own line, starting with
``[truncated]``, with the line to continue from. The limits hold for the whole answer, header and
marker included, so a caller can rely on them without adding a margin.

Lines come from an iterable and are consumed lazily: the caller can hand over a file being read
line by line and this module stops pulling one line past what it can show.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

MAX_LINES = 200
MAX_BYTES = 16 * 1024
MARKER_PREFIX = "[truncated]"


def cli_hint(next_line: int) -> str:
    return f"--offset-line {next_line}"


class Page(NamedTuple):
    """One bounded slice of a text, ready to show."""

    text: str  # header, lines and marker, each ending in a newline
    truncated: bool
    first_line: int  # 1-based number of the first line shown (the offset asked for)
    last_line: int  # last line shown, 0 when none
    next_line: int | None  # where to read on; None when the end was reached
    line_cut: bool = False  # the last line shown was itself longer than the budget and was cut


def utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits ``max_bytes`` (never splits a
    character)."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max(max_bytes, 0)].decode("utf-8", errors="ignore")


def _size(line: str) -> int:
    return len(line.encode("utf-8")) + 1


def marker_line(first: int, last: int, next_line: int, *, cut: bool, hint: Callable[[int], str]) -> str:
    if cut:
        what = f"line {last} is longer than the limit and was cut"
    elif last >= first:
        what = f"showing lines {first}-{last}"
    else:
        what = "nothing shown"
    return f"{MARKER_PREFIX} {what}; read on with {hint(next_line)}"


def bound_lines(
    lines: Iterable[str],
    *,
    offset_line: int = 1,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    header: str = "",
    hint: Callable[[int], str] = cli_hint,
) -> Page:
    """Take lines (without line endings) from ``offset_line`` on, as many as fit.

    ``header`` (one or more lines, e.g. the ``> Provisional:`` framing) is counted within the
    limits. When not everything fits, the answer ends with a marker line that also fits.
    """
    if offset_line < 1:
        raise ValueError("offset_line starts at 1")
    head = [h for h in header.split("\n") if h] if header else []
    used_lines = len(head)
    used_bytes = sum(_size(h) for h in head)
    iterator: Iterator[str] = iter(lines)
    for _ in range(offset_line - 1):
        if next(iterator, None) is None:
            return Page(text=_join(head), truncated=False, first_line=offset_line, last_line=0, next_line=None)

    shown: list[str] = []
    truncated = False
    for line in iterator:
        size = _size(line)
        if used_lines + 1 <= max_lines and used_bytes + size <= max_bytes:
            shown.append(line)
            used_lines += 1
            used_bytes += size
            continue
        shown.append(line)  # kept aside: it becomes the cut first line if nothing else fits
        truncated = True
        break
    if not truncated:
        last = offset_line + len(shown) - 1 if shown else 0
        return Page(text=_join(head + shown), truncated=False, first_line=offset_line, last_line=last, next_line=None)

    pending = shown.pop()
    # Make room for the marker by giving back lines from the end, one at a time.
    while True:
        last = offset_line + len(shown) - 1
        marker = marker_line(offset_line, last, last + 1, cut=False, hint=hint)
        lines_total = len(head) + len(shown) + 1
        bytes_total = sum(_size(h) for h in head) + sum(_size(s) for s in shown) + _size(marker)
        if lines_total <= max_lines and bytes_total <= max_bytes:
            if shown:
                return Page(
                    text=_join([*head, *shown, marker]),
                    truncated=True,
                    first_line=offset_line,
                    last_line=last,
                    next_line=last + 1,
                )
            break
        if not shown:
            break
        pending = shown.pop()

    # Not even one whole line fits beside the marker: show the first line cut to the budget, so
    # reading on always makes progress.
    first = pending
    marker = marker_line(offset_line, offset_line, offset_line + 1, cut=True, hint=hint)
    budget = max_bytes - sum(_size(h) for h in head) - _size(marker) - 1
    if len(head) + 2 > max_lines or budget < 0:
        marker = marker_line(offset_line, offset_line - 1, offset_line, cut=False, hint=hint)
        return Page(
            text=_join([*head, marker]), truncated=True, first_line=offset_line, last_line=0, next_line=offset_line
        )
    return Page(
        text=_join([*head, utf8_prefix(first, budget), marker]),
        truncated=True,
        first_line=offset_line,
        last_line=offset_line,
        next_line=offset_line + 1,
        line_cut=True,
    )


def split_lines(text: str) -> list[str]:
    """Lines without endings (``\\n``, ``\\r\\n`` and ``\\r`` end a line); no phantom last line."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# Two rules for where a line ends, each used on both sides of an index: code that finds line N by
# one rule and splices line N by another replaces the wrong text. ``str.splitlines`` follows
# neither (it also ends a line at U+2028, U+0085, form feeds and more, which pasted chat text holds).
_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def lines_with_ends(text: str) -> list[str]:
    """``split_lines``' lines with their endings kept: ``"".join(lines_with_ends(t)) == t``. The
    numbering of read_file, search and the sections of a memory file."""
    return [line for line in _ENDS.split(text) if line]


def newline_lines(text: str) -> list[str]:
    """Lines as git counts them, endings kept: a line ends at ``\\n`` and nowhere else (a
    carriage return stays in its line). ``"".join(newline_lines(t)) == t``."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def bound_text(
    text: str,
    *,
    offset_line: int = 1,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    header: str = "",
    hint: Callable[[int], str] = cli_hint,
) -> Page:
    """``bound_lines`` over a whole string."""
    return bound_lines(
        split_lines(text), offset_line=offset_line, max_lines=max_lines, max_bytes=max_bytes, header=header, hint=hint
    )


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)
