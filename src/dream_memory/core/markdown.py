"""Markdown files as sections: the outline of a large memory file and the parts that matter.

A memory file larger than its context budget reaches the model as its outline (headings with
line counts) plus the sections relevant to the batch; ``read_file`` can fetch any other section on
demand. Edits still apply to the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dream_memory.core.bounded import lines_with_ends
from dream_memory.core.search import split_sections as search_split


@dataclass(frozen=True)
class MdSection:
    title: str  # "" for the text before the first heading
    level: int  # 0 for the preamble
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    text: str  # exactly as in the file (line ends kept), so it can be quoted in an edit

    @property
    def lines(self) -> int:
        return self.end - self.start + 1


def split_sections(text: str) -> list[MdSection]:
    """Sections delimited by headings (any level), as the read side's search splits them
    (``core.search.split_sections``: one rule for both), with each section's exact text."""
    lines = lines_with_ends(text)
    return [
        MdSection(s.heading, s.level, s.start_line, s.end_line, "".join(lines[s.start_line - 1 : s.end_line]))
        for s in search_split(text)
    ]


def outline(text: str, *, max_rows: int = 60) -> str:
    """Headings with their line ranges, indented by level; at most ``max_rows`` rows.

    A file with hundreds of headings would make its own outline too large to be a summary, so past
    ``max_rows`` only the shallowest levels are listed, then the first and last headings with a
    count of the ones left out (read_file still reaches any section by its heading).
    """
    sections = split_sections(text)
    levels = sorted({s.level for s in sections if s.level > 0})
    if levels:
        counts = {d: sum(1 for s in sections if s.level <= d) for d in levels}
        fitting = [d for d in levels if counts[d] <= max_rows]
        depth = fitting[-1] if fitting else levels[0]
        deeper = [d for d in levels if d > depth]
        if counts[depth] < max_rows // 3 and deeper:
            depth = deeper[0]  # a few top headings say too little: show the next level, trimmed
        sections = [s for s in sections if s.level <= depth]
    rows = [_outline_row(s) for s in sections]
    if len(rows) > max_rows:
        half = max_rows // 2
        omitted = len(rows) - 2 * half
        rows = [
            *rows[:half],
            f"- ... {omitted} more sections; read_file(path, section=<heading>) reads any of them",
            *rows[-half:],
        ]
    return "\n".join(rows)


def _outline_row(section: MdSection) -> str:
    label = section.title or "(preamble)"
    indent = "  " * max(0, section.level - 1)
    return f"{indent}- {label} (lines {section.start}-{section.end}, {section.lines} lines)"


def find_section(text: str, title: str) -> MdSection | None:
    """The first section whose heading matches ``title`` (case-insensitive, '#' marks ignored)."""
    wanted = title.strip().lstrip("#").strip().casefold()
    for section in split_sections(text):
        if section.title.casefold() == wanted:
            return section
    return None


_WORD = re.compile(r"[\w][\w'-]{2,}", re.UNICODE)
_STOP = frozenset(
    (
        "the and for with that this from have has are was were will would should could into about "
        "user assistant prefers their there they them what when which while your you not but"
    ).split()
)


def query_terms(text: str, limit: int = 40) -> list[str]:
    """Distinctive words of a batch, most frequent first: the query for relevant sections."""
    counts: dict[str, int] = {}
    for word in _WORD.findall(text.casefold()):
        if word in _STOP or word.isdigit():
            continue
        counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]
