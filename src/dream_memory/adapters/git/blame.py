"""Line origins of a memory file (``git blame``), read with dulwich.

dulwich ships ``dulwich.annotate``, but it replays every commit of the file forward through
``Walker(paths=...)`` (a tree diff of every commit, merges linearised by date) and diffs each
version against the whole accumulated annotation: slow on a long history and unlike git on a
merge. This module walks backwards the way ``git blame`` does instead: every line of the file at
``rev`` is a suspect handed from a commit to its parent while the parent holds the same line
(per a line diff), and a line no parent holds was written by that commit. A commit whose version
of the file equals a parent's passes every suspect on without a diff (git's "TREESAME"), and the
walk ends as soon as no suspect is left, so a file's blame costs one tree lookup per commit that
leads to its oldest surviving line, and a diff per commit that changed it.

The line diff trims the common head and tail (as git's xdiff does), anchors on the lines found
once on each side when they keep their order, and uses difflib's ``SequenceMatcher`` only where
that does not apply: the same alignment as git's Myers diff on the edits memory files see
(lines added, replaced, removed) at a dictionary pass per version; a blank line among several
may be matched to another blank of the same move. tests/git/test_blame.py compares with
``git blame --porcelain``.
"""

from __future__ import annotations

import heapq
import itertools
import stat
from dataclasses import dataclass
from difflib import SequenceMatcher

from dulwich.objects import Commit, Tree

from dream_memory.adapters.git.base import git_errors, oid
from dream_memory.adapters.git.store import GitStore
from dream_memory.core.provenance import commit_kind
from dream_memory.errors import NotFound


@dataclass(frozen=True)
class LineOrigin:
    line: int  # 1-based, in the file at `rev`
    text: str
    commit: str  # hex sha of the commit that last wrote this line
    author: str  # "Name <email>"
    subject: str  # first line of that commit's message
    timestamp: int  # commit time, seconds since epoch
    kind: str  # "dream" | "manual" | "init" | "other"  (core.provenance.commit_kind)


def split_lines(data: bytes) -> list[bytes]:
    """Lines as git counts them: split at "\\n" only; a last line without one still counts."""
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return parts


def line_map(old: list[bytes], new: list[bytes]) -> list[int]:
    """For each line of ``new``, its index in ``old`` when the diff keeps it, else -1."""
    result = [-1] * len(new)
    _match(old, new, 0, len(old), 0, len(new), result)
    return result


