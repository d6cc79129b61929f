"""What a restore does to each file, decided before anything is written (``app.versioning``
runs it): the inverse of each commit merged into the file as it is now, newest commit first, as
``git revert`` does, and where ``--replay`` moves the Dream cursor."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dream_memory.adapters.git import CommitInfo, GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core import layout
from dream_memory.core.cursor_truth import cursor_commit
from dream_memory.core.merge import merge_texts
from dream_memory.core.provenance import KIND_DREAM, KIND_INIT, commit_kind
from dream_memory.core.versions import split_range
from dream_memory.errors import UsageError


@dataclass(frozen=True)
class Revert:
    """What undoing one commit does to one file it touched."""

    data: bytes | None  # the file's content after the restore (None: no file)
    conflict: tuple[tuple[int, int], ...] | None = None  # None: clean; (): the whole file
    why: str = ""  # for a whole-file conflict: what happened to the file since
    merged: bool = False  # the file changed since the commit, and the restore kept (some of) that work

    def describe(self, rel: str) -> str:
        if self.conflict is None:
            return rel
        if not self.conflict:
            return f"{rel} ({self.why})"
        return f"{rel} " + ", ".join(line_range(r) for r in self.conflict)


def line_range(span: tuple[int, int]) -> str:
    first, last = span
    if last < first:
        return f"before line {first}"
    return f"line {first}" if first == last else f"lines {first}-{last}"


def revert_file(before: bytes | None, after: bytes | None, now: bytes | None, *, force: bool) -> Revert:
    """The inverse of the change before -> after, merged into the file as it is now (``git
    revert``): base = after, theirs = before, ours = now (None: no file)."""
    if now == after:
        return Revert(before)
    if now is None:
        # Gone since (now == after is the case above): by hand, or beyond a symlinked folder,
        # which is not the workspace. Which it is cannot be told here, so it is a conflict.
        return Revert(before, (), "deleted since")
    try:
        texts = [(b or b"").decode("utf-8") for b in (after, now, before)]
    except UnicodeDecodeError:
        return Revert(before if force else now, (), "not text, changed since")
    result = merge_texts(*texts, prefer="theirs" if force else "none")
    data: bytes | None = result.text.encode("utf-8")
    if before is None and not result.text:
        data = None  # it created the file, and nothing but its lines is left in it
    if not result.conflicts:
        return Revert(data, merged=data != before)
    if after is None and before is not None:
        return Revert(data if force else now, (), "a different file is there now")
    return Revert(data if force else now, result.conflicts, merged=force and data != before)


@dataclass(frozen=True)
class Replay:
    """Where ``--replay`` moves the Dream cursor, and what the next run then reads."""

    cursor: int | None
    write: bool = False  # the cursor file changes in the revert commit
    entries: int | None = None
    archived: int | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def plan(cls, span: tuple[int, int] | None, dream_cursor: int | None, history: HistoryLog | None) -> Replay:
        if span is None:
            return cls(dream_cursor)
        notes: list[str] = []
        cursor, write = span[0] - 1, True
        if dream_cursor is not None and dream_cursor <= cursor:
            notes.append(f"the Dream cursor is already at {dream_cursor}, before that range")
            cursor, write = dream_cursor, False
        if history is None:
            return cls(cursor, write, notes=tuple(notes))
        # What the next run reads: everything after the new cursor, the commit's range first.
        scan = history.scan(report=False)
        in_file = set(scan.entries)
        wanted = history.entries_after(cursor or 0, scan)
        if not any(span[0] <= e.cursor <= span[1] for e in wanted):
            notes.append(f"no entry of {span[0]}..{span[1]} is left in history.jsonl or memory/archive/")
        return cls(cursor, write, len(wanted), sum(1 for e in wanted if e not in in_file), tuple(notes))


def commits_to_revert(git: GitStore, rev: str) -> list[CommitInfo]:
    """``rev`` is one commit, or ``A..B`` (B empty: HEAD): the commits after A up to B along
    first parents, newest first, as ``git revert A..B`` takes them."""
    span = split_range(rev)
    if span is None:
        return [git.info(git.resolve(rev), with_files=False)]
    old_rev, new_rev = span
    if not old_rev.strip():
        raise UsageError(f"{rev!r}: a range needs its older end, as in A..B or A.. (A..HEAD)")
    old, new = git.resolve(old_rev), git.resolve(new_rev or "HEAD")
    found: list[CommitInfo] = []
    for commit in git.first_parent_chain(new):
        sha = commit.id.decode("ascii")
        if sha == old:
            break
        found.append(git.info(sha, with_files=False))
    else:
        raise UsageError(f"{old[:10]} is not before {new[:10]} on its first-parent line, so {rev!r} names no commits")
    if not found:
        raise UsageError(f"{rev!r} names no commits: both ends are the same commit")
    return found


# A revert names what it undid: ours with a ``Reverts: <sha>`` trailer per commit, git's own
# ``git revert`` with ``This reverts commit <sha>.``
# The trailer of a batch that proposed a change already waiting for review (landing.py): undoing the
# batch that first held it leaves it held for this one. A batch that held a change says
# "Dream-Held: ID path:lines".
HELD, HELD_AGAIN = "Dream-Held", "Dream-Held-Again"
_HELD_AGAIN = re.compile(rf"^{HELD_AGAIN}: (\S+)$", re.MULTILINE)
_HELD_CLAIMS = re.compile(rf"^(?:{HELD}|{HELD_AGAIN}): (\S+)", re.MULTILINE)
_REVERTS = re.compile(r"^(?:Reverts: |This reverts commit )([0-9a-f]{40})\b", re.MULTILINE)


def reverted_by(message: str) -> list[str]:
    """The commits a revert commit's message says it undid."""
    return _REVERTS.findall(message)


