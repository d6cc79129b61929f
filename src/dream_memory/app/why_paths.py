"""The working file beside what ``dream why`` and ``dream blame`` read from git: which memory
file a path names (relative to the workspace, absolute, or relative to the current folder), and
whether the file on disk still matches its committed lines."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.workspace import is_symlink, locate, read_files
from dream_memory.core import layout
from dream_memory.core.paths import kind_of_mode
from dream_memory.errors import NotFound, Refused, UsageError

_NOT_FOLLOWED = "dream why and dream blame read committed regular files only, never through a symlink"


def check_path(path: str, root: Path | None = None) -> str:
    rel = path.strip().lstrip("./") if path.startswith("./") else path.strip()
    if "\0" in rel:  # only MCP can send one; resolving it would raise ValueError
        raise UsageError(f"{path!r} is not a memory file", hint="a path holds no NUL character")
    if root is not None and not layout.is_content(rel):
        # An absolute path, or one relative to the current folder (`ws/USER.md` from the
        # workspace's parent), names a memory file when it lands inside the workspace.
        inside, outside = locate(root, path.strip())
        if inside is not None:
            rel = inside
        elif outside:
            raise UsageError.naming(
                lambda o: (
                    f"{path} is outside the workspace {root}",
                    "give a memory file of this workspace (relative to it, e.g. USER.md)"
                    + (f", or pick the workspace with {o('--workspace')}" if o("--workspace") else ""),
                )
            )
    if not layout.is_content(rel):
        raise UsageError(
            f"{path} is not a memory file",
            hint="give a path relative to the workspace, e.g. USER.md, memory/MEMORY.md or entities/x.md",
        )
    return rel


def split_target(target: str) -> tuple[str, int] | None:
    """``PATH:LINE`` as its two parts, or None when it is not one. The line is ASCII digits only:
    ``str.isdigit`` also accepts "²" or "①", which ``int`` then refuses."""
    path, _, number = target.rpartition(":")
    number = number.strip()
    if not path or not number.isascii() or not number.isdigit():
        return None
    return path, int(number)


def check_committed(store: GitStore, root: Path, rel: str, rev: str) -> None:
    """A file on disk that HEAD does not hold yet: say so (not "not a file in commit X"). A path
    committed or lying on disk as something other than a regular file (a symlink, which git
    keeps as its target's path) is refused as what it is: no dream run would commit it as a file."""
    sha = store.head() if rev == "HEAD" else store.resolve(rev)
    mode = store.mode_at(sha, rel) if sha is not None else None
    what = kind_of_mode(mode) if mode is not None else None
    if what is not None and sha is not None:
        raise Refused(f"{rel} is {what} in commit {sha[:10]}, not a regular file; {_NOT_FOLLOWED}")
    if rev != "HEAD":
        return
    if is_symlink(root, rel):
        raise Refused(f"{rel} is a symlink, not a regular file; {_NOT_FOLLOWED}")
    if rel not in store.files_at(sha) and read_files(root, [rel])[rel] is not None:
        raise NotFound(
            f"{rel} is not committed yet: the next dream run commits it",
            hint="run `dream run` (or commit it yourself); then its lines have an origin",
        )


def disk_lines(root: Path, rel: str) -> list[str] | None:
    """The file's lines on disk, split as git splits them; None when it is missing or unreadable."""
    try:
        data = read_files(root, [rel])[rel]
        text = data.decode("utf-8") if data is not None else None
    except (OSError, UnicodeDecodeError):
        return None
    if text is None:
        return None
    parts = text.split("\n")
    return parts[:-1] if parts and parts[-1] == "" else parts


def unsaved(rel: str) -> str:
    return f"{rel} has uncommitted edits on disk; lines are numbered as committed (the next dream run commits them)"
