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

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from dream_memory.app.dream.report import BatchRecord
from dream_memory.core import layout
from dream_memory.core.bounded import newline_lines
from dream_memory.core.placement import place_facts
from dream_memory.core.provenance import attribute, replaced_in_batch
from dream_memory.core.surrogates import replace_lone_surrogates
from dream_memory.core.write_policy import Hunk

Piece = tuple[str, Hunk, str | None, str | None]  # path, hunk, text it starts from, text with it


def unapplied_pieces(
    record: BatchRecord,
    read: Callable[[str], str | None],
    landed: Mapping[str, tuple[str | None, str | None]],
    held: Sequence[Piece],
    today: str,
) -> tuple[list[tuple[Piece, list[str]]], list[str]]:
    """One held change per file for the facts left out (each with its facts rendered for the
    record), and the notes on facts a later one replaced. ``read``: each file as it lands;
    ``held``: the batch's changes the guards and the write policy hold (their facts wait already)."""
    if not record.unapplied:
        return [], []
    tied: set[int] = set()
    for changes in [dict(landed), *({path: (base, theirs)} for path, _, base, theirs in held)]:
        ties = attribute({p: (b, a) for p, (b, a) in changes.items() if a is not None}, record.found, record.declared)
        tied |= {n for line in ties.lines for n in line.facts} | {n for gone in ties.removed for n in gone.facts}
    numbers = [n for n, f in enumerate(record.found, start=1) if f in record.unapplied and n not in tied]
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
    pieces: list[tuple[Piece, list[str]]] = []
    for path, (base, theirs) in place_facts(facts, read, today).items():
        mine = [f for f in facts if f.target == path or (f.tag == "ENTITY" and path == layout.INDEX)]
        reason = (
            f"phase 2 did not apply {len(mine)} fact(s); these lines are the placement rules': "
            "accept to add them, reject if memory already says so in other words"
        )
        rendered = [f"{f.render()}  <- {', '.join(map(str, f.sources)) or 'unknown'}" for f in mine]
        pieces.append(((path, _added(base or "", theirs, reason), base, theirs), rendered))
    return pieces, notes


def _added(base: str, theirs: str, reason: str) -> Hunk:
    """The one held hunk spanning every line the placement rules changed in ``base``."""
    old, new = newline_lines(base), newline_lines(theirs)
    spans = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    start, end = spans[0][1], spans[-1][2]
    removed = tuple(line for _, i1, i2, _, _ in spans for line in old[i1:i2])
    added = tuple(line for _, _, _, j1, j2 in spans for line in new[j1:j2])
    return Hunk(start, end, removed, added, "replace" if removed else "add", "facts", (), "hold", reason)