def undone_in_history(git: GitStore, oldest: str) -> dict[str, str]:
    """Commit -> the revert in HEAD's first-parent history that undid it (back to ``oldest``).

    A revert that a later revert undid no longer counts (a restore of a restore brings the
    commit back): walking newest first sees the later revert before the one it undid."""
    undone: dict[str, str] = {}
    for commit in git.first_parent_chain():
        sha = commit.id.decode("ascii")
        if sha not in undone:
            for target in reverted_by(commit.message.decode("utf-8", errors="replace")):
                undone.setdefault(target, sha)
        if sha == oldest:
            break
    return undone


def is_batch(info: CommitInfo) -> bool:
    """A commit whose lines Dream wrote: a batch (``dream: 12..18: ...``, with its
    ``Dream-Range``; ``dream: held 12..18 ...`` when the policy held all of it) or a held change
    a person accepted (``dream: apply held ...``)."""
    if info.subject.startswith("dream: revert"):
        return False
    if info.subject.startswith("dream: held "):
        return True
    return commit_kind(info.message) == KIND_DREAM or (
        info.subject.startswith("dream: ") and "Dream-Range" in info.trailers()
    )


def batches_in_range(git: GitStore, commits: list[CommitInfo]) -> tuple[list[CommitInfo], list[tuple[CommitInfo, str]]]:
    """Of a range's commits, the Dream batches to revert, and every other one with why it is
    skipped: a range undoes what Dream learnt, never a person's edits (``memory: manual edits``,
    ``memory: init``, their own commits) nor a restore, and a batch a later revert already undid
    stays undone, so running the same range restore twice changes nothing the second time."""
    undone = undone_in_history(git, commits[-1].sha)
    kept: list[CommitInfo] = []
    skipped: list[tuple[CommitInfo, str]] = []
    for info in commits:
        if info.sha in undone:
            skipped.append((info, f"already undone by {undone[info.sha][:10]}"))
        elif info.subject.startswith("dream: revert") or reverted_by(info.message):
            skipped.append((info, "a restore (revert) commit"))
        elif is_batch(info):
            kept.append(info)
        elif info.subject.startswith("dream: ") or cursor_commit(info.message) == "sets":
            # `memory: dream cursor`: dream init recording the cursor in an existing repository
            skipped.append((info, "Dream's bookkeeping, not a batch's lines"))
        elif commit_kind(info.message) == KIND_INIT:
            skipped.append((info, "memory's first commit, not a batch"))
        else:
            skipped.append((info, "a person's edits, not Dream's"))
    return kept, skipped


