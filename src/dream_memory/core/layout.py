"""Names of the files in a workspace and which of them are versioned (docs/reference/files.md).

Paths here are workspace-relative POSIX strings. Nothing in this module touches the disk.
"""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

SOUL = "SOUL.md"
USER = "USER.md"
MEMORY = "memory/MEMORY.md"
HISTORY = "memory/history.jsonl"
LEGACY_HISTORY = "memory/HISTORY.md"
ARCHIVE_DIR = "memory/archive"
CURSOR = "memory/.cursor"
DREAM_CURSOR = "memory/.dream_cursor"
DREAM_STATE = "memory/.dream_state.json"
DREAM_HELD_DIR = "memory/.dream_held"
DREAM_JOURNAL = "memory/.dream_journal.json"
CONSOLIDATION = "memory/.consolidation.json"
CONSOLIDATION_LOCK = "memory/.consolidation.lock"
HISTORY_LOCK = "memory/.history.lock"
# How the last holder of the history lock left history.jsonl (inode and size): a hint that shows
# a writer without the lock (nanobot) between two holds
HISTORY_LEFT = "memory/.history.left"
# history.jsonl as it was before a rewrite replaced it, under this name plus "." and the byte
# offset the rewrite copied it up to: kept until what other writers appended to it is in the new
# file, so a killed rewrite leaves those lines on disk (adapters/history_log/replaced.py)
HISTORY_REPLACED = "memory/.history.replaced"
DREAM_LOCK = "memory/.dream.lock"
MIGRATION_MARKER = "memory/.migration.json"
PROMPTS_README = "prompts/README.md"
DREAM_GUIDE = "prompts/dream.md"
SKILLS_DIR = "skills"
SESSIONS_DIR = "sessions"
INDEX = "index.md"
ENTITIES_DIR = "entities"
SECTIONS_DIR = "sections"
OBSERVATIONS = "observations.md"
# Private scopes' files: scopes/<name with ":" as "/">/{USER,MEMORY}.md (core.scopes, docs/scopes.md)
SCOPES_DIR = "scopes"
WORKSPACE_CONFIG = "dream.json"
# dream forget's audit record (keyed hashes, never a value) and its journal: local, never committed
FORGOTTEN_RECORD = "memory/.forgotten.json"
FORGET_JOURNAL = "memory/.forget_journal.json"

# What makes a folder a workspace: any of these in it. `dream init` creates all three; nanobot's
# workspaces (which Dream runs on as they are) hold memory/ at least. Every command but init
# refuses a folder with none of them (exit 2), so a mistyped path never becomes a new workspace.
WORKSPACE_MARKERS: tuple[str, ...] = (SOUL, USER, "memory")

# The durable knowledge files every workspace has (created from templates).
DURABLE_FILES: tuple[str, ...] = (SOUL, USER, MEMORY)

# Versioned paths, as glob patterns over workspace-relative paths. `**` matches any depth.
TRACKED_PATTERNS: tuple[str, ...] = (
    SOUL,
    USER,
    MEMORY,
    DREAM_CURSOR,
    DREAM_STATE,
    f"{DREAM_HELD_DIR}/**",
    f"{SKILLS_DIR}/**",
    INDEX,
    f"{ENTITIES_DIR}/**",
    f"{SECTIONS_DIR}/**",
    OBSERVATIONS,
    f"{SCOPES_DIR}/**",
)

# Files Dream itself owns. They are versioned, but they are never "manual edits", never written by
# the model's tools, and never conflict-checked or written by a restore (unless --replay).
DREAM_OWNED_PATTERNS: tuple[str, ...] = (DREAM_CURSOR, DREAM_STATE, f"{DREAM_HELD_DIR}/**")

# Under an enclosing repository, Dream commits also carry these when that repository already
# tracks them, so a scheduled job leaves a clean tree.
CARRIED_PATTERNS: tuple[str, ...] = (HISTORY, CURSOR, f"{ARCHIVE_DIR}/**", CONSOLIDATION)


def _match(path: str, pattern: str) -> bool:
    if pattern.endswith("/**"):
        prefix = pattern[:-3]
        return path.startswith(prefix + "/") and len(path) > len(prefix) + 1
    return fnmatch.fnmatchcase(path, pattern)


def matches_any(path: str, patterns: tuple[str, ...]) -> bool:
    return _plain(path) and any(_match(path, p) for p in patterns)


def _plain(path: str) -> bool:
    """No empty, ``.`` or ``..`` part and no NUL, as in every path of a git tree: `skills/**`
    must not match ``skills/../../x``, which names a file outside the workspace."""
    framed = f"/{path}/"
    return not ("//" in framed or "/./" in framed or "/../" in framed or "\0" in path)


def is_tracked(path: str) -> bool:
    """True for a workspace-relative path that is versioned (docs/reference/files.md)."""
    return matches_any(path, TRACKED_PATTERNS)


def is_dream_owned(path: str) -> bool:
    return matches_any(path, DREAM_OWNED_PATTERNS)


def is_content(path: str) -> bool:
    """A tracked file whose change is a change of memory (not Dream's own bookkeeping)."""
    return is_tracked(path) and not is_dream_owned(path)


def tracked_roots() -> tuple[str, ...]:
    """Top-level names a walk of the workspace must visit to find every tracked file."""
    roots: list[str] = []
    for pattern in TRACKED_PATTERNS:
        top = PurePosixPath(pattern).parts[0]
        if top not in roots:
            roots.append(top)
    return tuple(roots)


def session_file_name(key: str) -> str:
    """The session file name for a key: ':' becomes '_' (nanobot's convention)."""
    return key.replace(":", "_") + ".jsonl"
