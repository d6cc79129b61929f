"""The facts phase 2 left out of memory, held for review as the placement rules would add them.

A model may leave a fact out by mistake (its edit refused, its loop cut short, a fact missed),
and nothing but a batch note said so: the fact was dropped while the batch landed as done. Each
such fact now waits for a person (``dream review``) in the file it belongs to. Held, not landed:
the rules cannot tell a fact left out from one the model wrote in words of its own (a fact some
landed line is tied to, by its words or by the edit that declared it, is not left out), nor from
one a later fact of the batch replaced, which is named in a note instead. A fact tied to a
line the batch removed (a correction, "Forget: ...") was applied by that removal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from dream_memory.app.dream.report import BatchRecord
from dream_memory.app.held import PLACE
from dream_memory.core import layout
from dream_memory.core.bounded import newline_lines
from dream_memory.core.facts import Fact
from dream_memory.core.merge import line_opcodes
from dream_memory.core.placement import place_facts
from dream_memory.core.provenance import attribute, replaced_in_batch
from dream_memory.core.surrogates import replace_lone_surrogates
from dream_memory.core.write_policy import Hunk, WritePolicy, pinned_problem, pinned_section_in

Piece = tuple[str, Hunk, str | None, str | None]  # path, hunk, text it starts from, text with it


def unapplied_pieces(
    record: BatchRecord,
    read: Callable[[str], str | None],
    held: Sequence[Piece],
    *,
    policy: WritePolicy,
    today: str,
) -> tuple[list[tuple[Piece, dict[str, Any]]], list[str]]:
    """One held change per file for the facts left out (each with what its record adds: the
    facts rendered, and as ``dream review accept`` places them anew), and the batch's notes.
    ``read``: each file as it lands (``record.attribution`` ties its lines to the facts); ``held``:
    the changes the guards and the write policy hold (their facts wait already); ``policy``: a
    pinned file or section gets no proposal."""
    if not record.unapplied:
        return [], []
    # What lands is tied already (record.attribution, for the report and the provenance note).
    held_ties = [attribute({p: (b, t)}, record.found, record.declared) for p, _, b, t in held if t is not None]
    tied: set[int] = set()
    for ties in [record.attribution, *held_ties]:
        if ties is not None:
            tied |= {n for line in ties.lines for n in line.facts} | {n for gone in ties.removed for n in gone.facts}
    numbers = [n for n in record.unapplied if n not in tied and 0 < n <= len(record.found)]
    replaced = replaced_in_batch(numbers, record.found, tied)
    notes = [
        f"fact {n} ({record.found[n - 1].text[:80]!r}) is not in memory: the later fact {by} of the batch replaces it"
        for n, by in replaced.items()
    ]
    # A lone surrogate (half an emoji) cannot be written to a file: shown as U+FFFD, as the
    # write rules would have refused the model's edit; the entry keeps the original.
    facts = [
        replace(f, text=replace_lone_surrogates(f.text), name=f.name and replace_lone_surrogates(f.name))
        for n, f in ((n, record.found[n - 1]) for n in numbers if n not in replaced)
    ]
    pieces: list[tuple[Piece, dict[str, Any]]] = []
    for path, (base, theirs) in _placed(facts, read, today, policy, notes).items():
        mine = [f for f in facts if f.target == path or (f.tag == "ENTITY" and path == layout.INDEX)]
        reason = (
            f"phase 2 did not apply {len(mine)} fact(s); these lines are the placement rules': "
            "accept to apply them, reject if memory already says so in other words"
        )
        extra = {
            "facts": [f"{f.render()}  <- {', '.join(map(str, f.sources)) or 'unknown'}" for f in mine],
            PLACE: [{"tag": f.tag, "text": f.text, "name": f.name, "scope": f.scope} for f in mine],
        }
        pieces.append(((path, _added(base or "", theirs, reason), base, theirs), extra))
    return pieces, notes


def _placed(
    facts: Sequence[Fact], read: Callable[[str], str | None], today: str, policy: WritePolicy, notes: list[str]
) -> dict[str, tuple[str | None, str]]:
    """The placement rules' changes, kept out of pinned sections (the facts go under the next
    fitting one, as ``place_with_rules`` does); a pinned file gets none, and a note says so."""
    avoid: dict[str, set[str]] = {}
    while True:  # each round avoids one more pinned section, of a file's few
        placed = place_facts(facts, read, today, avoid)
        pins = {path: pinned_problem(path, base, theirs, policy) for path, (base, theirs) in placed.items()}
        sections = [s for problem in pins.values() if problem and (s := pinned_section_in(problem))]
        fresh = [(path, title) for path, title in sections if title not in avoid.get(path, set())]
        if not fresh:
            break
        for path, title in fresh:
            avoid.setdefault(path, set()).add(title)
    for path, problem in pins.items():
        if problem is not None:
            del placed[path]
            notes.append(f"fact(s) phase 2 left out of {path} are not proposed for review: {problem}")
    return placed


def _added(base: str, theirs: str, reason: str) -> Hunk:
    """The one held hunk spanning every line the placement rules changed in ``base``."""
    old, new = newline_lines(base), newline_lines(theirs)
    spans = [op for op in line_opcodes(old, new) if op[0] != "equal"]
    start, end = spans[0][1], spans[-1][2]
    removed = tuple(line for _, i1, i2, _, _ in spans for line in old[i1:i2])
    added = tuple(line for _, _, _, j1, j2 in spans for line in new[j1:j2])
    return Hunk(start, end, removed, added, "replace" if removed else "add", "facts", (), "hold", reason)
