"""The git adapter: ``GitStore`` (versioned memory over dulwich) and ``open_readonly``.

The package, along its seams: ``store`` (opening, creating, the ignore blocks), ``base`` (shared
state, damage as ``VersionStoreError``), ``reading`` (commits, trees, log, changes), ``checks``
(refusals before a write), ``worktree`` (files on disk, the index), ``writing`` (commits, stale
locks) and ``branches``. The pure values (``CommitInfo``, ``FileChange``, ``unified_diff``, the
ignore blocks) live in ``core.versions`` and are re-exported here for the callers of the former
single module.
"""

from dream_memory.adapters.git.base import EXEC_MODE, FILE_MODE, HEADS
from dream_memory.adapters.git.store import READ_ONLY_AUTHOR, GitStore, open_readonly
from dream_memory.core.versions import (
    EXCLUDE_BEGIN,
    GITIGNORE_BEGIN,
    GITIGNORE_END,
    RUNTIME_PATTERNS,
    CommitInfo,
    FileChange,
    gitignore_lines,
    merge_block,
    merge_gitignore,
    parse_identity,
    unified_diff,
)

__all__ = [
    "EXCLUDE_BEGIN",
    "EXEC_MODE",
    "FILE_MODE",
    "GITIGNORE_BEGIN",
    "GITIGNORE_END",
    "HEADS",
    "READ_ONLY_AUTHOR",
    "RUNTIME_PATTERNS",
    "CommitInfo",
    "FileChange",
    "GitStore",
    "gitignore_lines",
    "merge_block",
    "merge_gitignore",
    "open_readonly",
    "parse_identity",
    "unified_diff",
]
