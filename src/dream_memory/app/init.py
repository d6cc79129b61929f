"""``init``: create a workspace's missing template files and start versioning it (idempotent).

The first commit happens under the Dream lock, like every other commit: a run in progress owns
the journal, and its first step makes this same commit anyway. So a held lock is not an error:
the report says the commit was left to that run (``deferred``), on every face.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dream_memory.errors import LockBusy, WorkspaceError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime

DEFERRED_NOTE = "a Dream run holds the workspace; it commits the workspace itself"


@dataclass(frozen=True)
class InitReport:
    workspace: str
    created: list[str]
    repository: str
    enclosing_repository: bool
    # the "memory: init" commit, or the "memory: dream cursor" one in a repository that had memory
    # but no cursor; None when there was nothing to commit, or deferred
    commit: str | None
    deferred: bool = False  # a Dream run held the lock: that run commits the workspace
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "created": self.created,
            "repository": self.repository,
            "enclosing_repository": self.enclosing_repository,
            "commit": self.commit,
            "notes": self.notes,
        }


def init_workspace(rt: Runtime, *, guide_notes: bool = True) -> InitReport:
    """``guide_notes``: also prompts/README.md, which says how to steer Dream (eval's scenario
    workspaces go without)."""
    from dream_memory.app.history import refuse_while_a_purge_is_unfinished
    from dream_memory.app.versioning import ensure_versioned, record_dream_cursor

    # Before the templates too: a refusal that says "commits nothing" writes nothing either
    # (commit_lock checks again under the lock).
    with contextlib.suppress(WorkspaceError):
        # A workspace too broken to read the journal in is named by create_workspace below.
        refuse_while_a_purge_is_unfinished(rt.root, "dream init")
    created = rt.create_workspace(guide_notes=guide_notes)
    git = rt.git(create=True)
    assert git is not None  # create=True always gives a store
    notes: list[str] = []
    if git.own_because is not None:
        notes.append(
            f"the repository above ignores this folder ({git.own_because}): its memory is versioned in a "
            "repository of its own, which that repository never sees"
        )
    with git:
        try:
            with rt.commit_lock("dream init"):
                commit = ensure_versioned(git) or record_dream_cursor(git)
        except LockBusy:
            rt.log(DEFERRED_NOTE)
            notes.append(DEFERRED_NOTE)
            commit = None
        return InitReport(
            workspace=str(rt.root),
            created=created,
            repository=str(git.root),
            enclosing_repository=git.enclosing,
            commit=commit,
            deferred=commit is None and DEFERRED_NOTE in notes,
            notes=notes,
        )
