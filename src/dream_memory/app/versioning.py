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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from dream_memory.adapters import fsutil, locks
from dream_memory.adapters.git import GITIGNORE_BEGIN, CommitInfo, FileChange, GitStore, unified_diff
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.app.restore_plan import (
    Plan,
    Replay,
    batches_in_range,
    commits_to_revert,
    held_made_by,
    joint_range,
    line_range,
    plan_reverts,
)
from dream_memory.core import jsontext, layout
from dream_memory.core.state import DreamState
from dream_memory.errors import RestoreConflict, UsageError, VersionStoreError

P = ParamSpec("P")
R = TypeVar("R")


def _store_errors(func: Callable[P, R]) -> Callable[P, R]:
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


@_store_errors
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
    if not on_disk:
        git.check_writable(_memory_files(effective))
    sha, base = git.build_commit(effective, message)
    journal = _journal_path(git)
    record = {
        "commit": sha,
        "base": base,
        "paths": sorted(effective),
        "subject": message.partition("\n")[0],
        "on_disk": on_disk,
        **locks.this_process(),
    }
    fsutil.atomic_write(journal, json.dumps(record), site="journal.write")
    git.move_head(sha, base, message.partition("\n")[0])
    if not on_disk:
        git.write_files(_memory_files(effective))
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


def _commit_disk_state(git: GitStore, paths: Iterable[str], message: str) -> str | None:
    """Commit files as they are on disk (missing ones as deletions), through the journal."""
    changes: dict[str, bytes | None] = {rel: git.read_file(rel) for rel in paths}
    return apply_commit(git, changes, message, on_disk=True)


@dataclass(frozen=True)
class Recovery:
    action: str  # "finished" | "rolled_back" | "abandoned"
    commit: str
    subject: str


@_store_errors
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
    if locks.writer_alive(data.get("pid"), data.get("host"), journal):
        return None
    # index.lock or a ref lock left by the killed writer would block this and every later commit
    git.clear_stale_locks(since=fsutil.mtime(journal))
    head = git.head()
    if head == sha:
        # The journal is a plain file in the workspace: its paths are taken only where the
        # commit itself changed them, so a tampered journal can name nothing else to write.
        paths = _journal_paths(git, sha, paths)
        if not data.get("on_disk"):
            files = git.entries_at(sha, paths)
            contents = {rel: git.blob(files[rel][1]) if rel in files else None for rel in paths}
            git.write_files(_memory_files(contents))
        git.sync_index(paths, sha)
        action = "finished"
    elif head == base:
        action = "rolled_back"
    else:
        action = "abandoned"
    fsutil.remove(journal, site="journal.remove")
    return Recovery(action, sha, subject)


def _journal_paths(git: GitStore, sha: str, paths: list[str]) -> list[str]:
    changed = set(git.changed_paths(git.info(sha, with_files=False).parent, sha))
    return [p for p in paths if p in changed]


# --- first commit and hand edits ----------------------------------------------------------------


@_store_errors
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
    return _commit_disk_state(git, present, INIT_SUBJECT + "\n\nFiles: " + ", ".join(present))


@_store_errors
def commit_manual_edits(git: GitStore) -> str | None:
    """Commit hand edits of memory files as their own commit, so Dream's commits hold only Dream's
    changes. Dream's own bookkeeping files are not hand edits and are left for Dream's commit."""
    initial = ensure_versioned(git)
    dirty = [p for p in git.dirty() if not layout.is_dream_owned(p) and not _line_endings_only(git, p)]
    if not dirty:
        return initial
    body = "\n".join(f"- {p}" for p in dirty)
    return _commit_disk_state(git, dirty, f"{MANUAL_SUBJECT}\n\nEdited outside Dream:\n{body}")


