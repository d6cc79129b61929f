"""Three-way merges of memory files: a restore (the inverse of a commit) and a held change.

The merge itself is the ``merge3`` library's (bzr's and Breezy's three-way merge); this module
decides only what our callers need around it:

- **Lines are compared without their line ends**, so a file an editor turned into CRLF since the
  commit still merges line by line; a last line without a newline stays a different line from the
  same text with one (as in git), so adding or removing that newline is a change like any other.
  When ours changed its line ends since base, lines taken from ``theirs`` get ours' line end, so
  the result keeps one style. One side equal to base gives the other side byte for byte.
- **A conflict only where the same lines changed.** merge3 (like git) calls two changes that
  merely touch (one side appends right after lines the other side removes) a conflict. Within
  such a region, lines one side only *added* at its edges are not part of the conflict: they are
  kept, and what is left is decided as a clean change when only one side changed the base lines.
  So undoing batch 1's lines keeps batch 2's lines appended right after them.
- ``prefer="theirs"`` (``--force``) takes theirs for the conflicting lines only; every other
  region merges as without it. Without it a conflict keeps ours' lines and is reported as a
  1-based inclusive line range in ``ours`` (``(n, n - 1)`` when ours has no line there: the
  conflict sits just before line ``n``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import merge3

Prefer = Literal["none", "theirs"]


@dataclass(frozen=True)
class Merged:
    text: str  # ours-preferring result when conflicts and not force
    conflicts: tuple[tuple[int, int], ...]  # 1-based inclusive line ranges in `ours`

    @property
    def clean(self) -> bool:
        return not self.conflicts


# A line as merge3 compares it: its text with any line end ("\r\n" or "\n") as "\n".
_Key = str


class _Matcher(difflib.SequenceMatcher[_Key]):
    """difflib without its "autojunk" heuristic: in a file of 200 lines or more it ignores lines
    that occur often (blank lines, ``---``), which aligns unrelated lines and makes conflicts up."""

    def __init__(
        self,
        isjunk: Callable[[_Key], bool] | None = None,
        a: Sequence[_Key] = (),
        b: Sequence[_Key] = (),
        autojunk: bool = True,
    ) -> None:
        del autojunk  # merge3 passes none; never wanted
        super().__init__(isjunk, a, b, autojunk=False)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _key(line: str) -> _Key:
    body = line.rstrip("\r\n")
    return body + "\n" if body != line else body


def _line_end(lines: Sequence[str]) -> str | None:
    """The line end most of ``lines`` use, None when no line has one."""
    crlf = sum(1 for line in lines if line.endswith("\r\n"))
    lf = sum(1 for line in lines if line.endswith("\n")) - crlf
    if not crlf and not lf:
        return None
    return "\r\n" if crlf > lf else "\n"


def merge_texts(base: str, ours: str, theirs: str, *, prefer: Prefer = "none") -> Merged:
    """Merge the change base -> theirs into ours (see the module docstring for the rules)."""
    if prefer not in ("none", "theirs"):
        raise ValueError(f"prefer must be 'none' or 'theirs' (got {prefer!r})")
    if ours == base or theirs in (base, ours):
        return Merged(theirs if ours == base else ours, ())
    b_lines, o_lines, t_lines = _lines(base), _lines(ours), _lines(theirs)
    t_out = t_lines
    end = _line_end(o_lines)
    if end is not None and _line_end(b_lines) not in (None, end):
        # ours changed its line ends since base (an editor on another platform): theirs follows
        t_out = [key[:-1] + end if key.endswith("\n") else key for key in map(_key, t_lines)]
    sides = _Sides([_key(x) for x in b_lines], [_key(x) for x in o_lines], [_key(x) for x in t_lines], o_lines, t_out)
    m3 = merge3.Merge3(sides.base, sides.ours, sides.theirs, sequence_matcher=_Matcher)  # type: ignore[arg-type]  # merge3's own default needs the same: a Protocol __init__
    # merge3 names unchanged regions by base index; the same lines in ours (with ours' own line
    # ends) are the sync regions', in the same order.
    synced = iter([(a0, a1) for z0, z1, a0, a1, _, _ in m3.find_sync_regions() if z1 > z0])
    out: list[str] = []
    conflicts: list[tuple[int, int]] = []
    for region in m3.merge_regions():
        kind = region[0]
        if kind == "unchanged":
            a0, a1 = next(synced)
            out.extend(o_lines[a0:a1])
        elif kind in ("same", "a"):
            out.extend(o_lines[region[1] : region[2]])
        elif kind == "b":
            out.extend(t_out[region[1] : region[2]])
        else:
            got, conflict = sides.settle(cast("tuple[int, int, int, int, int, int]", region[1:]), prefer)
            out.extend(got)
            if conflict is not None:
                conflicts.append(conflict)
    return Merged("".join(out), tuple(conflicts))


@dataclass(frozen=True)
class _Sides:
    base: list[_Key]
    ours: list[_Key]
    theirs: list[_Key]
    ours_text: list[str]
    theirs_text: list[str]  # in ours' line end

    def settle(
        self, region: tuple[int, int, int, int, int, int], prefer: Prefer
    ) -> tuple[list[str], tuple[int, int] | None]:
        """One region merge3 calls a conflict (base, ours and theirs slices): lines either side
        only added at its edges are kept, and the rest is a conflict only if both sides changed
        the base lines differently."""
        z0, z1, a0, a1, t0, t1 = region
        base = self.base[z0:z1]
        o_lead, o_tail = _edges(base, self.ours[a0:a1])
        t_lead, t_tail = _edges(base, self.theirs[t0:t1])
        if not base or (o_lead and t_lead) or (o_tail and t_tail):
            # Both sides added lines at the same place: which goes first is not ours to guess.
            return self._conflict(a0, a1, t0, t1, prefer)
        m0, m1, n0, n1 = a0 + o_lead, a1 - o_tail, t0 + t_lead, t1 - t_tail
        if self.ours[m0:m1] == base:
            middle, conflict = self.theirs_text[n0:n1], None
        elif self.theirs[n0:n1] in (base, self.ours[m0:m1]):
            middle, conflict = self.ours_text[m0:m1], None
        else:
            middle, conflict = self._conflict(m0, m1, n0, n1, prefer)
        lead = self.ours_text[a0:m0] + self.theirs_text[t0:n0]
        tail = self.theirs_text[n1:t1] + self.ours_text[m1:a1]
        return lead + middle + tail, conflict

    def _conflict(self, a0: int, a1: int, t0: int, t1: int, prefer: Prefer) -> tuple[list[str], tuple[int, int]]:
        lines = self.theirs_text[t0:t1] if prefer == "theirs" else self.ours_text[a0:a1]
        return lines, (a0 + 1, a1)


def _edges(base: list[_Key], side: list[_Key]) -> tuple[int, int]:
    """How many lines ``side`` added before the first and after the last line of ``base``."""
    if not base:
        return 0, 0
    ops = _Matcher(None, base, side).get_opcodes()
    lead = ops[0][4] - ops[0][3] if ops and ops[0][0] == "insert" else 0
    tail = ops[-1][4] - ops[-1][3] if len(ops) > 1 and ops[-1][0] == "insert" else 0
    return lead, tail
