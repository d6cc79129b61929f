"""Which ``.dream_cursor`` Dream trusts: the one its own commits set, not the file as it is.

Dream moves its cursor only in a commit (the batch's content, the new cursor and the state, in
one). Another program writing ``memory/.dream_cursor`` is not Dream consuming history: nanobot's
gateway, started with its own Dream disabled, moves it to the latest entry on every start
(``_advance_dream_cursor_if_behind``), and following that would skip every entry in between.
A commit is no better a witness when someone else made it: nanobot's ``/dream-restore`` and a
person's ``git commit -a`` both record whatever the file held, gateway move included. So the
value Dream's own commits set is the truth; a move ahead of it, in the file or in someone else's
commit, is reported and not followed (unless the user asks for it, ``followExternalCursor``),
and a move back is followed, since that only makes entries be dreamt again, never skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

CursorState = Literal["ok", "ahead", "behind", "missing", "uncommitted", "unversioned"]

FOLLOW_SETTING = "agents.defaults.dream.followExternalCursor"

# The subjects and trailers of the commits dream-memory writes the cursor in (app/dream/landing.py,
# app/reverting.py, app/versioning.py). A subject alone is not enough: nanobot's own Dream commits
# as "dream: periodic memory consolidation" and "dream: manual run", without a Dream-Range.
_DREAM_RANGE = re.compile(r"^Dream-Range: \d+\.\.\d+[ \t]*$", re.MULTILINE)
_REVERTS = re.compile(r"^Reverts: [0-9a-f]{40}\b", re.MULTILINE)
CURSOR_SUBJECT = "memory: dream cursor"  # `dream init` recording the cursor in a repository made before
_RECORDING_SUBJECTS = ("memory: init", CURSOR_SUBJECT)

# "sets": the commit writes the cursor Dream trusts, changed or not (a batch of late entries
# rewrites the same value); "reverts": ours, and it set the cursor only if it changed it (a
# restore without --replay carries its parent's value, whoever committed that).
CursorCommit = Literal["sets", "reverts", "other"]


def cursor_commit(message: str) -> CursorCommit:
    """Whether a commit message is one of those dream-memory records its cursor in."""
    subject = message.partition("\n")[0].strip()
    if subject in _RECORDING_SUBJECTS:
        return "sets"
    if subject.startswith("dream: revert") and _REVERTS.search(message):
        return "reverts"
    if subject.startswith("dream: ") and _DREAM_RANGE.search(message):
        return "sets"
    return "other"


@dataclass(frozen=True)
class ForeignMove:
    """A commit not of ours that changed the committed cursor (to ``value``)."""

    value: int
    commit: str  # "<short sha> (<subject>)", for the reason


@dataclass(frozen=True)
class CursorCheck:
    value: int  # the cursor Dream uses: entries above it are pending
    on_disk: int | None  # memory/.dream_cursor as the file says (None: missing or unreadable)
    committed: int | None  # the committed value Dream trusts (None: never committed, or no repository)
    state: CursorState
    followed: bool  # a value moved ahead was used, as followExternalCursor said
    reason: str  # one sentence for `dream status`, the report and `dream doctor`
    head: int | None = None  # HEAD's copy (it differs from `committed` after a commit not of ours)
    moved_by: str | None = None  # the commit not of ours that moved the committed cursor, if any

    @property
    def trouble(self) -> bool:
        """The file or a commit not of ours disagrees with Dream's own cursor."""
        return self.state in ("ahead", "behind", "missing")

    def to_json(self) -> dict[str, object]:
        return {
            "value": self.value,
            "on_disk": self.on_disk,
            "committed": self.committed,
            "state": self.state,
            "followed": self.followed,
            "reason": self.reason,
            "head": self.head,
            "moved_by": self.moved_by,
        }


def trusted_committed(own: int, since: Sequence[ForeignMove]) -> int:
    """The value Dream's own commit set, lowered by every later commit not of ours that moved it
    back (oldest first in ``since``); a move ahead is never taken, so the entries it jumped stay
    pending even after later commits go on from there."""
    value = own
    for move in since:
        value = min(value, move.value)
    return value


