"""Applying one edit to one text, with errors written for the model that asked for it.

The rules (docs/reference/llm-protocol.md, "Phase 2 tools"): ``edit_file`` needs ``old_text`` to
occur exactly once, or the file to be new (or empty) with an empty ``old_text``; ``write_file``
only creates files. An ambiguous match, a missing match and a no-op are errors, never warnings: a
predecessor let an ambiguous edit "succeed" with a warning, and a loop of no-op edits there burnt
millions of tokens.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from dream_memory.core.bounded import lines_with_ends, split_lines
from dream_memory.errors import EditRejected

_CLOSEST_LINES = 3


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrence_lines(text: str, needle: str, limit: int = 5) -> list[int]:
    lines: list[int] = []
    start = 0
    while len(lines) < limit:
        found = text.find(needle, start)
        if found < 0:
            break
        lines.append(_line_of(text, found))
        start = found + 1
    return lines


def occurrences(text: str, needle: str) -> int:
    """How many times ``needle`` occurs, overlapping ones included ("\n\n" occurs twice in "\n\n\n").

    str.count skips overlaps, which would call an ambiguous match unique and edit the wrong place.
    """
    count, start = 0, text.find(needle)
    while start >= 0:
        count += 1
        start = text.find(needle, start + 1)
    return count


def closest_lines(text: str, needle: str, n: int = _CLOSEST_LINES) -> list[tuple[int, str]]:
    """The file lines most similar to the first line of ``needle``, with their numbers."""
    wanted = next((ln for ln in split_lines(needle) if ln.strip()), needle).strip()
    lines = split_lines(text)
    scored: list[tuple[float, int, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        ratio = difflib.SequenceMatcher(None, wanted, line.strip(), autojunk=False).quick_ratio()
        if ratio >= 0.4:
            scored.append((ratio, number, line))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(number, line) for _, number, line in scored[:n]]


def apply_edit(text: str | None, old_text: str, new_text: str, path: str) -> str:
    """The text after replacing the single occurrence of ``old_text`` with ``new_text``.

    ``text`` None means the file does not exist yet.
    """
    if old_text == new_text:
        raise EditRejected(f"no-op edit of {path}: old_text and new_text are identical, nothing would change")
    if text is None:
        if old_text == "":
            return new_text
        raise EditRejected(
            f"{path} does not exist. Create it with write_file, or call edit_file with an empty old_text."
        )
    if old_text == "":
        if text.strip() == "":
            return new_text
        raise EditRejected(
            f"old_text is empty but {path} already has content. Quote the exact text to replace "
            "(read_file shows it), or add to the file by replacing its last lines."
        )
    count = occurrences(text, old_text)
    if count == 1:
        return text.replace(old_text, new_text, 1)
    if count > 1:
        where = ", ".join(str(n) for n in _occurrence_lines(text, old_text))
        raise EditRejected(
            f"old_text appears {count} times in {path} (at lines {where}). "
            "Add surrounding lines to old_text so it matches exactly once."
        )
    # What models get wrong without meaning anything else: trailing spaces and line endings,
    # then indentation. Each looser level still needs exactly one match; it never guesses.
    for level in ("trailing", "indent"):
        starts = _line_matches(text, old_text, level)
        if len(starts) == 1:
            return _replace_lines(text, starts[0], old_text, new_text, level)
        if len(starts) > 1:
            where = ", ".join(str(n + 1) for n in starts[:5])
            raise EditRejected(
                f"old_text does not match {path} exactly, and ignoring "
                f"{'trailing spaces' if level == 'trailing' else 'indentation'} it matches {len(starts)} "
                f"places (at lines {where}). Quote the text exactly, with enough lines to be unique."
            )
    near = closest_lines(text, old_text)
    hint = (
        "The closest lines are:\n" + "\n".join(f"  {n}: {line}" for n, line in near)
        if near
        else "No similar line exists; read the file again with read_file."
    )
    raise EditRejected(
        f"old_text was not found in {path}. It must match the file exactly, including spaces and line breaks. {hint}"
    )


def _key(line: str, level: str) -> str:
    line = line.rstrip("\r\n").rstrip()
    return line.strip() if level == "indent" else line


def _needle_lines(old_text: str) -> list[str]:
    lines = old_text.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def _line_matches(text: str, old_text: str, level: str) -> list[int]:
    """0-based numbers of the file lines where ``old_text``'s lines start to match, compared at
    ``level`` ("trailing": trailing whitespace and line endings ignored; "indent": also leading)."""
    needle = [_key(line, level) for line in _needle_lines(old_text)]
    if not needle or not any(needle):
        return []
    hay = [_key(line, level) for line in split_lines(text)]
    return [i for i in range(len(hay) - len(needle) + 1) if hay[i : i + len(needle)] == needle]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _replace_lines(text: str, start: int, old_text: str, new_text: str, level: str) -> str:
    """Replace the matched whole lines with ``new_text``, in the file's line endings and (for an
    indentation match) shifted by the indentation the model left out or added."""
    lines = lines_with_ends(text)  # the rule _line_matches numbered them by
    needle = _needle_lines(old_text)
    matched = lines[start : start + len(needle)]
    eol = "\r\n" if matched and matched[0].endswith("\r\n") else "\n"
    replacement = new_text.replace("\r\n", "\n").split("\n")
    if replacement and replacement[-1] == "":
        replacement.pop()
    if level == "indent":
        pairs = [(_indent(f), _indent(n)) for f, n in zip(matched, needle, strict=True) if n.strip()]
        file_ws, model_ws = pairs[0]
        if all(f.endswith(m) and f[: len(f) - len(m)] == file_ws[: len(file_ws) - len(model_ws)] for f, m in pairs):
            extra = file_ws[: len(file_ws) - len(model_ws)]
            replacement = [extra + line if line.strip() else line for line in replacement]
        elif all(m.endswith(f) and m[: len(m) - len(f)] == model_ws[: len(model_ws) - len(file_ws)] for f, m in pairs):
            cut = len(model_ws) - len(file_ws)
            replacement = [line[cut:] if line[:cut].strip() == "" else line for line in replacement]
    body = "".join(line + eol for line in replacement)
    return "".join(lines[:start]) + body + "".join(lines[start + len(needle) :])


def create_file(existing: str | None, content: str, path: str) -> str:
    """The content of a new file; refused when the file exists (``write_file`` never overwrites)."""
    if existing is not None:
        raise EditRejected(
            f"{path} already exists; write_file only creates new files. Change it with edit_file "
            "(quote the exact text to replace)."
        )
    if not content.strip():
        raise EditRejected(f"refusing to create {path} empty: give it its content")
    return content if content.endswith("\n") else content + "\n"


def minimal_edit(before: str, after: str) -> tuple[str, str]:
    """One ``edit_file`` call (old_text, new_text) that turns ``before`` into ``after``.

    The changed region is widened to whole lines, then by neighbouring lines until ``old_text``
    occurs exactly once in ``before``, so the call always applies. Used by the offline engine.
    """
    if before == after:
        raise ValueError("nothing to change")
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    prefix = 0
    while prefix < min(len(old_lines), len(new_lines)) and old_lines[prefix] == new_lines[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(old_lines), len(new_lines)) - prefix
        and old_lines[len(old_lines) - 1 - suffix] == new_lines[len(new_lines) - 1 - suffix]
    ):
        suffix += 1
    start, end_old, end_new = prefix, len(old_lines) - suffix, len(new_lines) - suffix
    while True:
        old = "".join(old_lines[start:end_old])
        new = "".join(new_lines[start:end_new])
        if old and occurrences(before, old) == 1:
            return old, new
        if start > 0:
            start -= 1
        elif end_old < len(old_lines):
            end_old += 1
            end_new += 1
        else:
            return before, after


# --- SEARCH/REPLACE blocks (the text edit protocol) ------------------------------------------------

_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\b.*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\b.*$", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^\s*```")
_PATH_LINE = re.compile(r"^[\s>*_`#-]*(?:(?:file|path)\s*:\s*)?(?P<path>[\w./-]+\.md)[\s*_`:]*$", re.IGNORECASE)
# A line naming some other file (a folder in it, or an extension): its block is not a memory
# file's, and must not fall back to the previous block's file.
_OTHER_PATH_LINE = re.compile(
    r"^[\s>*_`#-]*(?:(?:file|path)\s*:\s*)?"
    # a hidden or rooted path (.git/hooks/post-commit, ~/x, /etc/x), or a name with a file
    # extension (notes.txt, src/app.py); not "1/2", "N/A", "and/or" or "v1.2"
    r"(?P<path>[.~/][\w.~-]*/[\w.~/-]+|[\w.~/-]*[\w~-]\.[A-Za-z]\w{0,9})[\s*_`:]*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class EditBlock:
    path: str
    search: str
    replace: str
    whole: bool = False  # the file's whole new text in a fence (aider's "whole" format), no SEARCH


_WHOLE = re.compile(r"^```[\w-]*[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def whole_file_blocks(text: str) -> list[EditBlock]:
    """``path`` on its own line, then the file's whole new text in a fence: what Qwen2.5-Coder-1.5B
    answered when asked for SEARCH/REPLACE blocks."""
    blocks: list[EditBlock] = []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for index, line in enumerate(lines[:-1]):
        named = _PATH_LINE.match(line.rstrip("\n"))
        if named is None:
            continue
        fence = _WHOLE.match(text, offsets[index + 1])
        if fence is not None:
            blocks.append(EditBlock(named["path"], "", fence["body"], whole=True))
    return blocks


def whole_file_problem(current: str, new: str) -> str | None:
    """Why a whole-file answer may not replace ``current``: it must keep the file's lines (a
    model shown only part of a file, or one that rewrites freely, would delete memory)."""
    old_lines = [ln.strip() for ln in split_lines(current) if ln.strip()]
    kept = {ln.strip() for ln in split_lines(new)}
    missing = [ln for ln in old_lines if ln not in kept]
    if old_lines and len(missing) > max(1, len(old_lines) // 10):
        return (
            f"the whole-file answer drops {len(missing)} of the file's {len(old_lines)} lines "
            f"(first: {missing[0]!r}); send SEARCH/REPLACE blocks that change only what the facts need"
        )
    return None


def _block_text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def _named(line: str, candidate: str | None, other: str | None) -> tuple[str | None, str | None]:
    """What a line before a block says of the block's file: (a memory file, some other file);
    blank lines and fences say nothing, prose names neither."""
    named = _PATH_LINE.match(line)
    if named:
        return named["path"], None
    if not line.strip() or _FENCE_LINE.match(line):
        return candidate, other
    stray = _OTHER_PATH_LINE.match(line)
    return None, stray["path"] if stray else None


def parse_edit_blocks(text: str, default_path: str | None = None) -> tuple[list[EditBlock], list[str]]:
    """SEARCH/REPLACE blocks in aider's edit-block form, and what could not be read (for the model).

    The file's path is the last line before ``<<<<<<< SEARCH`` that looks like a path (backticks,
    bold, "File:" and fences around it are tolerated), else the previous block's path, else
    ``default_path`` (a batch whose facts all go to one file).
    """
    blocks: list[EditBlock] = []
    problems: list[str] = []
    lines = split_lines(text)
    path = default_path
    candidate: str | None = None
    other: str | None = None  # a file named before the block that is not a memory file
    index = 0
    while index < len(lines):
        line = lines[index]
        if not _SEARCH.match(line):
            candidate, other = _named(line, candidate, other)
            index += 1
            continue
        path = candidate or path
        names_other, candidate, other = other, None, None
        search: list[str] = []
        replace: list[str] = []
        index += 1
        while index < len(lines) and not _DIVIDER.match(lines[index]):
            if _REPLACE.match(lines[index]) or _SEARCH.match(lines[index]):
                break
            search.append(lines[index])
            index += 1
        if index >= len(lines) or not _DIVIDER.match(lines[index]):
            problems.append(f"block {len(blocks) + len(problems) + 1} has no ======= line after its SEARCH part")
            continue
        index += 1
        while index < len(lines) and not _REPLACE.match(lines[index]):
            if _SEARCH.match(lines[index]):
                break
            replace.append(lines[index])
            index += 1
        if index >= len(lines) or not _REPLACE.match(lines[index]):
            problems.append(f"block {len(blocks) + len(problems) + 1} does not end with >>>>>>> REPLACE")
            continue
        index += 1
        if names_other is not None:
            problems.append(
                f"block {len(blocks) + len(problems) + 1} names {names_other!r}, which is not a memory file: "
                "Dream edits only the workspace's .md memory files; the block was not applied"
            )
            continue
        if path is None:
            problems.append(
                f"block {len(blocks) + len(problems) + 1} names no file: put the path alone on the line before it"
            )
            continue
        blocks.append(EditBlock(path, _block_text(search), _block_text(replace)))
    if not blocks and not problems:
        blocks = whole_file_blocks(text)
    return blocks, problems
