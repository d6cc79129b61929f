"""Provenance written as a batch lands (docs/provenance.md): the batch's lines tied to its facts,
the commit body's list of facts and removals, and the JSON note on ``refs/notes/dream``. The
read side is ``app.provenance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.git.notes import write_note
from dream_memory.app.dream.report import NO_FACT_ASKED, BatchRecord
from dream_memory.core.facts import Fact, parse_facts
from dream_memory.core.history import HistoryEntry
from dream_memory.core.provenance import BODY_FACT, BODY_FACTS, BODY_REMOVED, NOTE_VERSION, attribute
from dream_memory.core.surrogates import json_dumps_utf8

_BODY_LIMIT = 40  # facts or removals listed in a commit body; the note holds them all


def attribute_batch(record: BatchRecord, changes: dict[str, tuple[str | None, str]]) -> None:
    """Tie the batch's added, replaced and removed lines to its facts (into ``record``)."""
    if record.found:
        record.attribution = attribute(changes, record.found, record.declared)


def commit_body(record: BatchRecord) -> list[str]:
    """The lines a batch commit's body gains: its facts with their cursors, and every line it
    removed or replaced with the fact that asked for it."""
    if not record.found:
        return []
    lines = [BODY_FACTS]
    for number, fact in enumerate(record.found[:_BODY_LIMIT], start=1):
        sources = ", ".join(map(str, fact.sources)) if fact.sources else "unknown"
        lines.append(f"  {number}. {fact.render()}  <- {sources}")
    if len(record.found) > _BODY_LIMIT:
        lines.append(f"  ... {len(record.found) - _BODY_LIMIT} more: git notes --ref dream show <this commit>")
    removed = record.attribution.removed if record.attribution else ()
    if removed:
        lines += ["", BODY_REMOVED]
        for item in removed[:_BODY_LIMIT]:
            why = "; ".join(f"fact {n}: {record.found[n - 1].render()}" for n in item.facts) or NO_FACT_ASKED
            verb = "replaced" if item.replaced_by is not None else "removed"
            lines.append(f"  {item.path}: {verb} {item.text.strip()!r} ({why})")
        if len(removed) > _BODY_LIMIT:
            lines.append(f"  ... {len(removed) - _BODY_LIMIT} more: git notes --ref dream show <this commit>")
    return lines


def note_payload(record: BatchRecord, entries: Sequence[HistoryEntry], model: str, created: str) -> dict[str, Any]:
    cited = {c for f in record.found for c in f.sources}
    attribution = record.attribution
    return {
        "version": NOTE_VERSION,
        "batch": {"cursor_from": record.cursor_from, "cursor_to": record.cursor_to},
        "model": model,
        "created": created,
        "facts": [
            {
                "id": n,
                "tag": f.tag,
                "name": f.name,
                "text": f.text,
                "target": f.target,
                "sources": list(f.sources),
                "cited_outside_batch": list(record.cited_outside.get(n, ())),
            }
            for n, f in enumerate(record.found, start=1)
        ],
        "lines": [ln.to_json() for ln in attribution.lines] if attribution else [],
        "removed": [r.to_json() for r in attribution.removed] if attribution else [],
        "entries": [
            {"cursor": e.cursor, "timestamp": e.timestamp, "session_key": e.session_key, "content": e.content}
            for e in entries
            if e.cursor in cited
        ],
    }


def save_note(git: GitStore, record: BatchRecord, entries: Sequence[HistoryEntry], model: str, created: str) -> None:
    """The batch's provenance note on its commit. A failure to write it loses no memory: the
    commit body still lists the facts, and the caller reports the missing note."""
    if record.commit is None or not record.found:
        return
    payload = note_payload(record, entries, model, created)
    data = _note_bytes(payload)
    write_note(git, record.commit, data, f"dream: provenance of {record.commit[:10]}")


def _note_bytes(payload: dict[str, Any]) -> bytes:
    """A note as UTF-8, readable text. A lone surrogate (a history entry appended from non-UTF-8
    bytes) cannot be encoded as UTF-8 and would fail the batch after its commit; escaped, it
    reads back through json.loads as the same text."""
    return (json_dumps_utf8(payload, indent=1) + "\n").encode("utf-8")


def held_facts(rendered: Sequence[str]) -> list[Fact]:
    """The facts a held change's record lists (``[USER] text  <- 12, 14``), as facts."""
    found: list[Fact] = []
    for text in rendered:
        match = BODY_FACT.match(f"  1. {text}")
        parsed = parse_facts(match["fact"]).facts if match else []
        if match and parsed:
            sources = () if match["sources"] == "unknown" else tuple(int(c) for c in match["sources"].split(","))
            found.append(Fact(parsed[0].tag, parsed[0].text, parsed[0].name, sources))
    return found


def save_accept_note(
    git: GitStore,
    commit: str,
    path: str,
    *,
    texts: tuple[str | None, str | None],
    facts: Sequence[str],
    held: dict[str, Any],
) -> None:
    """The note of a `dream review accept` commit: the facts the held change carries, and each
    line it adds or replaces tied to them, so `dream why` on those lines names the fact and its
    entries. ``held``: the change's id, batch cursors and model, as the note records them. A
    change with no fact gets no note (the commit body says what it applied)."""
    found = held_facts(facts)
    before, after = texts
    if not found or after is None:
        return
    attribution = attribute({path: (before, after)}, found)
    payload = {
        "version": NOTE_VERSION,
        "batch": {"cursor_from": held.get("cursor_from"), "cursor_to": held.get("cursor_to")},
        "held_change": held.get("id"),
        "model": held.get("model"),
        "created": held.get("created"),
        "facts": [
            {"id": n, "tag": f.tag, "name": f.name, "text": f.text, "target": f.target, "sources": list(f.sources)}
            for n, f in enumerate(found, start=1)
        ],
        "lines": [ln.to_json() for ln in attribution.lines],
        "removed": [r.to_json() for r in attribution.removed],
        "entries": [],  # the cited entries are in history.jsonl or the archive; the batch's note has copies
    }
    data = _note_bytes(payload)
    write_note(git, commit, data, f"dream: provenance of {commit[:10]}")
