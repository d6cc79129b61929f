"""Entries that arrived after Dream passed their cursor, as values. No I/O here.

Dream's cursor says "every entry up to N is dreamt", which holds only while history.jsonl grows
in cursor order. Two things break that order, and each used to lose an entry without a word:

- a writer without our lock (nanobot's ``MemoryStore``) reads the last cursor, is stopped by the
  scheduler, and writes its line later, under a cursor another writer or a Dream run has passed
  meanwhile (measured with nanobot itself: ``tests/beside_nanobot/test_late_entries_beside_nanobot.py``);
- two entries share a cursor, and a batch ends between them (a batch size, a scope change, a
  failed or stopped batch): the cursor moves to the shared value with the second one undreamt.

Both leave the same trace: the entry comes after a line holding the same or a higher cursor. Such
an entry is *late*. Dream records in its state (``DreamState.late_dreamt``, committed with the
cursor) each late entry it has dreamt, by ``entry_key``; a late entry at or below the cursor
that is not recorded is still to be dreamt. A late entry's trace is the lines before it, so
compaction keeps every line from the lowest such cursor up (``compaction_horizon``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Sequence

from dream_memory.core.history import HistoryEntry


def entry_key(entry: HistoryEntry) -> str:
    """A short, stable identity of one entry (its cursor, time, session and text): what the
    state records, never the text itself."""
    data = json.dumps([entry.cursor, entry.timestamp, entry.session_key, entry.content], ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def late_entries(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    """The entries (in file order) written after one with the same or a higher cursor."""
    late: list[HistoryEntry] = []
    highest: int | None = None
    for entry in entries:
        if highest is not None and entry.cursor <= highest:
            late.append(entry)
        else:
            highest = entry.cursor
    return late


def missed(entries: Sequence[HistoryEntry], dream_cursor: int, dreamt: Collection[str]) -> list[HistoryEntry]:
    """Late entries at or below ``dream_cursor`` that Dream has not dreamt (``dreamt``: the keys
    the state records): the ones the cursor alone would skip."""
    return [e for e in late_entries(entries) if e.cursor <= dream_cursor and entry_key(e) not in dreamt]


def compaction_horizon(entries: Sequence[HistoryEntry], dream_cursor: int, dreamt: Collection[str]) -> int:
    """The cursor compaction may archive up to: ``dream_cursor``, or just below the lowest missed
    entry, so that neither it nor the lines that show it late leave history.jsonl undreamt."""
    lowest = min((e.cursor for e in missed(entries, dream_cursor, dreamt)), default=None)
    return dream_cursor if lowest is None else min(dream_cursor, lowest - 1)


def late_keys(entries: Sequence[HistoryEntry]) -> frozenset[str]:
    """The keys of the late entries among ``entries`` (file order)."""
    return frozenset(entry_key(e) for e in late_entries(entries))


def late_among(entries: Iterable[HistoryEntry], present: Collection[str]) -> frozenset[str]:
    """The keys of those of ``entries`` (as written, not redacted) that are late in history.jsonl
    (``present``: ``late_keys`` of it)."""
    return frozenset(entry_key(e) for e in entries) & frozenset(present)


def still_late(recorded: Iterable[str], present: Collection[str], dreamt_now: Iterable[str]) -> tuple[str, ...]:
    """The record after a batch: the keys it held plus ``dreamt_now`` (the batch's late entries),
    only those still late in history.jsonl (``present``: an entry compacted away, or no longer
    after a higher cursor, needs no record), sorted."""
    return tuple(sorted(k for k in {*recorded, *dreamt_now} if k in present))
