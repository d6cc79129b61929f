"""What ``dream doctor`` looks at on disk that no other adapter reads: which workspace files are
there, git lock files a killed process may have left, and free disk space. Reads only."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dream_memory.adapters.git import GitStore


def is_folder(path: Path) -> bool:
    return path.is_dir()


def present(root: Path, rels: Sequence[str]) -> list[str]:
    """The workspace-relative paths of ``rels`` that exist under ``root`` (files or folders)."""
    return [rel for rel in rels if os.path.lexists(root / rel)]


@dataclass(frozen=True)
class LockFile:
    path: str  # relative to the repository's .git folder
    age_s: float


def git_lock_files(git: GitStore) -> list[LockFile]:
    """Lock files in the repository that block commits while they exist: the index's, HEAD's and
    the checked-out branch's, and dulwich's per-object locks. A live git holds one for
    milliseconds; the age says whether one was left behind."""
    control = Path(git.repo.controldir())
    candidates = [Path(os.fsdecode(git.repo.index_path()) + ".lock"), control / "HEAD.lock"]
    branch = git.branch()
    if branch:
        candidates.append(control / "refs" / "heads" / f"{branch}.lock")
    objects = Path(os.fspath(getattr(git.repo.object_store, "path", control / "objects")))
    candidates += sorted(objects.glob("[0-9a-f][0-9a-f]/*.lock"))
    now = time.time()
    found: list[LockFile] = []
    for lock in candidates:
        try:
            mtime = lock.stat().st_mtime
        except OSError:
            continue
        try:
            rel = lock.relative_to(control).as_posix()
        except ValueError:
            rel = str(lock)
        found.append(LockFile(rel, max(0.0, now - mtime)))
    return found


def free_bytes(path: Path) -> int | None:
    """Free space for an unprivileged writer on the filesystem holding ``path`` (or its nearest
    existing parent); None when it cannot be read."""
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    try:
        return shutil.disk_usage(current).free
    except OSError:
        return None


def undecodable(root: Path, is_memory: Callable[[str], bool]) -> list[tuple[str, int]]:
    """The Markdown memory files under ``root`` that are not UTF-8, each with the offset of its
    first bad byte; a file that cannot be read is left to the checks that read it."""
    bad: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".git/") or not is_memory(rel) or not path.is_file():
            continue
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append((rel, exc.start))
        except OSError:
            continue
    return bad