def judge_cursor(
    on_disk: int | None,
    committed: int | None,
    *,
    versioned: bool,
    follow_external: bool = False,
    own: int | None = None,
    since: Sequence[ForeignMove] = (),
) -> CursorCheck:
    """The cursor to use, from the file's value and HEAD's (``committed``).

    ``own``: the value the newest commit of ours that set the cursor holds, and ``since`` the
    commits not of ours that changed it after that one, oldest first. Without ``own`` (no commit
    of ours set it, or no repository) HEAD's value is taken as Dream's."""
    if not versioned:
        value = on_disk or 0
        return CursorCheck(
            value, on_disk, None, "unversioned", False, "no repository yet: the cursor file is all there is"
        )
    if own is None:
        return replace(_against(on_disk, committed, follow_external), head=committed)
    trusted = trusted_committed(own, since)
    check = _against(on_disk, trusted, follow_external)
    if not since:
        return replace(check, head=committed)
    mover = since[-1].commit
    if committed is not None and committed > trusted and check.state not in ("behind", "missing"):
        return _committed_ahead(on_disk, trusted, committed, mover, follow_external)
    check = replace(check, head=committed, moved_by=mover)
    if check.state == "ok" and trusted < own:
        lowest = min(since, key=lambda move: move.value).commit
        return replace(
            check,
            moved_by=lowest,
            reason=f"the committed cursor was moved back from {own} to {trusted} by commit {lowest}, which is "
            f"not one of Dream's; followed: entries {trusted + 1}..{own} are dreamt again",
        )
    return check


def _committed_ahead(on_disk: int | None, trusted: int, head: int, mover: str, follow_external: bool) -> CursorCheck:
    """HEAD holds a cursor ahead of Dream's, set by ``mover``, a commit not of ours."""
    outside = on_disk if on_disk is not None and on_disk > trusted else head
    file_says = "" if on_disk == head else f" (the file says {on_disk})"
    moved = (
        f"the committed memory/.dream_cursor was moved from {trusted} to {head} by commit {mover}, which is not "
        f"one of Dream's{file_says} (a commit made after a nanobot gateway start moved the file records that move)"
    )
    if follow_external:
        return CursorCheck(
            outside, on_disk, trusted, "ahead", True, f"{moved}; followed, as {FOLLOW_SETTING} asks", head, mover
        )
    return CursorCheck(
        trusted,
        on_disk,
        trusted,
        "ahead",
        False,
        f"{moved}; not followed: entries {trusted + 1}..{outside} are still dreamt "
        f"(set {FOLLOW_SETTING} to follow such moves)",
        head,
        mover,
    )


def _against(on_disk: int | None, committed: int | None, follow_external: bool) -> CursorCheck:
    """The file against the committed value Dream trusts."""
    if committed is None:
        return CursorCheck(
            on_disk or 0,
            on_disk,
            None,
            "uncommitted",
            False,
            "memory/.dream_cursor is not committed yet: the file is used, and Dream's next commit records it",
        )
    if on_disk is None:
        return CursorCheck(
            committed,
            None,
            committed,
            "missing",
            False,
            f"memory/.dream_cursor is missing or unreadable: the committed value {committed} is used",
        )
    if on_disk == committed:
        return CursorCheck(committed, on_disk, committed, "ok", False, "the cursor file matches the committed one")
    if on_disk > committed:
        moved = (
            f"memory/.dream_cursor was moved from {committed} to {on_disk} outside a Dream commit "
            "(a nanobot gateway started with its own Dream disabled does this)"
        )
        if follow_external:
            return CursorCheck(
                on_disk, on_disk, committed, "ahead", True, f"{moved}; followed, as {FOLLOW_SETTING} asks"
            )
        return CursorCheck(
            committed,
            on_disk,
            committed,
            "ahead",
            False,
            f"{moved}; not followed: entries {committed + 1}..{on_disk} are still dreamt "
            f"(set {FOLLOW_SETTING} to follow such moves)",
        )
    return CursorCheck(
        on_disk,
        on_disk,
        committed,
        "behind",
        False,
        f"memory/.dream_cursor was moved back from {committed} to {on_disk} outside a Dream commit; followed: "
        f"entries {on_disk + 1}..{committed} are dreamt again",
    )
