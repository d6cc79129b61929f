"""index.md as values: the Entity | File | Repos table and the path resolver (docs/reference/read-side.md).

The table is written by people and by an LLM ingester, so the parser is lenient about shape and
strict about meaning: columns are found by header name (any order, extra columns ignored), pipes
may be escaped, cells may be blank, lines may end in CRLF. Every row it cannot use is reported with
its line number instead of being guessed at.

Nothing here touches the disk or the environment: the caller passes the text and the home folder
used for ``~`` expansion.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import NamedTuple


def name_key(name: str) -> str:
    """How an entity name (or a path) is compared with DREAM_MEMORY_EXCLUDE: case-folded and in
    Unicode normal form C, so `Café` typed in a terminal (NFC) also names the file macOS wrote as
    `café.md` in NFD."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name.strip()).casefold())


# Header names accepted for each column (compared casefolded, after markup is stripped).
ENTITY_HEADERS = frozenset({"entity", "entities", "name"})
FILE_HEADERS = frozenset({"file", "path"})
REPOS_HEADERS = frozenset({"repos", "repo", "repositories", "repository", "roots"})

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_SEPARATOR_CELL = re.compile(r"^:?-{1,}:?$")
_LINK = re.compile(r"^\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)$")
_DRIVE = re.compile(r"^[A-Za-z]:")


class IndexRow(NamedTuple):
    """One usable row of the index table."""

    entity: str
    file: str  # store-relative as written (markup removed); "" when the cell is blank
    repos: tuple[str, ...]  # absolute, normalised roots (parenthetical stripped, ~ expanded)
    line_no: int  # 1-based line of index.md
    raw: str  # the line as written, without its line ending


class IndexTable(NamedTuple):
    rows: tuple[IndexRow, ...]
    problems: tuple[str, ...] = ()

    def find(self, name: str) -> IndexRow | None:
        """The first row whose entity equals ``name`` case-insensitively."""
        wanted = name.strip().casefold()
        for row in self.rows:
            if row.entity.casefold() == wanted:
                return row
        return None

    def names(self) -> list[str]:
        seen: dict[str, str] = {}
        for row in self.rows:
            seen.setdefault(row.entity.casefold(), row.entity)
        return list(seen.values())


class Resolution(NamedTuple):
    """The entity owning a path: the longest root wins, then the earliest row."""

    entity: str
    file: str
    root: str
    line_no: int
    ties: tuple[str, ...] = ()  # other entities with the same matching root length


# --- cells --------------------------------------------------------------------------------------


def split_cells(line: str) -> list[str]:
    """Cells of one table line; ``\\|`` is a literal pipe, outer pipes are optional."""
    text = line.strip()
    cells = _CELL_SPLIT.split(text)
    if text.startswith("|"):
        cells = cells[1:]
    if text.endswith("|") and not text.endswith("\\|") and cells:
        cells = cells[:-1]
    return [cell.replace("\\|", "|").strip() for cell in cells]


def has_unescaped_pipe(line: str) -> bool:
    return bool(re.search(r"(?<!\\)\|", line))


def _strip_markup(cell: str) -> str:
    """Remove the emphasis and code markers people wrap cells in."""
    text = cell.strip()
    if not text or text[0] not in "*_`":
        return text
    for marker in ("**", "__", "`", "*", "_"):
        if len(text) > 2 * len(marker) and text.startswith(marker) and text.endswith(marker):
            text = text[len(marker) : -len(marker)].strip()
    return text


def clean_file_cell(cell: str) -> str:
    """The path in a File cell: markup removed, a markdown link reduced to its target."""
    text = _strip_markup(cell)
    if text.startswith("["):
        link = _LINK.match(text)
        if link:
            text = link.group(1)
    return text.strip()


def split_repos(cell: str) -> list[str]:
    """Split a Repos cell on commas that are not inside parentheses."""
    if "(" not in cell:
        return [p.strip() for p in cell.split(",") if p.strip()]
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in cell:
        if char == "(":
            depth += 1
        elif char == ")" and depth > 0:
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def strip_parenthetical(text: str) -> str:
    """``/home/u/nix-config (was nixos-system)`` -> ``/home/u/nix-config``; nested and repeated
    trailing parentheticals are removed too."""
    result = text.rstrip()
    while result.endswith(")"):
        depth = 0
        start = -1
        for i in range(len(result) - 1, -1, -1):
            if result[i] == ")":
                depth += 1
            elif result[i] == "(":
                depth -= 1
                if depth == 0:
                    start = i
                    break
        if start <= 0:
            break  # unbalanced, or nothing but a parenthetical: leave it to fail as a path
        result = result[:start].rstrip()
    return result


def clean_root(raw: str, home: str | None) -> str | None:
    """One repo root, normalised: trailing parenthetical stripped, ``~`` expanded, no trailing
    slash. None when it is not an absolute path (it could never match one)."""
    text = _strip_markup(raw)
    if text.endswith(")"):
        text = _strip_markup(strip_parenthetical(text))
    if text == "~" or text.startswith("~/"):
        if not home:
            return None
        text = home.rstrip("/") + text[1:]
    if not text.startswith("/"):
        return None
    return normalise_path(text)


