"""Which ``.dream_cursor`` Dream trusts: the one committed in git, not the file as it is.

Dream moves its cursor only in a commit (the batch's content, the new cursor and the state, in
one). Another program writing ``memory/.dream_cursor`` is not Dream consuming history: nanobot's
gateway, started with its own Dream disabled, moves it to the latest entry on every start
(``_advance_dream_cursor_if_behind``), and following that would skip every entry in between.
So the committed value is the truth; a file moved ahead of it is reported and not followed
(unless the user asks for it, ``followExternalCursor``), and a file moved back is followed, since
that only makes entries be dreamt again, never skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CursorState = Literal["ok", "ahead", "behind", "missing", "uncommitted", "unversioned"]

FOLLOW_SETTING = "agents.defaults.dream.followExternalCursor"


@dataclass(frozen=True)
class CursorCheck:
    value: int  # the cursor Dream uses: entries above it are pending
    on_disk: int | None  # memory/.dream_cursor as the file says (None: missing or unreadable)
    committed: int | None  # in HEAD (None: never committed, or no repository)
    state: CursorState
    followed: bool  # the file was ahead and followExternalCursor said to use it
    reason: str  # one sentence for `dream status`, the report and `dream doctor`

    @property
    def trouble(self) -> bool:
        """The file and the committed value disagree (something other than Dream wrote it)."""
        return self.state in ("ahead", "behind", "missing")

    def to_json(self) -> dict[str, object]:
        return {
            "value": self.value,
            "on_disk": self.on_disk,
            "committed": self.committed,
            "state": self.state,
            "followed": self.followed,
            "reason": self.reason,
        }


def judge_cursor(
    on_disk: int | None, committed: int | None, *, versioned: bool, follow_external: bool = False
) -> CursorCheck:
    """The cursor to use, from the file's value and the committed one."""
    if not versioned:
        value = on_disk or 0
        return CursorCheck(
            value, on_disk, None, "unversioned", False, "no repository yet: the cursor file is all there is"
        )
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
