"""Three-way merges of memory files: a restore (the inverse of a commit) and a held change.

The merge itself is the ``merge3`` library's (bzr's and Breezy's three-way merge), aligning
lines with Breezy's ``patiencediff``: patience diff anchors on lines that occur once (facts do;
blank lines and headings repeat), and it is fast where difflib is not (a 12,000-line file: 0.06 s
against 30 s for difflib without its autojunk heuristic, which misaligns repeated lines). This
module decides only what our callers need around the merge:

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import merge3
import patiencediff

from dream_memory.core.bounded import newline_lines

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


def line_opcodes(a: Sequence[str], b: Sequence[str]) -> Sequence[tuple[str, int, int, int, int]]:
    """difflib's opcodes from ``a`` to ``b`` by patience diff: near-linear where difflib's
    matcher is quadratic in a file's repeated lines (blank ones, a heading per section)."""
    return patiencediff.PatienceSequenceMatcher(None, a, b).get_opcodes()


def _key(line: str) -> _Key:
    if line.endswith("\r\n"):
        return line[:-2] + "\n"
    return line


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
    # Lines as git counts them: str.splitlines would also split at form feeds, U+2028 and more,
    # and shift every line number after them.
    b_lines, o_lines, t_lines = newline_lines(base), newline_lines(ours), newline_lines(theirs)
    t_out = t_lines
    end = _line_end(o_lines)
    if end is not None and _line_end(b_lines) not in (None, end):
        # ours changed its line ends since base (an editor on another platform): theirs follows
        t_out = [key[:-1] + end if key.endswith("\n") else key for key in map(_key, t_lines)]
    sides = _Sides([_key(x) for x in b_lines], [_key(x) for x in o_lines], [_key(x) for x in t_lines], o_lines, t_out)
    # merge3 types its matcher as a Protocol with an __init__, which no class satisfies for mypy
    # (merge3's own difflib default carries the same ignore).
    matcher = patiencediff.PatienceSequenceMatcher
    m3 = merge3.Merge3(sides.base, sides.ours, sides.theirs, sequence_matcher=matcher)  # type: ignore[arg-type]
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
        woven = self._weave(base, a0, a1, t0, t1)
        if woven is not None:
            return woven, None
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

    def _weave(self, base: list[_Key], a0: int, a1: int, t0: int, t1: int) -> list[str] | None:
        """Both sides' changes applied where they touch no common base line (git calls changes
        that merely touch a conflict). None when they do: ours rewrote or dropped a line theirs
        rewrote, ours rewrote a line theirs drops, or both added lines at one place (or ours
        added lines inside a run theirs rewrites), where there is no order to take.

        Dream inserts a batch's facts after the previous batch's last fact and before the blank
        line that batch added, so undoing the older batch drops a run with ours' lines inside it;
        two reverts in a row drop neighbouring runs."""
        at: dict[int, list[str]] = {}  # ours' lines placed before base line i (added, or rewriting from i)
        gone: dict[int, str] = {}  # base lines ours dropped: "delete", or "rewrite" (replaced by at[start])
        kept: dict[int, int] = {}  # base line -> the same line in ours
        for tag, i1, i2, j1, j2 in line_opcodes(base, self.ours[a0:a1]):
            if tag == "equal":
                kept.update((i, a0 + j1 + (i - i1)) for i in range(i1, i2))
                continue
            if j2 > j1:
                at[i1] = self.ours_text[a0 + j1 : a0 + j2]
            gone.update(dict.fromkeys(range(i1, i2), "rewrite" if tag == "replace" else "delete"))
        out: list[str] = []
        for tag, i1, i2, j1, j2 in line_opcodes(base, self.theirs[t0:t1]):
            if tag in ("equal", "delete"):
                for i in range(i1, i2):
                    if tag == "delete" and gone.get(i) == "rewrite":
                        return None
                    out += at.get(i, [])
                    if tag == "equal" and i not in gone:
                        out.append(self.ours_text[kept[i]])
                continue
            if any(i in gone for i in range(i1, i2)) or any(i1 < i < i2 for i in at):
                return None
            if i1 in at and (tag == "insert" or gone.get(i1) == "rewrite"):
                return None
            out += at.get(i1, []) + self.theirs_text[t0 + j1 : t0 + j2]
        return out + at.get(len(base), [])

    def _conflict(self, a0: int, a1: int, t0: int, t1: int, prefer: Prefer) -> tuple[list[str], tuple[int, int]]:
        lines = self.theirs_text[t0:t1] if prefer == "theirs" else self.ours_text[a0:a1]
        return lines, (a0 + 1, a1)


def _edges(base: list[_Key], side: list[_Key]) -> tuple[int, int]:
    """How many lines ``side`` added before the first and after the last line of ``base``.

    difflib folds lines added right after rewritten lines into the rewrite (``- Uses vim`` ->
    ``- Uses neovim``, ``- Works nights``). When the lines next to the base lines still look like
    them one for one (similarity 0.75 or more, the cutoff of difflib's own Differ), those are
    the rewrite and the lines beyond are additions. Anything else stays one change: a conflict."""
    if not base:
        return 0, 0
    ops = line_opcodes(base, side)
    if not ops:
        return 0, 0
    if len(ops) == 1:  # one change in all: lines appended after a rewrite are the likelier reading
        tail = _added(ops[0], base, side, leading=False)
        return (0 if tail else _added(ops[0], base, side, leading=True)), tail
    return _added(ops[0], base, side, leading=True), _added(ops[-1], base, side, leading=False)


def _added(op: tuple[str, int, int, int, int], base: list[_Key], side: list[_Key], *, leading: bool) -> int:
    tag, i1, i2, j1, j2 = op
    if tag == "insert":
        return j2 - j1
    extra = (j2 - j1) - (i2 - i1)
    if tag != "replace" or extra <= 0:
        return 0
    rewrite = side[j1 + extra : j2] if leading else side[j1 : j2 - extra]
    return extra if all(map(_similar, rewrite, base[i1:i2])) else 0


def _similar(a: str, b: str) -> bool:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.real_quick_ratio() >= _ALIKE and matcher.quick_ratio() >= _ALIKE and matcher.ratio() >= _ALIKE


_ALIKE = 0.75
