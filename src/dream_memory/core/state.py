"""memory/.dream_state.json as a value: failure counts, set-aside ranges, held batches and held
changes (one hunk each, waiting for `dream review`; a state written before them has none).

The state is versioned with the memory it describes: it lands in the same commit as the cursor.
An unreadable state is an error (exit 2), never an empty state: it holds the held batches, which
an empty state written back would lose. Writing is canonical.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from dream_memory.core import jsontext
from dream_memory.core.surrogates import json_dumps_utf8
from dream_memory.errors import WorkspaceUnusable


class StateUnreadable(WorkspaceUnusable):
    """memory/.dream_state.json is not Dream's state: exit 2 until someone restores or deletes it."""


SET_ASIDE_AFTER = 3  # consecutive runs failing a batch with the same start on its content


@dataclass(frozen=True)
class FailureRecord:
    cursor_from: int
    cursor_to: int
    count: int
    last_error: str


@dataclass(frozen=True)
class SetAside:
    cursor_from: int
    cursor_to: int
    reason: str
    at: str


@dataclass(frozen=True)
class HeldBatch:
    id: str
    cursor_from: int
    cursor_to: int
    reason: str
    created: str
    files: tuple[str, ...] = ()

    def to_report(self) -> dict[str, Any]:
        return {"id": self.id, "cursor_from": self.cursor_from, "cursor_to": self.cursor_to, "reason": self.reason}


@dataclass(frozen=True)
class HeldChange:
    """One change the write policy held: its record is memory/.dream_held/<id>/change.json."""

    id: str  # "<cursor_from>-<cursor_to>.<n>"
    path: str
    cursor_from: int
    cursor_to: int
    reason: str
    created: str
    first_line: int = 0  # 1-based range in the text the change started from
    last_line: int = 0

    def to_report(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "lines": [self.first_line, self.last_line],
            "cursor_from": self.cursor_from,
            "cursor_to": self.cursor_to,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class DreamState:
    failure: FailureRecord | None = None
    set_aside: tuple[SetAside, ...] = ()
    held: tuple[HeldBatch, ...] = ()
    changes: tuple[HeldChange, ...] = ()
    # Late entries (core.late_entries) Dream has dreamt, by key: the cursor alone cannot say so.
    late_dreamt: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def record_failure(self, cursor_from: int, cursor_to: int, error: str) -> DreamState:
        """Count one more content failure of the batch ``cursor_from..cursor_to``.

        A batch starting where the last failing one started is the same failure: the work that
        fails is at its front, while its end moves with every entry appended between runs (a
        batch takes all pending entries up to its size) and with --batch-size. So the count goes
        on, and the range it keeps shrinks to the part every one of those runs failed: what is
        set aside at SET_ASIDE_AFTER, never an entry that joined later. Another start is 1 again.
        """
        previous = self.failure
        if previous is not None and previous.cursor_from == cursor_from:
            failed = FailureRecord(cursor_from, min(previous.cursor_to, cursor_to), previous.count + 1, error[:500])
        else:
            failed = FailureRecord(cursor_from, cursor_to, 1, error[:500])
        return replace(self, failure=failed)

    def clear_failure(self) -> DreamState:
        return replace(self, failure=None) if self.failure else self

    def add_set_aside(self, item: SetAside) -> DreamState:
        return replace(self, failure=None, set_aside=(*self.set_aside, item))

    def add_held(self, item: HeldBatch) -> DreamState:
        return replace(self, held=(*self.held, item))

    def without_held(self, held_id: str) -> DreamState:
        return replace(self, held=tuple(h for h in self.held if h.id != held_id))

    def find_held(self, held_id: str) -> HeldBatch | None:
        return next((h for h in self.held if h.id == held_id), None)

    def add_changes(self, items: tuple[HeldChange, ...]) -> DreamState:
        return replace(self, changes=(*self.changes, *items)) if items else self

    def without_change(self, change_id: str) -> DreamState:
        return replace(self, changes=tuple(c for c in self.changes if c.id != change_id))

    def with_late_dreamt(self, keys: tuple[str, ...]) -> DreamState:
        return replace(self, late_dreamt=keys)

    def find_change(self, change_id: str) -> HeldChange | None:
        return next((c for c in self.changes if c.id == change_id), None)

    @property
    def waiting(self) -> int:
        """Held batches and held changes waiting for a person."""
        return len(self.held) + len(self.changes)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "version": 1,
            "failure": asdict(self.failure) if self.failure else None,
            "set_aside": [asdict(s) for s in self.set_aside],
            "held": [{**asdict(h), "files": list(h.files)} for h in self.held],
        }
        if self.changes:  # absent when empty: a state file from before held changes reads the same
            data["changes"] = [asdict(c) for c in self.changes]
        if self.late_dreamt:  # absent when empty, as "changes"
            data["late_dreamt"] = list(self.late_dreamt)
        # A failure or a reason may quote a lone surrogate (core.surrogates): escaped, never lost.
        return json_dumps_utf8(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str | None) -> DreamState:
        if text is None or not text.strip():
            return cls()
        try:
            data = jsontext.loads(text)
            if not isinstance(data, dict):
                raise ValueError("it is not a JSON object")
            failure = data.get("failure")
            return cls(
                failure=_record(FailureRecord, failure, "failure") if failure else None,
                set_aside=tuple(_record(SetAside, s, f"set_aside[{i}]") for i, s in _items(data, "set_aside")),
                held=tuple(_held_batch(h, f"held[{i}]") for i, h in _items(data, "held")),
                changes=tuple(_record(HeldChange, c, f"changes[{i}]") for i, c in _items(data, "changes")),
                late_dreamt=tuple(str(k) for _, k in _items(data, "late_dreamt")),
            )
        except (ValueError, TypeError, AttributeError) as exc:
            # Never read as empty: the state holds the held batches (and the set-aside ranges),
            # and the next write of an empty state would forget them without a word.
            raise StateUnreadable(
                f"memory/.dream_state.json cannot be read ({exc}); nothing was changed",
                hint=(
                    "restore it from git (`git checkout -- memory/.dream_state.json` in the workspace), "
                    "or delete it to start over (its held batches and set-aside ranges are then forgotten)"
                ),
            ) from exc


def _items(data: dict[str, Any], key: str) -> list[tuple[int, Any]]:
    items = data.get(key) or []
    if not isinstance(items, list):
        raise ValueError(f"{key} is not a list")
    return list(enumerate(items))


def _record(kind: Any, item: Any, where: str) -> Any:
    """``kind(**item)``, or a ValueError naming what is wrong with the record at ``where`` (the
    message a person fixing the file by hand reads: not Python's argument errors)."""
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object")
    known = {f.name: f for f in fields(kind)}
    missing = [n for n, f in known.items() if f.default is MISSING and f.default_factory is MISSING and n not in item]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    unknown = sorted(str(name) for name in item if name not in known)
    if unknown:
        raise ValueError(f"{where} has fields no version of dream-memory writes: {', '.join(unknown)}")
    return kind(**item)


def _held_batch(item: Any, where: str) -> HeldBatch:
    files = item.get("files", []) if isinstance(item, dict) else []
    if not isinstance(files, list):
        raise ValueError(f"{where}.files is not a list")
    batch: HeldBatch = _record(HeldBatch, item, where)
    return replace(batch, files=tuple(files))
