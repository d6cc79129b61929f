"""``log``, ``restore`` (list versions, or undo one commit) and the held batches: the services.

Each opens git itself (never creating a repository), takes the Dream lock where it commits, and
returns a typed report. A restore always gets the history log, so its replay counts are filled
on every face.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dream_memory.errors import ConfigError, InputError, UsageError
from dream_memory.settings import defaults

if TYPE_CHECKING:
    from dream_memory.adapters.git import CommitInfo, GitStore
    from dream_memory.app.reverting import RestoreResult
    from dream_memory.app.runtime import Runtime
    from dream_memory.app.versioning import Comparison


# --- log -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRequest:
    rev: str | None = None  # a commit, or "A..B" (either side may be empty: HEAD)


@dataclass(frozen=True)
class LogReport:
    kind: Literal["none", "commit", "comparison"]
    commit: CommitInfo | None = None
    comparison: Comparison | None = None
    shallow: bool = False  # the clone is shallow: older versions are not in it
    versions: bool = False  # the workspace has a repository with at least one commit

    @property
    def value(self) -> CommitInfo | Comparison | None:
        return self.comparison if self.kind == "comparison" else self.commit

    def to_json(self) -> dict[str, Any] | None:
        value = self.value
        return None if value is None else value.to_json()


def log(rt: Runtime, request: LogRequest) -> LogReport:
    return log_of(rt.git(create=False) if rt.has_workspace() else None, request)


def log_read_only(workspace: str | None, config_path: str | None, request: LogRequest) -> LogReport:
    """``dream log``: the workspace's repository opened read-only with no settings loaded.
    Reading versions needs no setting but the workspace, so the config file is neither parsed
    nor validated (pydantic alone was a third of the command's start-up, issue 21); one named
    explicitly (``--config``, ``DREAM_CONFIG``) must still exist, as for every command."""
    from dream_memory.adapters.git import open_readonly
    from dream_memory.adapters.workspace import is_file, require_workspace
    from dream_memory.settings.precedence import environment, resolve_config_path, resolve_workspace

    env = environment(None)
    root = resolve_workspace(workspace, env)
    path, explicit = resolve_config_path(config_path, root, env)
    if explicit and path is not None and not is_file(path):
        raise ConfigError(f"config file {path} does not exist")
    require_workspace(root)
    return log_of(open_readonly(root), request)


def log_of(git: GitStore | None, request: LogRequest) -> LogReport:
    """``log`` on a repository already opened (``dream log`` opens it read-only, with no
    settings loaded: nothing in a config file changes what it shows). Closes it."""
    from dream_memory.app.versioning import compare, latest_dream_change
    from dream_memory.core.versions import split_range

    if git is None:
        return LogReport("none")
    with git:
        if git.head() is None:
            return LogReport("none")
        rev = request.rev
        if rev is not None and (span := split_range(rev)) is not None:
            old, new = span
            return LogReport("comparison", comparison=compare(git, old or "HEAD", new or "HEAD"), versions=True)
        info = git.info(git.resolve(rev)) if rev is not None else latest_dream_change(git)
        return LogReport("none" if info is None else "commit", commit=info, shallow=git.is_shallow, versions=True)


# --- restore: the list of versions -----------------------------------------------------------------


@dataclass(frozen=True)
class VersionsRequest:
    limit: int = defaults.RESTORE_LIST_LIMIT


@dataclass(frozen=True)
class VersionList:
    versions: list[CommitInfo] = field(default_factory=list)
    shallow: bool = False  # fewer than asked for because the clone is shallow

    def to_json(self) -> list[dict[str, Any]]:
        return [v.to_json(with_diff=False) for v in self.versions]


def versions(rt: Runtime, request: VersionsRequest) -> VersionList:
    from dream_memory.app.versioning import dream_versions

    if not 1 <= request.limit <= defaults.RESTORE_LIST_LIMIT_MAX:
        raise InputError(f"the versions limit must be 1..{defaults.RESTORE_LIST_LIMIT_MAX} (got {request.limit})")
    git = rt.git(create=False) if rt.has_workspace() else None
    if git is None:
        return VersionList()
    with git:
        found = dream_versions(git, limit=request.limit)
        return VersionList(found, shallow=git.is_shallow and len(found) < request.limit)


# --- restore: one commit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreRequest:
    rev: str  # a commit, or "A..B" (B empty: HEAD): every commit after A up to B, newest first
    force: bool = False
    replay: bool = False


def restore(rt: Runtime, request: RestoreRequest) -> RestoreResult:
    from dream_memory.app.cursor import dream_cursor_check
    from dream_memory.app.reverting import restore_commit

    with rt.commit_lock("dream restore"), _open_under_lock(rt, f"no memory versions in {rt.root} to restore") as git:
        # The cursor Dream trusts, as status and run see it, not the file (a gateway moves it).
        trusted = dream_cursor_check(rt.history, git, follow_external=rt.settings.dream.follow_external_cursor)
        return restore_commit(
            git,
            request.rev,
            force=request.force,
            replay=request.replay,
            dream_cursor=trusted.value,
            history=rt.history,
        )


@contextlib.contextmanager
def _open_under_lock(rt: Runtime, missing: str) -> Iterator[GitStore]:
    """The repository, for a command that holds the Dream lock, opened once it holds it: one
    opened before kept the pack files of that moment, which a `dream forget` holding the lock
    meanwhile replaced (the next read raised dulwich's PackFileDisappeared)."""
    git = rt.git(create=False) if rt.has_workspace() else None
    if git is None or git.head() is None:
        if git is not None:
            git.close()
        raise UsageError(missing)
    with git:
        yield git


# --- held batches ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettleRequest:
    held_id: str
    action: Literal["apply", "discard"]
    force: bool = False  # apply over later work in the batch's files


@dataclass(frozen=True)
class HeldReport:
    action: Literal["apply", "discard"]
    held_id: str
    commit: str | None
    message: str
    files: list[str] = field(default_factory=list)
    forced_over: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        if self.action == "discard":
            return {"discarded": self.held_id, "commit": self.commit, "message": self.message}
        return {
            "applied": self.held_id,
            "commit": self.commit,
            "files": self.files,
            "forced_over": self.forced_over,
            "message": self.message,
        }


def settle_held(rt: Runtime, request: SettleRequest) -> HeldReport:
    from dream_memory.app.held import apply_held_batch, discard_held_batch

    command = f"dream restore --{request.action}-held"
    with rt.commit_lock(command), _open_under_lock(rt, f"no memory versions in {rt.root}") as git:
        if request.action == "apply":
            done = apply_held_batch(git, request.held_id, force=request.force)
        else:
            done = discard_held_batch(git, request.held_id)
    return HeldReport(
        action=request.action,
        held_id=request.held_id,
        commit=done["commit"],
        message=done["message"],
        files=list(done.get("files", [])),
        forced_over=list(done.get("forced_over", [])),
    )
