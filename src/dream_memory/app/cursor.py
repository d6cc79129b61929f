"""The ``.dream_cursor`` Dream trusts (core/cursor_truth.py): read the file and the commits that
set the committed one, judge.

One function, called once per Dream run (app/dream.py), by ``dream status`` and ``dream doctor``,
so every reader agrees on which entries are still pending.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core import layout
from dream_memory.core.cursor_truth import CursorCheck, ForeignMove, cursor_commit, judge_cursor
from dream_memory.core.history import parse_cursor_text

CommitObject = Any  # dulwich's Commit, as GitStore.first_parent_chain yields it (only adapters/git imports dulwich)

# Bound on the commits walked back to the last one of ours that set the cursor: in an enclosing
# repository most commits are someone else's. Past it, HEAD's value is taken, as it was before
# Dream's own commits were told apart.
_MAX_EXAMINED = 2000
_SUBJECT_CHARS = 72


@dataclass(frozen=True)
class CommittedCursor:
    head: int | None  # HEAD's memory/.dream_cursor (None: none, or unreadable)
    own: int | None  # what the newest commit of ours that set it holds (None: no such commit found)
    since: tuple[ForeignMove, ...] = ()  # commits not of ours that changed it after that, oldest first


@dataclass(frozen=True)
class _Seen:
    sha: str
    subject: str
    blob: bytes | None
    kind: str


def committed_cursor(git: GitStore) -> CommittedCursor:
    """HEAD's cursor, and who set it: back along the commits that carried it (first parents, or the
    merged side a merge took it from) to the newest commit of ours that set it (HEAD itself after
    every Dream batch: one look), noting every other commit that changed it on the way."""
    head = git.head()
    if head is None:
        return CommittedCursor(None, None)
    values: dict[bytes, int | None] = {}

    def value(blob: bytes | None) -> int | None:
        if blob is None:
            return None
        if blob not in values:
            values[blob] = parse_cursor_text(git.blob(blob).decode("utf-8", errors="replace"))
        return values[blob]

    seen: list[_Seen] = []  # newest first, up to (not including) the commit of ours
    anchor: _Seen | None = None
    for examined, (commit, blob) in enumerate(_carriers(git, head)):
        sha = commit.id.decode("ascii")
        if seen and seen[-1].kind == "reverts" and seen[-1].blob != blob:
            anchor = seen.pop()  # a restore of ours that moved the cursor (--replay) set it
            break
        if examined >= _MAX_EXAMINED:
            break
        message = commit.message.decode("utf-8", errors="replace")
        subject = message.partition("\n")[0].strip()
        seen.append(_Seen(sha, subject, blob, cursor_commit(message)))
        if seen[-1].kind == "sets":
            anchor = seen.pop()
            break
    head_value = value(seen[0].blob if seen else anchor.blob if anchor else None)
    own = None if anchor is None else value(anchor.blob)
    if own is None:
        return CommittedCursor(head_value, None)
    assert anchor is not None
    moves: list[ForeignMove] = []
    for newer, older in zip(seen, [*seen[1:], anchor], strict=False):  # seen is one shorter
        moved_to = value(newer.blob)
        if newer.blob != older.blob and moved_to is not None:
            moves.append(ForeignMove(moved_to, f"{newer.sha[:10]} ({_short(newer.subject)})"))
    return CommittedCursor(head_value, own, tuple(reversed(moves)))


def head_cursor(git: GitStore) -> int | None:
    """HEAD's committed memory/.dream_cursor, as it is now (None: no commit, no file, unreadable)."""
    head = git.head()
    data = None if head is None else git.read_at(head, layout.DREAM_CURSOR)
    return None if data is None else parse_cursor_text(data.decode("utf-8", errors="replace"))


def moved_back(git: GitStore, seen: int | None) -> str | None:
    """Why a batch must not land: HEAD's committed cursor went back below ``seen`` (what the run
    read at its start, or its last batch committed) while the batch ran: a `git reset --hard`, a
    checkout of an older branch. A commit on top would carry the batch's cursor and skip, for
    good, the entries between the two."""
    now = head_cursor(git)
    if seen is None or now is None or now >= seen:
        return None
    return (
        f"the repository's committed Dream cursor went back from {seen} to {now} while the batch ran (a git "
        "reset or checkout?): landing the batch would skip the entries between; nothing of it was committed, "
        f"and the next run dreams from cursor {now}"
    )


def _cursor_blob(git: GitStore, sha: str) -> bytes | None:
    entry = git.entries_at(sha, [layout.DREAM_CURSOR]).get(layout.DREAM_CURSOR)
    return None if entry is None else entry[1]


def _carriers(git: GitStore, head: str) -> Iterator[tuple[CommitObject, bytes | None]]:
    """The commits that carried HEAD's cursor, newest first, with their cursor blob: back along
    first parents, except through a merge that took the cursor from another parent (a reviewer
    merging Dream's pull request with a merge commit), where the walk goes on down that parent,
    to the Dream commits that set the value, instead of calling the merge a move."""
    start: str | None = head
    while start is not None:
        tip, start = start, None
        for commit in git.first_parent_chain(tip):
            blob = _cursor_blob(git, commit.id.decode("ascii"))
            yield commit, blob
            if len(commit.parents) < 2 or _cursor_blob(git, commit.parents[0].decode("ascii")) == blob:
                continue
            taken = [p.decode("ascii") for p in commit.parents[1:] if _cursor_blob(git, p.decode("ascii")) == blob]
            if taken:
                start = taken[0]
                break


def _short(subject: str) -> str:
    return subject if len(subject) <= _SUBJECT_CHARS else subject[: _SUBJECT_CHARS - 3] + "..."


def dream_cursor_check(history: HistoryLog, git: GitStore | None, *, follow_external: bool = False) -> CursorCheck:
    """Which cursor Dream uses, and why (see core/cursor_truth.py)."""
    on_disk = history.read_dream_cursor()
    if git is None:
        return judge_cursor(on_disk, None, versioned=False)
    found = committed_cursor(git)
    return judge_cursor(
        on_disk, found.head, versioned=True, follow_external=follow_external, own=found.own, since=found.since
    )