def _match(old: list[bytes], new: list[bytes], a0: int, a1: int, b0: int, b1: int, out: list[int]) -> None:  # noqa: PLR0917 -- the two ranges, as the recursion splits them
    """Match ``old[a0:a1]`` to ``new[b0:b1]`` into ``out``: the common head and tail first, then
    the lines that occur once on each side when they keep their order (a memory file's facts
    are such lines, so a batch's diff costs a dictionary pass), the gaps between them in turn;
    ``SequenceMatcher`` only where that does not apply (lines moved, or only repeated lines)."""
    while a0 < a1 and b0 < b1 and old[a0] == new[b0]:
        out[b0] = a0
        a0, b0 = a0 + 1, b0 + 1
    while a0 < a1 and b0 < b1 and old[a1 - 1] == new[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
        out[b1] = a1
    if a0 == a1 or b0 == b1:
        return
    where: dict[bytes, int] = {}
    for i in range(a0, a1):
        where[old[i]] = -1 if old[i] in where else i
    seen: dict[bytes, int] = {}
    for j in range(b0, b1):
        seen[new[j]] = seen.get(new[j], 0) + 1
    anchors = [(where[new[j]], j) for j in range(b0, b1) if seen[new[j]] == 1 and where.get(new[j], -1) >= 0]
    if anchors and all(x[0] < y[0] for x, y in itertools.pairwise(anchors)):
        prev_a, prev_b = a0, b0
        for i, j in anchors:
            _match(old, new, prev_a, i, prev_b, j, out)
            out[j] = i
            prev_a, prev_b = i + 1, j + 1
        _match(old, new, prev_a, a1, prev_b, b1, out)
        return
    matcher = SequenceMatcher(None, old[a0:a1], new[b0:b1], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[b0 + block.b + k] = a0 + block.a + k


class _Walk:
    """One blame: commits and trees read once each, the file's blob per commit remembered."""

    def __init__(self, store: GitStore, path: str) -> None:
        self.store = store
        self.parts = store.repo_path(path).split(b"/")
        self.objects = store.repo.object_store
        self.commits: dict[bytes, Commit] = {}
        self.blobs: dict[bytes, bytes | None] = {}  # commit -> blob of the file (None: absent)
        self.lines: dict[bytes, list[bytes]] = {}

    def commit(self, sha: bytes) -> Commit:
        found = self.commits.get(sha)
        if found is None:
            obj = self.objects[oid(sha)]
            assert isinstance(obj, Commit)
            found = self.commits[sha] = obj
        return found

    def blob_of(self, sha: bytes) -> bytes | None:
        if sha in self.blobs:
            return self.blobs[sha]
        current: bytes = self.commit(sha).tree
        found: bytes | None = None
        for i, part in enumerate(self.parts):
            tree = self.objects[oid(current)]
            assert isinstance(tree, Tree)
            if part not in tree:
                break
            mode, child = tree[part]
            last = i == len(self.parts) - 1
            if last and stat.S_ISREG(mode):
                found = child
            elif last or not stat.S_ISDIR(mode):
                break
            current = child
        self.blobs[sha] = found
        return found

    def text(self, blob: bytes) -> list[bytes]:
        if blob not in self.lines:
            self.lines[blob] = split_lines(self.store.blob(blob))
        return self.lines[blob]

    def parents(self, sha: bytes) -> list[bytes]:
        if sha in self.store.shallow:
            return []  # the oldest commit of a shallow clone: what it holds is its own
        return list(self.commit(sha).parents)


@git_errors
def blame(store: GitStore, path: str, rev: str = "HEAD") -> list[LineOrigin]:
    """Who last wrote each line of ``path`` (workspace-relative) as it is at ``rev``.

    NotFound when the file is not in that commit; UnknownRevision for a revision that is not one.
    """
    start = store.resolve(rev).encode("ascii")
    walk = _Walk(store, path)
    top = walk.blob_of(start)
    if top is None:
        raise NotFound(
            f"{path} is not a file in commit {start.decode()[:10]}",
            hint="`dream log` lists the commits; give a path relative to the workspace",
        )
    final = walk.text(top)
    owner: list[bytes | None] = [None] * len(final)
    # suspects: commit -> (line index in the final file, line index in that commit's version)
    suspects: dict[bytes, list[tuple[int, int]]] = {start: [(i, i) for i in range(len(final))]}
    queue: list[tuple[int, int, bytes]] = [(-walk.commit(start).commit_time, 0, start)]
    order = 1
    while queue:
        _, _, sha = heapq.heappop(queue)
        pending = suspects.pop(sha, None)
        if not pending:
            continue  # reached again through another child after its suspects were passed on
        blob = walk.blob_of(sha)
        assert blob is not None
        handed: dict[bytes, list[tuple[int, int]]] = {}
        parents = walk.parents(sha)
        same = next((p for p in parents if walk.blob_of(p) == blob), None)
        if same is not None:
            handed[same] = pending
            pending = []
        else:
            mine = walk.text(blob)
            for parent in parents:
                parent_blob = walk.blob_of(parent)
                if parent_blob is None or not pending:
                    continue
                mapping = line_map(walk.text(parent_blob), mine)
                kept = [(final_i, mapping[here]) for final_i, here in pending if mapping[here] >= 0]
                if kept:
                    handed.setdefault(parent, []).extend(kept)
                    pending = [(final_i, here) for final_i, here in pending if mapping[here] < 0]
        for final_i, _ in pending:
            owner[final_i] = sha
        for parent, lines in handed.items():
            suspects.setdefault(parent, []).extend(lines)
            heapq.heappush(queue, (-walk.commit(parent).commit_time, order, parent))
            order += 1
    return [_origin(walk, i, line, owner[i]) for i, line in enumerate(final)]


def _origin(walk: _Walk, index: int, line: bytes, sha: bytes | None) -> LineOrigin:
    assert sha is not None  # every suspect ends at a commit: the walk stops only when none is left
    commit = walk.commit(sha)
    message = commit.message.decode("utf-8", errors="replace")
    author = commit.author.decode("utf-8", errors="replace")
    return LineOrigin(
        line=index + 1,
        text=line.decode("utf-8", errors="replace"),
        commit=sha.decode("ascii"),
        author=author,
        subject=message.split("\n", 1)[0],
        timestamp=commit.commit_time,
        kind=commit_kind(message),
    )