@dataclass
class Plan:
    """Every file the commits touched, after reverting them one by one, newest first."""

    changes: dict[str, bytes | None] = field(default_factory=dict)
    conflicts: list[tuple[CommitInfo, str, Revert]] = field(default_factory=list)
    merged: set[str] = field(default_factory=set)

    @property
    def touched(self) -> list[str]:
        return list(self.changes)

    def forced_lines(self) -> dict[str, list[tuple[int, int]]]:
        found: dict[str, list[tuple[int, int]]] = {}
        for _, rel, revert in self.conflicts:
            found.setdefault(rel, []).extend(revert.conflict or ())
        return found


def plan_reverts(git: GitStore, commits: list[CommitInfo], *, force: bool) -> Plan:
    """Each commit's inverse merged into what the newer reverts left (the disk for the first)."""
    plan = Plan()
    for info in commits:
        touched = [
            p for p in git.changed_paths(info.parent, info.sha) if git.is_versioned(p) and not layout.is_dream_owned(p)
        ]
        before = git.entries_at(info.parent, touched)
        after = git.entries_at(info.sha, touched)
        for rel in touched:
            revert = revert_file(
                git.blob(before[rel][1]) if rel in before else None,
                git.blob(after[rel][1]) if rel in after else None,
                plan.changes[rel] if rel in plan.changes else git.read_file(rel),
                force=force,
            )
            if revert.conflict is not None:
                plan.conflicts.append((info, rel, revert))
            if revert.merged:
                plan.merged.add(rel)
            plan.changes[rel] = revert.data
    return plan


def joint_range(commits: list[CommitInfo]) -> tuple[int, int] | None:
    """The history range the commits consumed together (their ``Dream-Range`` trailers)."""
    spans = [span for info in commits if (span := cursor_range(info)) is not None]
    if not spans:
        return None
    return min(s[0] for s in spans), max(s[1] for s in spans)


def cursor_range(info: CommitInfo) -> tuple[int, int] | None:
    """The history range a Dream commit consumed, from its ``Dream-Range: a..b`` trailer."""
    raw = info.trailers().get("Dream-Range")
    if not raw or ".." not in raw:
        return None
    first, _, last = raw.partition("..")
    if not (first.strip().isdigit() and last.strip().isdigit()):
        return None
    return int(first), int(last)


def held_claimed_by(git: GitStore, commits: list[CommitInfo]) -> tuple[list[str], list[str]]:
    """The held changes the commits stand for: those they put under memory/.dream_held/, and
    those they asked for again while the change already waited (not held a second time)."""
    again = (held_id for info in commits for held_id in _HELD_AGAIN.findall(info.message))
    return held_made_by(git, commits), list(dict.fromkeys(again))


def held_claimed_elsewhere(git: GitStore, commits: list[CommitInfo], ids: list[str]) -> dict[str, str]:
    """Of ``ids``, those a batch that stays (in HEAD's history, not among ``commits``, not undone)
    held or asked for again: id -> that batch. A message scan, newest first: a revert is seen
    before what it undid, and one a later revert undid no longer counts, nor one of ``commits``
    (being undone itself: what it undid comes back)."""
    leaving = {info.sha for info in commits}
    wanted, found, undone = set(ids), dict[str, str](), set[str]()
    for commit in git.first_parent_chain():
        if not wanted - found.keys():
            break
        sha = commit.id.decode("ascii")
        if sha in undone or sha in leaving:
            continue
        message = commit.message.decode("utf-8", errors="replace")
        undone.update(reverted_by(message))
        for held_id in _HELD_CLAIMS.findall(message):
            if held_id in wanted:
                found.setdefault(held_id, sha)
    return found


def held_made_by(git: GitStore, commits: list[CommitInfo]) -> list[str]:
    """The ids of the held changes (and held batches) the commits put under memory/.dream_held/:
    undoing a batch takes what it held with it, so review never offers a change of a batch that
    was reverted."""
    prefix = layout.DREAM_HELD_DIR + "/"
    found: list[str] = []
    for info in commits:
        for path in git.changed_paths(info.parent, info.sha):
            if path.startswith(prefix) and git.read_at(info.sha, path) is not None:
                held_id = path[len(prefix) :].partition("/")[0]
                if held_id and held_id not in found:
                    found.append(held_id)
    return found