def normalise_path(path: str) -> str:
    """A lexical absolute POSIX path: ``.``/``..``/doubled slashes folded, no trailing slash."""
    if "//" not in path and "/." not in path and (len(path) == 1 or not path.endswith("/")):
        return path  # already normal: the common case, and normpath is slow for 10,000 rows
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


# --- the table -----------------------------------------------------------------------------------


def _header_columns(cells: Sequence[str]) -> dict[str, int] | None:
    columns: dict[str, int] = {}
    for i, cell in enumerate(cells):
        key = _strip_markup(cell).casefold()
        if key in ENTITY_HEADERS and "entity" not in columns:
            columns["entity"] = i
        elif key in FILE_HEADERS and "file" not in columns:
            columns["file"] = i
        elif key in REPOS_HEADERS and "repos" not in columns:
            columns["repos"] = i
    if "entity" in columns and ("file" in columns or "repos" in columns):
        return columns
    return None


def _is_separator(cells: Sequence[str]) -> bool:
    return bool(cells) and all(_SEPARATOR_CELL.match(c.replace(" ", "")) for c in cells)


def parse_index(text: str, *, home: str | None = None, only: str | None = None) -> IndexTable:
    """Every usable row of every Entity/File/Repos table in ``text``.

    ``only``: keep just the rows whose line mentions that text (case-insensitively), skipping the
    work on the others; a quick way to find one entity in a large index.
    """
    wanted = only.casefold() if only else None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    rows: list[IndexRow] = []
    problems: list[str] = []
    columns: dict[str, int] | None = None
    fence: str | None = None
    for line_no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            columns = None
            continue
        if fence is not None:
            continue
        if not stripped or not has_unescaped_pipe(stripped):
            columns = None  # a table ends at the first line that is not a row
            continue
        if columns is not None and wanted is not None and wanted not in stripped.casefold():
            continue
        cells = split_cells(stripped)
        if columns is None:
            columns = _header_columns(cells)
            continue
        if _is_separator(cells):
            continue
        row = _row(cells, columns, line_no, line, home=home, problems=problems)
        if row is not None:
            rows.append(row)
    return IndexTable(tuple(rows), tuple(problems))


def _cell(cells: Sequence[str], columns: dict[str, int], key: str) -> str:
    index = columns.get(key)
    return cells[index] if index is not None and index < len(cells) else ""


def _row(
    cells: Sequence[str],
    columns: dict[str, int],
    line_no: int,
    raw: str,
    *,
    home: str | None,
    problems: list[str],
) -> IndexRow | None:
    entity = _strip_markup(_cell(cells, columns, "entity"))
    if not entity:
        problems.append(f"index.md line {line_no}: the Entity cell is empty; row ignored")
        return None
    file = clean_file_cell(_cell(cells, columns, "file"))
    repos: list[str] = []
    for part in split_repos(_cell(cells, columns, "repos")):
        root = clean_root(part, home)
        if root is None:
            problems.append(f"index.md line {line_no}: repo {part!r} is not an absolute path; ignored")
        elif root not in repos:
            repos.append(root)
    return IndexRow(entity=entity, file=file, repos=tuple(repos), line_no=line_no, raw=raw.rstrip("\r"))


# --- safety of File cells ------------------------------------------------------------------------


def safe_relative(path: str) -> str | None:
    """``path`` as a clean store-relative POSIX path, or None when it could leave the store
    (absolute, a drive letter, ``..`` anywhere, a backslash or NUL)."""
    text = path.strip()
    if not text or "\0" in text or "\\" in text or text.startswith(("/", "~")) or _DRIVE.match(text):
        return None
    if "//" not in text and "." not in text.replace(".md", ""):
        return text.rstrip("/") or None  # nothing to fold: the common case
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


# --- resolving -----------------------------------------------------------------------------------


def root_contains(root: str, path: str) -> bool:
    """True when ``path`` is ``root`` or lies under it, comparing whole path components."""
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def resolve(rows: Iterable[IndexRow], path: str, *, excluded: frozenset[str] = frozenset()) -> Resolution | None:
    """The entity whose root contains ``path`` (absolute); excluded entities are invisible.

    The longest matching root wins; among equally long roots the earliest row wins and the others
    are reported as ties, so the answer never depends on anything but the file's text.
    """
    target = normalise_path(path)
    best: tuple[int, IndexRow, str] | None = None
    ties: list[str] = []
    for row in rows:
        if name_key(row.entity) in excluded:
            continue
        for root in row.repos:
            if not root_contains(root, target):
                continue
            length = 0 if root == "/" else len(root.split("/"))
            if best is None or length > best[0]:
                best = (length, row, root)
                ties = []
            elif length == best[0] and row.entity.casefold() != best[1].entity.casefold() and row.entity not in ties:
                ties.append(row.entity)
    if best is None:
        return None
    _, row, root = best
    return Resolution(entity=row.entity, file=row.file, root=root, line_no=row.line_no, ties=tuple(ties))


def filtered_index_text(text: str, table: IndexTable, excluded: frozenset[str]) -> str:
    """index.md with the rows of excluded entities removed (for surfaces that show the table)."""
    if not excluded:
        return text
    hidden = {row.line_no for row in table.rows if name_key(row.entity) in excluded}
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(line for i, line in enumerate(lines, start=1) if i not in hidden)
