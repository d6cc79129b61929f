"""Versioned memory use cases: the first commit, hand edits, transactions, log and restore.

Every change Dream or a restore makes to memory goes through ``apply_commit``: the commit is
built and recorded in a journal *before* any file is written, HEAD moves, then the files are
written. A crash at any step leaves either HEAD at the old commit with untouched files (rolled
back) or HEAD at the new commit with a journal that ``recover`` uses to finish writing the files,
so an interrupted change is never mistaken for a hand edit.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import CommitInfo, FileChange, GitStore
from dream_memory.core import jsontext, layout, scopes
from dream_memory.core.cursor_truth import CURSOR_SUBJECT
from dream_memory.core.history import parse_cursor_text
from dream_memory.errors import VersionStoreError, WorkspaceUnusable

P = ParamSpec("P")
R = TypeVar("R")


def store_errors(func: Callable[P, R]) -> Callable[P, R]:
    """A full disk or a permission problem while committing is a VersionStoreError
    (exit 1, a message, Dream's report) rather than a traceback. Whatever was half done is in
    the journal, which the next command finishes or rolls back."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except OSError as exc:
            if fsutil.os_error(exc, "commit").exit_code != 1:  # permissions, read-only: fix it first
                raise fsutil.os_error(exc, "commit memory to git with", exc.filename) from exc
            where = f" ({exc.filename})" if exc.filename else ""
            raise VersionStoreError(
                f"cannot write memory to git: {fsutil.describe_os_error(exc)}{where}",
                hint="nothing is lost: the next command finishes or undoes the interrupted change",
            ) from exc

    return wrapper


INIT_SUBJECT = "memory: init"
MANUAL_SUBJECT = "memory: manual edits"
NOTHING_NEW_PREFIX = "dream: nothing new"


# --- transactions ---------------------------------------------------------------------------------


def _journal_path(git: GitStore) -> Path:
    return git.workspace / layout.DREAM_JOURNAL


@store_errors
def apply_commit(git: GitStore, changes: dict[str, bytes | None], message: str, *, on_disk: bool = False) -> str | None:
    """Commit ``changes`` (workspace-relative path -> bytes, None deletes), then write them to disk.

    ``on_disk``: the files already hold ``changes`` (hand edits being committed): nothing is
    written, and a crash is finished by bringing the index in step only. Returns the new commit,
    or None when the changes equal HEAD already.
    """
    git.check_paths(changes)
    effective = git.effective_changes(changes)
    if not effective:
        return None
    git.check_filters(effective)
    git.check_ignored(effective)
    if not on_disk:
        git.check_writable(_memory_files(effective))
    from dream_memory.adapters import locks  # socket: only when writing (`dream log` reads)

    journal = _journal_path(git)
    written: list[bool] = []

    def write_journal(sha: str, base: str | None) -> None:
        record = {
            "commit": sha,
            "base": base,
            "paths": sorted(effective),
            "subject": message.partition("\n")[0],
            "on_disk": on_disk,
            **locks.this_process(),
        }
        fsutil.atomic_write(journal, json.dumps(record), site="journal.write")
        written.append(True)

    try:
        # the journal is made durable while the objects are (recovery needs no object to roll
        # back, and both are durable before the ref moves below)
        sha, base = git.build_commit(effective, message, alongside=write_journal)
    except BaseException:
        if written:  # the objects failed: the branch never moved, nothing to recover
            fsutil.remove(journal, site="journal.remove")
        raise
    git.move_head(sha, base, message.partition("\n")[0])
    if not on_disk:
        git.write_files(_memory_files(effective))
    # Recovery takes an index.lock for the killed writer's only when it was made soon after the
    # journal (a later one is a person's git): writing the files onto edits can take seconds.
    fsutil.touch(journal)
    git.sync_index(effective, sha)
    fsutil.remove(journal, site="journal.remove")
    return sha


def _memory_files(changes: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """The part of a commit that is written to disk: never the carried history files.

    history.jsonl, .cursor, the archive and .consolidation.json ride along in a commit as a
    snapshot read from disk, but they belong to the history lock's writers: writing the snapshot
    back (or, on recovery, a snapshot hours old) would erase every append made since.
    """
    return {rel: data for rel, data in changes.items() if not layout.matches_any(rel, layout.CARRIED_PATTERNS)}


def commit_disk_state(git: GitStore, paths: Iterable[str], message: str) -> str | None:
    """Commit files as they are on disk (missing ones as deletions), through the journal."""
    paths = list(paths)
    _refuse_private_under_another_name(git, paths)
    changes: dict[str, bytes | None] = {rel: git.read_file(rel) for rel in paths}
    return apply_commit(git, changes, message, on_disk=True)


def _refuse_private_under_another_name(git: GitStore, paths: list[str]) -> None:
    """Exit 2 before committing a file that is a hard link to a private file of another scope:
    its commit would copy that person's memory where every reader of ``rel``'s scope reads it
    (the read side refuses such a link; committed, it was served from history by search, why
    and blame). A hard link is the only way: a symlink is never followed (beyond a link is not
    in the workspace)."""
    linked = git.linked_files(paths)
    if not linked:
        return
    private: dict[tuple[int, int], list[str]] = {}
    others = [
        p for p in git.worktree_paths([scopes.SCOPES_DIR]) if scopes.scope_of_path(p) not in (None, scopes.SHARED)
    ]
    for path, ident in git.linked_files(others).items():
        private.setdefault(ident, []).append(path)
    for rel, ident in sorted(linked.items()):
        for other in private.get(ident, []):
            owner = scopes.scope_of_path(other)
            if owner == scopes.scope_of_path(rel):
                continue  # two names within one scope share nothing new
            raise WorkspaceUnusable(
                f"{rel} is the same file as {other} (a hard link): committing it would copy "
                f"{owner}'s private memory into {rel}; nothing was committed",
                hint=f"remove the link (`rm {rel}`), or copy into {rel} only what is meant to be shared",
            )


@dataclass(frozen=True)
class Recovery:
    action: str  # "finished" | "rolled_back" | "abandoned"
    commit: str
    subject: str
    notes: tuple[str, ...] = ()  # files edited since the crash: merged onto, or left as edited


@store_errors
def recover(git: GitStore) -> Recovery | None:
    """Finish or roll back a change a crash interrupted (see the module docstring).

    None when there is nothing to recover, or when the change is still being made by a live
    process.
    """
    # Objects are written before the journal: a kill among them leaves only their locks.
    git.clear_stale_object_locks()
    journal = _journal_path(git)
    text = fsutil.read_text(journal)
    if text is None:
        return None
    try:
        data = jsontext.loads(text)
        sha, base, paths = str(data["commit"]), data.get("base"), [str(p) for p in data["paths"]]
        subject = str(data.get("subject", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        fsutil.remove(journal, site="journal.remove")
        return Recovery("abandoned", "", "unreadable journal")
    from dream_memory.adapters import locks

    if locks.writer_alive(data.get("pid"), data.get("host"), journal):
        return None
    # index.lock or a ref lock left by the killed writer would block this and every later commit
    removed = git.clear_stale_locks(since=fsutil.mtime(journal))
    head = git.head()
    notes: tuple[str, ...] = tuple(f"removed .git/{lock}, which the interrupted change left" for lock in removed)
    if head == sha:
        # The journal is a plain file in the workspace: its paths are taken only where the
        # commit itself changed them, so a tampered journal can name nothing else to write.
        paths = _journal_paths(git, sha, paths)
        if not data.get("on_disk"):
            files = git.entries_at(sha, paths)
            contents = {rel: git.blob(files[rel][1]) if rel in files else None for rel in paths}
            notes += _finish_writing(git, sha, _memory_files(contents))
        git.sync_index(paths, sha)
        action = "finished"
    elif head == base:
        action = "rolled_back"
    else:
        action = "abandoned"
    fsutil.remove(journal, site="journal.remove")
    return Recovery(action, sha, subject, notes)


def _journal_paths(git: GitStore, sha: str, paths: list[str]) -> list[str]:
    changed = set(git.changed_paths(git.info(sha, with_files=False).parent, sha))
    return [p for p in paths if p in changed]


def _finish_writing(git: GitStore, sha: str, contents: dict[str, bytes | None]) -> tuple[str, ...]:
    """Write the interrupted commit's files, never over an edit made since the crash.

    Until the crash, each file held its parent's version or, once written, the commit's own;
    anything else is someone's edit (`dream status` showed it as unsaved), and the commit's
    change is merged onto it or, when they collide, the edit is left as it is (app.onto_edits).
    Dream's own bookkeeping is written as committed: the committed cursor and state are the
    truth (core.cursor_truth), and a line merge of a number or of JSON means nothing."""
    from dream_memory.app.onto_edits import writing_onto_edits  # the merge code, only when recovering

    parent = git.info(sha, with_files=False).parent
    people = [rel for rel in contents if not layout.is_dream_owned(rel)]
    bases = {rel: git.read_at(parent, rel) if parent is not None else None for rel in people}
    with writing_onto_edits(git, bases) as onto:
        git.write_files(contents)
    return tuple(onto.notes("after the change was interrupted", sha))


# --- first commit and hand edits ----------------------------------------------------------------


@store_errors
def ensure_versioned(git: GitStore) -> str | None:
    """Make the ``memory: init`` commit when this workspace has nothing committed yet."""
    recover(git)
    git.ensure_gitignore()
    git.ensure_exclude()
    present = git.worktree_paths()
    head_files = git.files_at(git.head())
    if any(git.is_versioned(p) for p in head_files):
        return None
    if not present:
        return None
    if _cursor_file_ready(git):
        present = sorted({*present, layout.DREAM_CURSOR})
    return commit_disk_state(git, present, INIT_SUBJECT + "\n\nFiles: " + ", ".join(present))


def _cursor_file_ready(git: GitStore) -> bool:
    """memory/.dream_cursor holds a cursor, ready to be committed as Dream's: the file's value when
    it has one, else 0, written here. Until a commit of ours records it, a nanobot gateway start
    moves the file to the end of history and every entry before it would be skipped."""
    if not git.is_versioned(layout.DREAM_CURSOR):
        return False
    data = git.read_file(layout.DREAM_CURSOR)
    if data is None or parse_cursor_text(data.decode("utf-8", errors="replace")) is None:
        fsutil.atomic_write(git.workspace / layout.DREAM_CURSOR, "0\n", site="dream_cursor.write")
    return True


@store_errors
def record_dream_cursor(git: GitStore) -> str | None:
    """Commit memory/.dream_cursor as Dream's when HEAD holds memory but no readable cursor: a
    repository made before this workspace's first commit of ours (nanobot's own, whose first
    commit has an empty cursor file; an enclosing one), or a ``memory: init`` of an older
    version. Only ``dream init`` asks: a run records the cursor in its first batch anyway."""
    head = git.head()
    if head is None:
        return None
    data = git.read_at(head, layout.DREAM_CURSOR)
    if data is not None and parse_cursor_text(data.decode("utf-8", errors="replace")) is not None:
        return None
    if not _cursor_file_ready(git):
        return None
    return commit_disk_state(
        git,
        [layout.DREAM_CURSOR],
        f"{CURSOR_SUBJECT}\n\nThe cursor Dream goes on from, recorded before anything else moves the file.",
    )


@store_errors
def commit_manual_edits(git: GitStore, notes: list[str] | None = None) -> str | None:
    """Commit hand edits of memory files as their own commit, so Dream's commits hold only Dream's
    changes. Dream's own bookkeeping files are not hand edits and are left for Dream's commit.
    ``notes`` receives a line for each file committed as removed because a symbolic link now
    stands on its way (a folder moved elsewhere and linked back): never a silent removal."""
    initial = ensure_versioned(git)
    # A file an editor only rewrote with other line ends is committed too: riding in Dream's
    # commit, the rewrite made every line of it Dream's for the write policy.
    dirty = [p for p in git.dirty() if not layout.is_dream_owned(p)]
    if not dirty:
        return initial
    if notes is not None:
        for rel in dirty:
            link = git.symlink_on_the_way(rel)
            if link is not None:
                notes.append(
                    f"{rel} is committed as removed: {link} is a symbolic link, and dream-memory versions "
                    "only what lies in the workspace itself, as git does (its last version stays in "
                    "the git history)"
                )
    body = "\n".join(f"- {p}" for p in dirty)
    return commit_disk_state(git, dirty, f"{MANUAL_SUBJECT}\n\nEdited outside Dream:\n{body}")


# --- log -------------------------------------------------------------------------------------------


def is_dream_subject(subject: str) -> bool:
    return subject.startswith("dream:")


def dream_versions(git: GitStore, *, limit: int = 20, include_nothing_new: bool = False) -> list[CommitInfo]:
    """Recent Dream commits (newest first), each with its changed files."""
    found: list[CommitInfo] = []
    if git.head() is None:
        return found
    for commit in git.first_parent_chain():
        subject = commit.message.decode("utf-8", errors="replace").split("\n", 1)[0]
        if not is_dream_subject(subject):
            continue
        if subject.startswith(NOTHING_NEW_PREFIX) and not include_nothing_new:
            continue
        found.append(git.info(commit.id.decode("ascii")))
        if len(found) >= limit:
            break
    return found


def latest_dream_change(git: GitStore) -> CommitInfo | None:
    versions = dream_versions(git, limit=1)
    return versions[0] if versions else None


@dataclass(frozen=True)
class Comparison:
    old: CommitInfo
    new: CommitInfo
    commits: tuple[CommitInfo, ...]
    files: tuple[FileChange, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.old.to_json(with_diff=False),
            "to": self.new.to_json(with_diff=False),
            "commits": [c.to_json(with_diff=False) for c in self.commits],
            "files": [f.to_json() for f in self.files],
        }


def compare(git: GitStore, old_rev: str, new_rev: str) -> Comparison:
    old = git.resolve(old_rev)
    new = git.resolve(new_rev)
    between: list[CommitInfo] = []
    for commit in git.first_parent_chain(new):
        sha = commit.id.decode("ascii")
        if sha == old:
            break
        between.append(git.info(sha, with_files=False))
    else:
        between = []  # A is not behind B: there is no list of commits from A to B, only the diff
    return Comparison(
        old=git.info(old, with_files=False),
        new=git.info(new, with_files=False),
        commits=tuple(between),
        files=tuple(git.changes(old, new)),
    )
