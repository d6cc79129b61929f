"""What a restore does to each file, decided before anything is written (``app.versioning``
runs it): the inverse of the commit merged into the file as it is now, as ``git revert`` does,
and where ``--replay`` moves the Dream cursor."""

from __future__ import annotations

from dataclasses import dataclass

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.merge import merge_texts


@dataclass(frozen=True)
class Revert:
    """What undoing one commit does to one file it touched."""

    data: bytes | None  # the file's content after the restore (None: no file)
    conflict: tuple[tuple[int, int], ...] | None = None  # None: clean; (): the whole file
    why: str = ""  # for a whole-file conflict: what happened to the file since
    merged: bool = False  # the file changed since the commit, and the restore kept (some of) that work

    def describe(self, rel: str) -> str:
        if self.conflict is None:
            return rel
        if not self.conflict:
            return f"{rel} ({self.why})"
        return f"{rel} " + ", ".join(line_range(r) for r in self.conflict)


def line_range(span: tuple[int, int]) -> str:
    first, last = span
    if last < first:
        return f"before line {first}"
    return f"line {first}" if first == last else f"lines {first}-{last}"


def revert_file(before: bytes | None, after: bytes | None, now: bytes | None, *, force: bool) -> Revert:
    """The inverse of the change before -> after, merged into the file as it is now (``git
    revert``): base = after, theirs = before, ours = now (None: no file)."""
    if now == after:
        return Revert(before)
    if now is None:
        # Gone since (now == after is the case above): by hand, or beyond a symlinked folder,
        # which is not the workspace. Which it is cannot be told here, so it is a conflict.
        return Revert(before, (), "deleted since")
    try:
        texts = [(b or b"").decode("utf-8") for b in (after, now, before)]
    except UnicodeDecodeError:
        return Revert(before if force else now, (), "not text, changed since")
    result = merge_texts(*texts, prefer="theirs" if force else "none")
    data: bytes | None = result.text.encode("utf-8")
    if before is None and not result.text:
        data = None  # it created the file, and nothing but its lines is left in it
    if not result.conflicts:
        return Revert(data, merged=data != before)
    if after is None and before is not None:
        return Revert(data if force else now, (), "a different file is there now")
    return Revert(data if force else now, result.conflicts, merged=force and data != before)


@dataclass(frozen=True)
class Replay:
    """Where ``--replay`` moves the Dream cursor, and what the next run then reads."""

    cursor: int | None
    write: bool = False  # the cursor file changes in the revert commit
    entries: int | None = None
    archived: int | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def plan(cls, span: tuple[int, int] | None, dream_cursor: int | None, history: HistoryLog | None) -> Replay:
        if span is None:
            return cls(dream_cursor)
        notes: list[str] = []
        cursor, write = span[0] - 1, True
        if dream_cursor is not None and dream_cursor <= cursor:
            notes.append(f"the Dream cursor is already at {dream_cursor}, before that range")
            cursor, write = dream_cursor, False
        if history is None:
            return cls(cursor, write, notes=tuple(notes))
        # What the next run reads: everything after the new cursor, the commit's range first.
        scan = history.scan(report=False)
        in_file = set(scan.entries)
        wanted = history.entries_after(cursor or 0, scan)
        if not any(span[0] <= e.cursor <= span[1] for e in wanted):
            notes.append(f"no entry of {span[0]}..{span[1]} is left in history.jsonl or memory/archive/")
        return cls(cursor, write, len(wanted), sum(1 for e in wanted if e not in in_file), tuple(notes))
