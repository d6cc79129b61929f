"""Which workspace paths Dream's tools may read and write.

Only memory content may be touched: the durable files, skills, and the read-side store files,
all markdown. history.jsonl, the cursors, Dream's own state, prompts and anything else are
refused with a message the model can act on (a predecessor's Dream tools could write any file,
history and cursors included). Symlink checks need the filesystem and live in the adapter.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from dream_memory.core import layout, scopes
from dream_memory.errors import ToolDenied

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
_WRITABLE = (
    re.compile(rf"^{re.escape(layout.SOUL)}$"),
    re.compile(rf"^{re.escape(layout.USER)}$"),
    re.compile(rf"^{re.escape(layout.MEMORY)}$"),
    re.compile(rf"^{layout.SKILLS_DIR}/{_NAME}/{_NAME}\.md$"),
    re.compile(rf"^{layout.ENTITIES_DIR}/(?:{_NAME}/)?{_NAME}\.md$"),
    re.compile(rf"^{layout.SECTIONS_DIR}/{_NAME}\.md$"),
    re.compile(rf"^{re.escape(layout.INDEX)}$"),
    re.compile(rf"^{re.escape(layout.OBSERVATIONS)}$"),
    # A private scope's own two files (core.scopes): which scope may touch one is checked apart.
    re.compile(rf"^{layout.SCOPES_DIR}/(?:[^/]+/)+(?:USER|MEMORY)\.md$"),
)

ALLOWED_DESCRIPTION = (
    "SOUL.md, USER.md, memory/MEMORY.md, skills/<name>/SKILL.md (or another .md in that skill's "
    "folder), entities/<name>.md, sections/<name>.md, index.md and observations.md"
)


class ScopeDenied(ToolDenied):
    """A path of another scope than the batch's: its message tells the model where the fact goes
    (core.scopes.write_problem), and the run counts it as a refused cross-scope edit."""


def normalize(raw: object) -> str:
    """A clean workspace-relative POSIX path, or ToolDenied saying what is wrong with it."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolDenied("path must be a non-empty string relative to the workspace, e.g. memory/MEMORY.md")
    text = raw.strip()
    if "\0" in text or any(ord(c) < 32 for c in text):
        raise ToolDenied(f"path {text!r} contains control characters")
    if "\\" in text:
        raise ToolDenied(f"path {text!r} uses backslashes; use forward slashes")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        raise ToolDenied(f"path {text!r} is absolute; give it relative to the workspace, e.g. memory/MEMORY.md")
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if ".." in parts:
        raise ToolDenied(f"path {text!r} leaves the workspace ('..' is not allowed)")
    if not parts:
        raise ToolDenied("path names the workspace itself, not a file")
    return "/".join(parts)


def _is_memory_file(path: str) -> bool:
    return any(p.match(path) for p in _WRITABLE) and (
        not path.startswith(layout.SCOPES_DIR + "/") or scopes.scope_of_path(path) is not None
    )


def check_writable(raw: object, scope: str | None = None) -> str:
    """A path Dream may change. With ``scope`` (the batch's), also one of that scope's files:
    a private batch writes only its own two files, a shared batch none below scopes/; without
    it, any scope's (a held change or review checks only that Dream could have written it)."""
    path = normalize(raw)
    if not _is_memory_file(path):
        raise ToolDenied(f"{path} is not a memory file Dream may change. Allowed: {ALLOWED_DESCRIPTION}.")
    if not layout.is_content(path):  # belt and braces: never a Dream-owned or untracked file
        raise ToolDenied(f"{path} is not a memory file Dream may change")
    if scope is not None and (problem := scopes.write_problem(scope, path)) is not None:
        raise ScopeDenied(problem)
    return path


def check_readable(raw: object, scope: str | None = None) -> str:
    """Reads are confined to the same files as writes: nothing else is Dream's business. With
    ``scope``, only what a batch of that scope may see (the shared files, and its own)."""
    path = normalize(raw)
    if not _is_memory_file(path):
        raise ToolDenied(f"{path} cannot be read by Dream. Readable: {ALLOWED_DESCRIPTION}.")
    if scope is not None and (problem := scopes.read_problem(scope, path)) is not None:
        raise ScopeDenied(problem)
    return path
