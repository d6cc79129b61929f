"""Who wrote each line of a file before a batch (git blame), for the write policy: asked for only
when a hunk removes or replaces lines, and carried forward from one batch's commit to the next
instead of walking the file's whole history again each batch.

A blame at HEAD walks back to the file's first commit, so each batch of a run paid more than the
one before (hundreds of ms in a 5,000-commit store). Carried forward, a batch pays for the commits
since the blame it knows: a line the diff between a commit and its one parent keeps is the
parent's line, a line it does not keep is the commit's own. That is blame's own step (the same
``matching_blocks``), so the result is the one a fresh blame gives; anything else on the way (a
merge, a long detour, the file gone) falls back to a fresh blame.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from dream_memory.adapters.git import GitStore
from dream_memory.core.provenance import commit_kind
from dream_memory.core.write_policy import LineOrigin, lines_of
from dream_memory.errors import DreamError

# (kind, commit time, subject) of the commit that last wrote a line.
_Line = tuple[str, int, str]
# Commits walked back from HEAD to the one whose blame is known; past it a fresh blame is cheaper.
_MAX_STEPS = 16


class RunOrigins:
    """The blames of one run, by file: (the commit they are at, one origin per line)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, list[_Line]]] = {}

    def at_head(self, git: GitStore, path: str) -> list[_Line]:
        """The blame of ``path`` at HEAD; raises DreamError as blame does (not in HEAD, say)."""
        head = git.head()
        known = self._known.get(path)
        lines = _forward(git, path, *known, head) if known is not None and head is not None else None
        if lines is None:
            from dream_memory.adapters.git.blame import blame

            lines = [(o.kind, o.timestamp, o.subject) for o in blame(git, path)]
        if head is not None:
            self._known[path] = (head, lines)
        return lines


def _forward(git: GitStore, path: str, since: str, lines: list[_Line], head: str) -> list[_Line] | None:
    """The blame at ``head`` from the one at ``since``, an ancestor by single-parent commits;
    None when the way there is not that."""
    from dream_memory.adapters.git.blame import line_map, split_lines

    steps = []
    for examined, commit in enumerate(git.first_parent_chain(head)):
        if commit.id.decode("ascii") == since:
            break
        if examined >= _MAX_STEPS or len(commit.parents) != 1:
            return None
        steps.append(commit)
    else:
        return None
    for commit in reversed(steps):
        before = git.read_at(commit.parents[0].decode("ascii"), path)
        after = git.read_at(commit.id.decode("ascii"), path)
        if before is None or after is None:
            return None
        if before == after:
            continue
        message = commit.message.decode("utf-8", errors="replace")
        own: _Line = (commit_kind(message), commit.commit_time, message.split("\n", 1)[0])
        lines = [lines[j] if j >= 0 else own for j in line_map(split_lines(before), split_lines(after))]
    return lines


class LazyOrigins(Sequence[LineOrigin | None]):
    """Who wrote each line of ``before`` (the file at HEAD), looked up on the first line asked
    for: plan_file asks only for lines a hunk removes or replaces, so a batch that only adds lines
    needs no blame. A blame that fails or does not match the text gives None for every line (a
    person's, the safe side), as no origins at all would."""

    def __init__(self, known: RunOrigins, git: GitStore, path: str, before: str, now: float) -> None:
        self._known, self._git, self._path, self._now = known, git, path, now
        self._count = len(lines_of(before))
        self._lines: list[LineOrigin | None] | None = None

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> LineOrigin | None: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LineOrigin | None]: ...
    def __getitem__(self, index: int | slice) -> LineOrigin | Sequence[LineOrigin | None] | None:
        if self._lines is None:
            self._lines = self._look_up()
        return self._lines[index]

    def _look_up(self) -> list[LineOrigin | None]:
        unknown: list[LineOrigin | None] = [None] * self._count
        try:
            lines = self._known.at_head(self._git, self._path)
        except DreamError:
            return unknown
        if len(lines) != self._count:
            return unknown
        return [LineOrigin(kind, max(0.0, (self._now - when) / 86400), subject) for kind, when, subject in lines]
