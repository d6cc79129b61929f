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

import bisect
import heapq
import itertools
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from dulwich.objects import Blob, Commit, Tree, parse_tree

from dream_memory.adapters.git.base import git_errors, oid
from dream_memory.adapters.git.store import GitStore
from dream_memory.core.provenance import commit_kind
from dream_memory.errors import NotFound, UnknownRevision, VersionStoreError


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


Block = tuple[int, int, int]  # (start in the old version, start in the new version, length)
Run = tuple[int, int, int]  # suspects: (start in this commit's version, start in the final file, length)


def _common_head(old: Sequence[bytes], new: Sequence[bytes], limit: int) -> int:
    """How many leading lines the two share (slices compared in C, by bisection)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_tail(old: Sequence[bytes], new: Sequence[bytes], limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid :] == new[len(new) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def matching_blocks(old: list[bytes], new: list[bytes]) -> list[Block]:
    """The lines the diff from ``old`` to ``new`` keeps, as blocks in order. A line is the same
    line whatever its line end (``git blame`` would credit an editor's CRLF rewrite with every
    line, and the write policy would then take a person's lines for Dream's)."""
    old, new = _without_cr(old), _without_cr(new)
    blocks: list[Block] = []
    _match(old, new, (0, len(old)), (0, len(new)), blocks)
    return blocks


def _without_cr(lines: list[bytes]) -> list[bytes]:
    if not any(line.endswith(b"\r") for line in lines):
        return lines
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _match(
    old: list[bytes], new: list[bytes], span_a: tuple[int, int], span_b: tuple[int, int], out: list[Block]
) -> None:
    """Blocks of ``old[a0:a1]`` kept in ``new[b0:b1]``: the common head and tail first, then the
    lines found once on each side when they keep their order (a memory file's facts are such
    lines, so a batch's diff costs a dictionary pass), the gaps between them in turn; difflib's
    ``SequenceMatcher`` only where that does not apply (lines moved, or only repeated lines)."""
    (a0, a1), (b0, b1) = span_a, span_b
    old_mid, new_mid = old[a0:a1], new[b0:b1]
    head = _common_head(old_mid, new_mid, min(len(old_mid), len(new_mid)))
    tail = _common_tail(old_mid, new_mid, min(len(old_mid), len(new_mid)) - head)
    if head:
        out.append((a0, b0, head))
    a0, b0, a1, b1 = a0 + head, b0 + head, a1 - tail, b1 - tail
    if a0 < a1 and b0 < b1:
        _middle(old, new, (a0, a1), (b0, b1), out)
    if tail:
        out.append((a1, b1, tail))


def _middle(
    old: list[bytes], new: list[bytes], span_a: tuple[int, int], span_b: tuple[int, int], out: list[Block]
) -> None:
    (a0, a1), (b0, b1) = span_a, span_b
    old_mid, new_mid = old[a0:a1], new[b0:b1]
    probed = _probe(old_mid, new_mid)
    if probed is not None:
        i, j, size = probed
        if i and j:
            _match(old, new, (a0, a0 + i), (b0, b0 + j), out)
        out.append((a0 + i, b0 + j, size))
        _match(old, new, (a0 + i + size, a1), (b0 + j + size, b1), out)
        return
    count_a, count_b = Counter(old_mid), Counter(new_mid)
    where = {line: a0 + i for i, line in enumerate(old_mid) if count_a[line] == 1}
    anchors = [(where[line], b0 + j) for j, line in enumerate(new_mid) if count_b[line] == 1 and line in where]
    if anchors and all(x[0] < y[0] for x, y in itertools.pairwise(anchors)):
        prev_a, prev_b = a0, b0
        for i, j in anchors:
            if i > prev_a and j > prev_b:
                _match(old, new, (prev_a, i), (prev_b, j), out)
            if out and out[-1][0] + out[-1][2] == i and out[-1][1] + out[-1][2] == j:
                last = out.pop()
                out.append((last[0], last[1], last[2] + 1))
            else:
                out.append((i, j, 1))
            prev_a, prev_b = i + 1, j + 1
        if a1 > prev_a and b1 > prev_b:
            _match(old, new, (prev_a, a1), (prev_b, b1), out)
        return
    matcher = SequenceMatcher(None, old_mid, new_mid, autojunk=False)
    out += [(a0 + m.a, b0 + m.b, m.size) for m in matcher.get_matching_blocks() if m.size]


def _probe(old: list[bytes], new: list[bytes]) -> Block | None:
    """A block that starts at the first or second line of either side, when that line occurs
    once on each side and nothing skipped before the block on one side reappears after it on
    the other (so no longer match crosses it): the usual batch diff (lines dropped or added
    before a run of kept facts) found with list operations in C, no per-line loop."""
    for line in (new[0], old[0], *new[1:2], *old[1:2]):
        if old.count(line) != 1 or new.count(line) != 1:
            continue
        i, j = old.index(line), new.index(line)
        size = 1 + _common_head(old[i + 1 :], new[j + 1 :], min(len(old) - i, len(new) - j) - 1)
        if set(old[:i]).isdisjoint(new[j + size :]) and set(new[:j]).isdisjoint(old[i + size :]):
            return i, j, size
    return None


def line_map(old: list[bytes], new: list[bytes]) -> list[int]:
    """For each line of ``new``, its index in ``old`` when the diff keeps it, else -1."""
    result = [-1] * len(new)
    for a, b, size in matching_blocks(old, new):
        result[b : b + size] = range(a, a + size)
    return result


def _hand_over(runs: list[Run], blocks: list[Block]) -> tuple[list[Run], list[Run]]:
    """Split suspects into those the parent holds (renumbered to the parent's lines) and those
    it does not."""
    passed: list[Run] = []
    kept: list[Run] = []
    starts = [b for _, b, _ in blocks]
    for here, final, length in runs:
        cursor, end = here, here + length
        k = max(0, bisect.bisect_right(starts, here) - 1)
        while cursor < end and k < len(blocks):
            a, b, size = blocks[k]
            lo, hi = max(cursor, b), min(end, b + size)
            if hi <= lo:
                if b >= end:
                    break
                k += 1
                continue
            if lo > cursor:
                kept.append((cursor, final + cursor - here, lo - cursor))
            passed.append((a + lo - b, final + lo - here, hi - lo))
            cursor = hi
            k += 1
        if cursor < end:
            kept.append((cursor, final + cursor - here, end - cursor))
    return passed, kept


class _Walk:
    """One blame: commits and trees read once each, the file's blob per commit remembered."""

    def __init__(self, store: GitStore, path: str) -> None:
        self.store = store
        self.parts = store.repo_path(path).split(b"/")
        self.objects = store.repo.object_store
        self.commits: dict[bytes, Commit] = {}
        self.blobs: dict[bytes, bytes | None] = {}  # commit -> blob of the file (None: absent)
        self.lines: dict[bytes, list[bytes]] = {}
        self.trees: dict[tuple[bytes, int], bytes | None] = {}
        self.heads: dict[bytes, tuple[bytes, list[bytes], int]] = {}
        self.oid_length = self.objects.object_format.oid_length

    def commit(self, sha: bytes) -> Commit:
        found = self.commits.get(sha)
        if found is None:
            obj = self.objects[oid(sha)]
            assert isinstance(obj, Commit)
            found = self.commits[sha] = obj
        return found

    def head(self, sha: bytes) -> tuple[bytes, list[bytes], int]:
        """(tree, parents, commit time) from the commit's header alone: the walk reads every
        commit on the way, and building dulwich's ``Commit`` for each was a fifth of its time."""
        found = self.heads.get(sha)
        if found is not None:
            return found
        kind, raw = self.objects.get_raw(oid(sha))
        if kind != Commit.type_num:
            raise UnknownRevision(f"{sha.decode('ascii', 'replace')} is not a commit")
        tree, parents, when = b"", [], 0
        for line in raw.split(b"\n\n", 1)[0].split(b"\n"):
            key, _, value = line.partition(b" ")
            if key == b"tree":
                tree = value
            elif key == b"parent":
                parents.append(value)
            elif key == b"committer":
                when = int(value.rsplit(b" ", 2)[-2])
        found = self.heads[sha] = (tree, parents, when)
        return found

    def time(self, sha: bytes) -> int:
        return self.head(sha)[2]

    def blob_of(self, sha: bytes) -> bytes | None:
        if sha not in self.blobs:
            self.blobs[sha] = self._lookup(self.head(sha)[0], 0)
        return self.blobs[sha]

    def _lookup(self, tree_id: bytes, depth: int) -> bytes | None:
        """The file's blob under ``tree_id`` (the tree at folder ``depth`` of its path); a
        folder's tree that a parent shares is looked up once."""
        key = (tree_id, depth)
        if key in self.trees:
            return self.trees[key]
        kind, raw = self.objects.get_raw(oid(tree_id))
        if kind != Tree.type_num:
            raise VersionStoreError(f"the git object {tree_id.decode('ascii', 'replace')} should be a tree")
        part, last = self.parts[depth], depth == len(self.parts) - 1
        found: bytes | None = None
        for name, mode, child in parse_tree(raw, self.oid_length):
            if name != part:
                continue
            if last and stat.S_ISREG(mode):
                found = child
            elif not last and stat.S_ISDIR(mode):
                found = self._lookup(child, depth + 1)
            break
        self.trees[key] = found
        return found

    def text(self, blob: bytes) -> list[bytes]:
        if blob not in self.lines:
            kind, raw = self.objects.get_raw(oid(blob))
            if kind != Blob.type_num:
                raise VersionStoreError(f"the git object {blob.decode('ascii', 'replace')} should be a file (blob)")
            self.lines[blob] = split_lines(raw)
        return self.lines[blob]

    def parents(self, sha: bytes) -> list[bytes]:
        if sha in self.store.shallow:
            return []  # the oldest commit of a shallow clone: what it holds is its own
        return list(self.head(sha)[1])


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
    suspects: dict[bytes, list[Run]] = {start: [(0, 0, len(final))]} if final else {}
    queue: list[tuple[int, int, bytes]] = [(-walk.time(start), 0, start)]
    order = 1
    while queue:
        _, _, sha = heapq.heappop(queue)
        pending = suspects.pop(sha, None)
        if not pending:
            continue  # reached again through another child after its suspects were passed on
        blob = walk.blob_of(sha)
        assert blob is not None
        handed: dict[bytes, list[Run]] = {}
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
                passed, pending = _hand_over(pending, matching_blocks(walk.text(parent_blob), mine))
                if passed:
                    handed.setdefault(parent, []).extend(passed)
        for _, final_at, length in pending:
            owner[final_at : final_at + length] = [sha] * length
        for parent, runs in handed.items():
            suspects.setdefault(parent, []).extend(runs)
            suspects[parent].sort()
            heapq.heappush(queue, (-walk.time(parent), order, parent))
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
