"""``dream restore``: undo a commit (or a range of Dream's batches) the way ``git revert`` does.

The plan (which commits, the three-way merge of each file, conflicts by line range) is
``app.restore_plan``'s; this module runs it as one transaction through ``apply_commit``, with the
Dream lock, unsaved hand edits saved first, and the held changes of an undone batch discarded in
the same commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dream_memory.adapters.git import GITIGNORE_BEGIN, CommitInfo, FileChange, GitStore, unified_diff
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.app.held import folder_removal, record_json, same_change, state_of, waiting_changes
from dream_memory.app.restore_plan import (
    Plan,
    Replay,
    batches_in_range,
    commits_to_revert,
    held_claimed_by,
    held_claimed_elsewhere,
    joint_range,
    line_range,
    plan_reverts,
    undone_in_history,
)
from dream_memory.app.versioning import MANUAL_SUBJECT, apply_commit, commit_disk_state, recover, store_errors
from dream_memory.core import layout
from dream_memory.core.state import DreamState
from dream_memory.errors import RestoreConflict, UsageError


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


@store_errors
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
    elif (undone := undone_in_history(git, commits[0].sha).get(commits[0].sha)) is not None:
        # Restored before (or a restore killed after its commit): its lines are already gone,
        # and a second three-way merge of the same undo is a conflict whose --force deleted the
        # lines a person wrote since.
        replayed = f"\n{_REPLAY_FROM}: " in git.info(undone, with_files=False).message
        if replay and not replayed:  # it said "the Dream cursor moved from N to N" and moved nothing
            raise UsageError.naming(
                lambda o: (
                    f"{commits[0].sha[:10]} ({commits[0].subject}) is already undone by {undone[:10]}, without "
                    f"{o('--replay')}; nothing was changed",
                    f"restore {undone[:10]} first (its batch comes back), then `dream restore {commits[0].sha[:10]} "
                    "--replay`",
                )
            )
        how = ", with --replay" if replayed else ""
        commits, skipped = [], [f"{commits[0].sha[:10]} ({commits[0].subject}) is already undone by {undone[:10]}{how}"]
    what = _what(in_range)
    if not commits:
        return RestoreResult(
            restored=in_range[0].sha if len(in_range) == 1 and ".." not in rev else rev_range(in_range),
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
            forcing="take the restore's side in those lines only (every other line merges)",
        )
    span = joint_range(in_range) if replay else None
    if replay and span is None:
        raise UsageError.naming(
            lambda o: (
                f"{what} records no history range (Dream-Range), so {o('--replay')} has nothing to move back",
                None,
            )
        )
    changes = dict(plan.changes)
    replay_plan = Replay.plan(span, dream_cursor, history)
    cursor_after, replay_entries, replay_from_archive = replay_plan.cursor, replay_plan.entries, replay_plan.archived
    notes = [*skipped, *replay_plan.notes]
    if replay_plan.write:
        changes[layout.DREAM_CURSOR] = f"{cursor_after}\n".encode()
    held_notes, discarded = _settle_held(git, commits, changes)
    notes += held_notes
    if not plan.touched and span is None and not held_notes:
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
        saved = commit_disk_state(git, unsaved, message)
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


def _settle_held(
    git: GitStore, commits: list[CommitInfo], changes: dict[str, bytes | None]
) -> tuple[list[str], list[str]]:
    """The held changes a restore takes away (an undone batch's) or brings back (an undone
    restore's), added to ``changes``; a note for each kind, and the ids discarded."""
    notes: list[str] = []
    discarded, kept = _discard_held(git, commits, changes)
    notes += [
        f"kept the held change {held_id} waiting for review: batch {sha[:10]}, which stays, asked for the same change"
        for held_id, sha in kept.items()
    ]
    if discarded:
        notes.append(
            f"discarded the held change(s) {', '.join(discarded)} of the undone batch (`dream review` no longer "
            "lists them; they stay in git history)"
        )
    back, not_back = _bring_back_held(git, commits, changes)
    if back:
        notes.append(
            f"the held change(s) {', '.join(back)} that the undone commit settled wait for review again (dream review)"
        )
    notes += not_back
    return notes, discarded


def _discard_held(
    git: GitStore, commits: list[CommitInfo], changes: dict[str, bytes | None]
) -> tuple[list[str], dict[str, str]]:
    """Add to ``changes`` the removal of every held change the commits made that still waits
    (its folder, and its entry in .dream_state.json); returns their ids, and those the commits
    held that stay because a batch that stays asked for the same change (with that batch). One
    the commits only asked for again stays, without a word, while the batch that held it does."""
    made, asked_again = held_claimed_by(git, commits)
    claimed = list(dict.fromkeys([*made, *asked_again]))
    if not claimed:
        return [], {}
    elsewhere = held_claimed_elsewhere(git, commits, claimed)
    state = state_of(git)
    discarded: list[str] = []
    kept: dict[str, str] = {}
    for held_id in claimed:
        waiting = state.find_change(held_id) is not None or state.find_held(held_id) is not None
        if waiting and held_id in elsewhere:
            if held_id in made:
                kept[held_id] = elsewhere[held_id]
            continue
        if state.find_change(held_id) is not None:
            state = state.without_change(held_id)
        elif state.find_held(held_id) is not None:
            state = state.without_held(held_id)
        else:
            continue  # settled already (accepted, rejected, discarded)
        discarded.append(held_id)
        changes.update(folder_removal(git, f"{layout.DREAM_HELD_DIR}/{held_id}"))
    if discarded:
        changes[layout.DREAM_STATE] = state.to_json().encode()
    return discarded, kept


# The trailer of a restore that moved the cursor back (--replay).
_REPLAY_FROM = "Replay-From"
# Commits that settle held changes: undoing one puts them back to wait for review.
_SETTLING = ("dream: revert", "dream: reject held", "dream: discard held", "dream: apply held")


def _bring_back_held(
    git: GitStore, commits: list[CommitInfo], changes: dict[str, bytes | None]
) -> tuple[list[str], list[str]]:
    """Undoing a restore brings back the held changes it discarded with its batch (their folder
    as the restore's parent had it, and their entry in .dream_state.json), unless settled since;
    returns their ids. Before, the batch's lines came back and the change waiting on them did not.
    Undoing a reject or discard brings its change back the same way (a reject touched no memory
    file, so it could not be undone at all), and undoing an accept too, with the lines it wrote.
    Not a change no batch that stays held or asked for (its batch was undone since), nor one the
    same as a change waiting now (review lists a change once): a note says why, for each."""
    prefix = layout.DREAM_HELD_DIR + "/"
    state = state_of(git)
    waiting = waiting_changes(git, state)
    back: list[str] = []
    not_back: list[str] = []
    for info in commits:
        if not info.subject.startswith(_SETTLING) or info.parent is None:
            continue
        gone = {
            path[len(prefix) :].partition("/")[0]
            for path in git.changed_paths(info.parent, info.sha)
            if path.startswith(prefix) and git.read_at(info.sha, path) is None
        }
        before_data = git.read_at(info.parent, layout.DREAM_STATE)
        before = DreamState.from_json(None if before_data is None else before_data.decode("utf-8", errors="replace"))
        # Undoing a restore brings its batch back too; undoing a reject brings back a change only
        # while the batch that held it (or asked for it again) stays.
        reverts = info.subject.startswith("dream: revert")
        claimed = set(gone) if reverts else set(held_claimed_elsewhere(git, commits, sorted(gone)))
        for held_id in sorted(gone):
            change, batch = before.find_change(held_id), before.find_held(held_id)
            if state.find_change(held_id) or state.find_held(held_id) or git.fs.walk_files(f"{prefix}{held_id}"):
                continue  # waiting again, or a folder of that name exists: never written over
            if held_id not in claimed:
                not_back.append(f"the held change {held_id} stays settled: the batch that held it is undone")
                continue
            same = waiting.get(same_change(record_json(git.read_at(info.parent, f"{prefix}{held_id}/change.json"))))
            if same is not None:
                not_back.append(f"the held change {held_id} stays settled: the same change waits for review as {same}")
                continue
            if change is not None:
                state = state.add_changes((change,))
            elif batch is not None:
                state = state.add_held(batch)
            else:
                continue
            for path in git.changed_paths(info.parent, info.sha):
                if path.startswith(f"{prefix}{held_id}/"):
                    changes[path] = git.read_at(info.parent, path)
            back.append(held_id)
    if back:
        changes[layout.DREAM_STATE] = state.to_json().encode()
    return back, not_back


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
        lines.append(f"{_REPLAY_FROM}: {replay_from}")
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
