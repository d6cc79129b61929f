"""The one rule for paths that come from someone else: git trees, held records, the commit
journal, index.md rows, section names, branch names.

Every door that writes, deletes or serves a workspace file asks this module first (the adapters
then open the file without following a symlink out of the root: ``adapters.rooted``). A path is
*safe* when it names a file below the root and nothing else:

- relative: no leading ``/``, no ``~``, no drive letter, no backslash;
- every component is a real name: not empty, not ``.``, not ``..``;
- no NUL, no control character (C0, DEL, C1), no undecodable byte (a lone surrogate);
- no ``.git`` component, compared the way the filesystems that fold names compare it:
  case-insensitively, with the trailing dots and spaces and the ``git~1`` short name NTFS
  accepts, and with the invisible code points HFS+ ignores. A write there is a hook: code
  execution on the next checkout.

Pure: no filesystem, no environment. Reasons are short phrases a message can quote.
"""

from __future__ import annotations

import re
import stat

from dream_memory.core import layout

_DRIVE = re.compile(r"^[A-Za-z]:")
# Code points HFS+ drops when it compares names (git's is_hfs_dotgit ignores the same ones).
_HFS_IGNORED = frozenset(
    [chr(c) for c in range(0x200C, 0x2010)]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x206A, 0x2070)]
    + ["\ufeff"]
)


def is_control(char: str) -> bool:
    """C0 controls, DEL and C1 controls: what a terminal may act on."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0


def is_dotgit(component: str) -> bool:
    """True for a name that a case-folding filesystem takes for ``.git`` (or its NTFS short name)."""
    bare = "".join(c for c in component if c not in _HFS_IGNORED).casefold()
    bare = bare.split(":", 1)[0].rstrip(" .")  # NTFS: ".git::$INDEX_ALLOCATION", ".git. ", ".git "
    return bare in (".git", "git~1")


def component_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of a path below the root (None when it can)."""
    if name == "":
        return "an empty name"
    if name in (".", ".."):
        return f"a {name!r} component"
    if "/" in name or "\\" in name:
        return "a name holding a slash"
    if "\0" in name:
        return "a NUL byte"
    if any(is_control(c) for c in name):
        return "a control character"
    if any("\ud800" <= c <= "\udfff" for c in name):
        return "bytes that are not UTF-8"
    if is_dotgit(name):
        return "a .git component"
    return None


def entry_name_problem(name: bytes) -> str | None:
    """Why a git tree entry called ``name`` must not reach a file operation (None when it may).

    The structural part of the rule, checked for every entry of every tree read below the
    workspace, whatever path it leads to: these are the names ``git fsck`` calls errors, and the
    ones that would take a write out of the workspace or into ``.git``.
    """
    if name in (b"", b".", b".."):
        return "an empty name" if not name else f"a {name.decode()!r} component"
    if b"/" in name:
        return "a name holding a slash"
    if b"\0" in name:
        return "a NUL byte"
    if is_dotgit(name.decode("utf-8", errors="replace")):
        return "a .git component"
    return None


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a safe root-relative POSIX path (None when it is)."""
    if not isinstance(path, str) or path == "":
        return "an empty path"
    if path.startswith(("/", "~")) or _DRIVE.match(path):
        return "an absolute path"
    if "\\" in path:
        return "a backslash"
    for part in path.split("/"):
        problem = component_problem(part)
        if problem is not None:
            return problem
    return None


def describe(path: str) -> str:
    """``path`` quoted for a message: escapes shown, never acted on by a terminal."""
    return ascii(path) if any(is_control(c) or "\ud800" <= c <= "\udfff" for c in path) else repr(path)


_GITLINK = 0o160000  # a submodule's entry in a git tree


def kind_of_mode(mode: int) -> str | None:
    """What a file mode (an ``lstat``'s or a git tree entry's) names when it is not a regular
    file, for a message ("a named pipe"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if mode & 0o170000 == _GITLINK:
        return "a submodule"
    kinds = (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def memory_write_problem(path: str, *, gitignore: bool = False) -> str | None:
    """Why ``path`` may not be written or deleted by a commit of memory (None when it may).

    Safe, and a versioned memory path (docs/reference/files.md) or a carried history file; with
    ``gitignore``, the workspace's own ``.gitignore`` too (a repository dream-memory made).
    """
    problem = path_problem(path)
    if problem is not None:
        return problem
    if gitignore and path == ".gitignore":
        return None
    if layout.is_tracked(path) or layout.matches_any(path, layout.CARRIED_PATTERNS):
        return None
    return "not a memory file"


# --- what the read side serves -----------------------------------------------------------------

_RAW_FOLDERS = (layout.SESSIONS_DIR + "/", "memory/")


def serve_problem(path: str, *, markdown: bool = True) -> str | None:
    """Why the read side must not serve ``path`` (None when it may).

    Safe, markdown (unless ``markdown`` is off: where an in-store symlink leads), no hidden
    component (``.git``, ``.ssh``, Dream's ``memory/.dream_held``), and not raw material:
    history, archives, cursors and session transcripts stay private; ``memory/MEMORY.md`` is
    the one file of ``memory/`` that is served.
    """
    problem = path_problem(path)
    if problem is not None:
        return problem
    parts = path.split("/")
    if any(p.startswith(".") for p in parts):
        return "a hidden file or folder"
    if path != layout.MEMORY and path.startswith(_RAW_FOLDERS):
        return "raw history or Dream's own files"
    if markdown and not path.casefold().endswith(".md"):
        return "not a markdown file"
    return None


# --- branch names ------------------------------------------------------------------------------

_REF_BAD_CHARS = frozenset(" ~^:?*[\\")


def branch_name_problem(name: str) -> str | None:  # noqa: C901 -- one check per rule of git check-ref-format, in git's order, each naming the rule broken
    """Why ``name`` is not a branch name ``git check-ref-format --branch`` accepts (None when it is).

    git's rules for a ref component, plus the branch ones: not ``HEAD``, not starting with
    ``-``. ``@``-expressions (``@``, ``@{-1}``), which git expands, are refused here: a scheduled
    job names its branch.
    """
    if not name:
        return "an empty name"
    if name == "HEAD":
        return "HEAD, which names the current commit, not a branch"
    if name.startswith("-"):
        return "a name starting with '-'"
    if name == "@" or "@{" in name:
        return "an @-expression"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a control character"
    if any(c in _REF_BAD_CHARS for c in name):
        return "one of the characters space ~ ^ : ? * [ \\"
    if ".." in name:
        return "'..'"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "an empty component (a leading, trailing or doubled '/')"
    if name.endswith("."):
        return "a name ending with '.'"
    for part in name.split("/"):
        if part.startswith("."):
            return "a component starting with '.'"
        if part.endswith(".lock"):
            return "a component ending with '.lock'"
    return None
