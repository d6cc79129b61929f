"""The deletion guard's window: what Dream's recent batches removed from a file, from git history.

A guard that looks at one batch at a time lets a model remove a few lines per batch until
little is left (a probe removed 31 of 40 facts over 5 batches, none held). So each batch is also
weighed together with Dream's last ``window`` batches, in this run and in earlier runs alike:
they are the ``dream: <from>..<to>`` commits (and held, set-aside and nothing-new batches, which
change no content) on the first-parent chain of HEAD. Git history is the record because it is
what was committed; nothing extra has to be kept in the state.

The walk stops at a ``dream: apply held`` commit: a person looked at the file and accepted what
it holds, so the window starts again from there. Hand edits and restores are not Dream's
removals and never count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from dream_memory.adapters.git import GitStore
from dream_memory.core.guards import RecentRemovals, window_removals

_BATCH_SUBJECT = re.compile(r"dream: (?:\d+\.\.\d+: |nothing new in |held |set aside )")
_CONTENT_SUBJECT = re.compile(r"dream: \d+\.\.\d+: ")
_APPLIED_HELD = "dream: apply held"
# Bound on the commits walked to find the window: in an enclosing repository most commits are
# someone else's.
_MAX_EXAMINED = 2000


def _blob(git: GitStore, sha: str, rel: str) -> bytes | None:
    entry = git.entries_at(sha, [rel]).get(rel)
    return None if entry is None else entry[1]


def _text(git: GitStore, blob: bytes | None) -> str | None:
    return None if blob is None else git.blob(blob).decode("utf-8", errors="replace")


def recent_removals(
    git: GitStore,
    paths: Iterable[str],
    window: int,
    *,
    is_template: Callable[[str, str | None], bool],
) -> dict[str, RecentRemovals]:
    """path -> what Dream's last ``window`` batches removed from it (only paths some batch changed)."""
    wanted = list(paths)
    if window <= 0 or not wanted or git.head() is None:
        return {}
    content: list[tuple[str, str]] = []  # (commit, parent) of the content batches in the window
    batches = 0
    for examined, commit in enumerate(git.first_parent_chain()):
        if examined >= _MAX_EXAMINED or batches >= window:
            break
        subject = commit.message.decode("utf-8", errors="replace").partition("\n")[0]
        if subject.startswith(_APPLIED_HELD):
            break
        if not _BATCH_SUBJECT.match(subject):
            continue
        batches += 1
        if _CONTENT_SUBJECT.match(subject) and commit.parents:
            content.append((commit.id.decode("ascii"), commit.parents[0].decode("ascii")))
    found: dict[str, RecentRemovals] = {}
    for rel in wanted:
        versions = []
        for sha, parent in content:
            before, after = _blob(git, parent, rel), _blob(git, sha, rel)
            if before != after:
                versions.append((_text(git, before), _text(git, after)))
        if versions:
            found[rel] = window_removals(rel, versions, is_template=is_template)
    return found
