"""The files ``dream eval`` reads and writes itself: scenario files, the session files it installs
in a scenario's fresh workspace, and, after the run, the memory files, the history texts kept
outside git and every version in the workspace's repository (opened to read)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from dream_memory.adapters.git import GitStore, open_readonly
from dream_memory.core import layout


def read_text(path: Path) -> str:
    """The file's UTF-8 text; FileNotFoundError, OSError or UnicodeDecodeError as they come."""
    return path.read_text(encoding="utf-8")


def is_file(path: Path) -> bool:
    return path.is_file()


def folders_with(base: Path, marker: str) -> list[Path] | None:
    """``[base]`` when it holds ``marker``; else its subfolders that do, sorted; None when ``base``
    is no folder at all."""
    if (base / marker).is_file():
        return [base]
    if base.is_dir():
        return sorted(p for p in base.iterdir() if (p / marker).is_file())
    return None


def fresh_folder(root: Path) -> None:
    """Remove what an earlier run left at ``root``."""
    if root.exists():
        shutil.rmtree(root)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def memory_files(root: Path) -> dict[str, str]:
    """Workspace-relative path -> text of every memory content file on disk (tracked, not Dream's own)."""
    found: dict[str, str] = {}
    for top in layout.tracked_roots():
        start = root / top
        candidates = [start] if start.is_file() else sorted(start.rglob("*")) if start.is_dir() else []
        for path in candidates:
            rel = path.relative_to(root).as_posix()
            if path.is_file() and layout.is_content(rel):
                found[rel] = path.read_text(encoding="utf-8", errors="replace")
    return found


def stored_history(root: Path) -> dict[str, str]:
    """history.jsonl and every file of the archive: workspace-relative path -> text."""
    rels = [layout.HISTORY] if (root / layout.HISTORY).is_file() else []
    archive = root / layout.ARCHIVE_DIR
    if archive.is_dir():
        rels += sorted(p.relative_to(root).as_posix() for p in archive.rglob("*") if p.is_file())
    return {rel: (root / rel).read_text(encoding="utf-8", errors="replace") for rel in rels}


def template_files(names: Iterable[str]) -> dict[str, str]:
    """The bundled templates of these workspace files (those that have one)."""
    base = resources.files("dream_memory") / "data" / "templates"
    return {rel: (base / rel).read_text(encoding="utf-8") for rel in names if (base / rel).is_file()}


def open_repository(root: Path) -> GitStore | None:
    """The repository versioning ``root``, to read its commits; None when there is none. Nothing is
    created, and nothing can be written through it."""
    return open_readonly(root)