def _line_endings_only(git: GitStore, rel: str) -> bool:
    """The file differs from HEAD only in CRLF against LF line ends (rewritten by an editor or an
    agent on another platform): no hand edit of its content, so no `memory: manual edits`."""
    head = git.head()
    if head is None:
        return False
    on_disk = git.read_file(rel)  # as the commit would take it: never through a symlink
    if on_disk is None:
        return False
    committed = git.read_at(head, rel)
    if committed is None:
        return False
    return committed.replace(b"\r\n", b"\n") == on_disk.replace(b"\r\n", b"\n")


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


# --- restore ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreResult:
    restored: str  # the commit whose changes were undone
    commit: str | None  # the new revert commit
    files: tuple[FileChange, ...]
    forced_over: tuple[str, ...] = ()  # files where --force took the restore's side over later work
    cursor_before: int | None = None
    cursor_after: int | None = None
    notes: tuple[str, ...] = field(default=())
    saved_edits: str | None = None  # the commit keeping uncommitted work made before the restore
    replay_entries: int | None = None  # entries after the moved cursor: what the next run reads (--replay)
    replay_from_archive: int | None = None  # of which memory/archive/ holds
    # --force: per file, the 1-based line ranges (in the file before the restore) where it took
    # the restore's side; an empty list: the whole file (deleted since, or not text)
    forced_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    merged: tuple[str, ...] = ()  # files changed since the commit whose later work the restore kept
    reverted: tuple[str, ...] = ()  # the commits undone, newest first (one, or those of A..B)
    discarded_held: tuple[str, ...] = ()  # the held changes of the undone batches, discarded with them

    def forced_places(self) -> list[str]:
        """``USER.md lines 5-6`` for each file --force wrote over (``(the whole file)``)."""
        return [
            f"{rel} " + (", ".join(line_range(r) for r in self.forced_lines.get(rel, [])) or "(the whole file)")
            for rel in self.forced_over
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "restored": self.restored,
            "commit": self.commit,
            "files": [f.to_json() for f in self.files],
            "forced_over": list(self.forced_over),
            "forced_lines": {rel: [list(r) for r in ranges] for rel, ranges in self.forced_lines.items()},
            "merged": list(self.merged),
            "reverted": list(self.reverted),
            "discarded_held": list(self.discarded_held),
            "saved_edits": self.saved_edits,
            "cursor_before": self.cursor_before,
            "cursor_after": self.cursor_after,
            "replay_entries": self.replay_entries,
            "replay_from_archive": self.replay_from_archive,
            "notes": list(self.notes),
        }


@_store_errors
def restore_commit(
    git: GitStore,
    rev: str,
    *,
    force: bool = False,
    replay: bool = False,
    dream_cursor: int | None = None,
    history: HistoryLog | None = None,
) -> RestoreResult:
    """Undo exactly the changes commit ``rev`` introduced, as ``git revert`` does (``A..B``:
    each commit after A up to B, newest first, in one commit), docs/versioning.md.

    Only the memory files those commits touched are written: each gets a three-way merge of the
    inverse change into its content now, so later work on other lines stays. Where the same
    lines changed since, the restore is a conflict that names the file and the lines: nothing
    changes unless ``force``, which takes the restore's side for those lines only; uncommitted
    work in the files is first committed as ``memory: manual edits``, so what a restore writes
    over stays in git history. ``.dream_cursor`` and ``.dream_state.json`` are neither checked
    nor written, except that ``replay`` moves the cursor back to just before the commits'
    ``Dream-Range``; ``history`` (optional) lets the result say how many entries the next run
    re-reads, and from where.
    """
    git.check_can_commit()  # a merge in progress, a detached HEAD of our own repository: exit 2 first
    in_range = commits = commits_to_revert(git, rev)
    for info in commits:
        _refuse_root(info)
    recover(git)
    skipped: list[str] = []
    if ".." in rev:
        commits, passed = batches_in_range(git, in_range)
        skipped = [f"skipped {info.sha[:10]} ({info.subject}): {why}" for info, why in passed]
    what = _what(in_range)
    if not commits:
        return RestoreResult(
            restored=rev_range(in_range),
            commit=None,
            files=(),
            cursor_before=dream_cursor,
            cursor_after=dream_cursor,
            notes=(*skipped, f"{what} holds no Dream batch left to undo; nothing was changed"),
        )
    plan = plan_reverts(git, commits, force=force)
    if plan.conflicts and not force:
        raise RestoreConflict(
            f"cannot restore {what}: {_conflict_listing(plan, commits)}; nothing was changed",
            sorted({rel for _, rel, _ in plan.conflicts}),
            hint="re-run with --force to take the restore's side in those lines only (every other line merges)",
        )
    span = joint_range(in_range) if replay else None
    if replay and span is None:
        raise UsageError(f"{what} records no history range (Dream-Range), so --replay has nothing to move back")
    changes = dict(plan.changes)
    replay_plan = Replay.plan(span, dream_cursor, history)
    cursor_after, replay_entries, replay_from_archive = replay_plan.cursor, replay_plan.entries, replay_plan.archived
    notes = [*skipped, *replay_plan.notes]
    if replay_plan.write:
        changes[layout.DREAM_CURSOR] = f"{cursor_after}\n".encode()
    discarded = _discard_held(git, commits, changes)
    if discarded:
        notes.append(
            f"discarded the held change(s) {', '.join(discarded)} of the undone batch (`dream review` no longer "
            "lists them; they stay in git history)"
        )
    if not plan.touched and span is None and not discarded:
        raise UsageError(f"{what} ({commits[0].subject}) changed no memory file; there is nothing to restore")
    _refuse_losing_gitignore_block(commits[0], changes)
    forced_lines = plan.forced_lines()
    merged = tuple(sorted(plan.merged))
    # Hand edits of the files about to be written are committed first, as Dream does before its
    # own commits: that keeps what a --force writes over in git history, and in every case it
    # makes HEAD match the disk, so the revert commit is exactly what gets written.
    saved: str | None = None
    unsaved = git.dirty(only=plan.touched)
    if unsaved:
        listing = "\n".join(f"- {p}" for p in unsaved)
        message = f"{MANUAL_SUBJECT}\n\nEdited outside Dream, committed before a restore of {what}:\n{listing}"
        saved = _commit_disk_state(git, unsaved, message)
    restored = commits[0].sha if len(commits) == 1 else rev_range(in_range)
    reverted = tuple(c.sha for c in commits)
    if not git.effective_changes(changes):
        notes.append("its changes are already undone: every file it touched holds no line of it")
        return RestoreResult(
            restored=restored,
            commit=None,
            files=(),
            forced_over=(),  # nothing was overwritten
            cursor_before=dream_cursor,
            cursor_after=dream_cursor,
            notes=tuple(notes),
            saved_edits=saved,
            replay_entries=replay_entries,
            replay_from_archive=replay_from_archive,
            reverted=reverted,
        )
    files = tuple(
        unified_diff(rel, current, data)
        for rel, data in sorted(changes.items())
        if (current := _current(git, rel)) != data
    )
    message = _revert_message(commits, plan, merged, cursor_after if span else None)
    message += "".join(f"\nDiscarded-Held: {held_id}" for held_id in discarded)
    new = apply_commit(git, changes, message)
    return RestoreResult(
        restored=restored,
        commit=new,
        files=files,
        forced_over=tuple(sorted(forced_lines)),
        cursor_before=dream_cursor,
        cursor_after=cursor_after,
        notes=tuple(notes),
        saved_edits=saved,
        replay_entries=replay_entries,
        replay_from_archive=replay_from_archive,
        forced_lines=forced_lines,
        merged=merged,
        reverted=reverted,
        discarded_held=tuple(discarded),
    )


def _discard_held(git: GitStore, commits: list[CommitInfo], changes: dict[str, bytes | None]) -> list[str]:
    """Add to ``changes`` the removal of every held change the commits made that still waits
    (its folder, and its entry in .dream_state.json); returns their ids."""
    made = held_made_by(git, commits)
    if not made:
        return []
    data = git.read_file(layout.DREAM_STATE)
    state = DreamState.from_json(None if data is None else data.decode("utf-8", errors="replace"))
    discarded: list[str] = []
    for held_id in made:
        if state.find_change(held_id) is not None:
            state = state.without_change(held_id)
        elif state.find_held(held_id) is not None:
            state = state.without_held(held_id)
        else:
            continue  # settled already (accepted, rejected, discarded)
        discarded.append(held_id)
        changes.update(dict.fromkeys(git.fs.walk_files(f"{layout.DREAM_HELD_DIR}/{held_id}")))
    if discarded:
        changes[layout.DREAM_STATE] = state.to_json().encode()
    return discarded


def rev_range(commits: list[CommitInfo]) -> str:
    """``<parent of the oldest>..<newest>``: the range as git names it."""
    return f"{commits[-1].parent}..{commits[0].sha}"


def _what(commits: list[CommitInfo]) -> str:
    if len(commits) == 1:
        return commits[0].sha[:10]
    return f"{(commits[-1].parent or '')[:10]}..{commits[0].sha[:10]} ({len(commits)} commits)"


def _conflict_listing(plan: Plan, commits: list[CommitInfo]) -> str:
    if len(commits) == 1:
        places = "; ".join(revert.describe(rel) for _, rel, revert in sorted(plan.conflicts, key=lambda c: c[1]))
        return f"{places} changed since that commit"
    # Line numbers are those of the file as the newer reverts of the range left it.
    return "; ".join(
        f"reverting {info.sha[:10]} ({info.subject}): {revert.describe(rel)} changed since"
        for info, rel, revert in plan.conflicts
    )


def _revert_message(commits: list[CommitInfo], plan: Plan, merged: tuple[str, ...], replay_from: int | None) -> str:
    shas = [c.sha for c in commits]
    if len(commits) == 1:
        subject = f"dream: revert {shas[0][:10]} ({commits[0].subject})"
        lines = [f"This reverts commit {shas[0]}."]
    else:
        subject = f"dream: revert {_what(commits)}"
        lines = ["This reverts commits " + ", ".join(shas) + " (newest first)."]
    if merged:
        lines.append("Later changes to " + ", ".join(merged) + " are kept.")
    lines += ["", *(f"Reverts: {sha}" for sha in shas)]
    if plan.conflicts:
        lines.append("Forced-Over: " + "; ".join(r.describe(rel) for _, rel, r in plan.conflicts))
    if replay_from is not None:
        lines.append(f"Replay-From: {replay_from}")
    return subject + "\n\n" + "\n".join(lines)


def _refuse_root(info: CommitInfo) -> None:
    """The first commit (``memory: init``) has nothing before it: undoing it would delete SOUL.md,
    USER.md, memory/MEMORY.md and the .gitignore block. nanobot refuses a root commit too."""
    if info.parent is None:
        raise UsageError(
            f"{info.sha[:10]} ({info.subject}) is the repository's first commit: there is no earlier state to "
            "restore, and undoing it would delete the memory files; nothing was changed",
            hint="restore a later commit, or edit the files by hand (the next dream run commits the edits)",
        )


def _refuse_losing_gitignore_block(info: CommitInfo, changes: dict[str, bytes | None]) -> None:
    """The .gitignore block keeps runtime files (history, locks, sessions) out of git; a restore
    that would delete it, or the file, is refused before anything is written."""
    if ".gitignore" not in changes:
        return
    new = changes[".gitignore"]
    if new is None or GITIGNORE_BEGIN.encode() not in new:
        raise UsageError(
            f"restoring {info.sha[:10]} ({info.subject}) would delete the dream-memory block of .gitignore, "
            "after which runtime files show up as untracked; nothing was changed",
            hint="restore a later commit, or edit the files by hand",
        )


def _current(git: GitStore, rel: str) -> bytes | None:
    return git.read_file(rel)
