"""Pruning after a rewrite (``dream forget``): what refs, HEAD, reflogs, pseudo-refs and the
index still reach is kept, every other object is deleted, loose or packed (a pack holding any is
written again with only what is kept); the reflog and pseudo-ref readers the rewrite shares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dulwich.index import ConflictedIndexEntry, Index
from dulwich.objects import Commit, ShaFile, Tag, Tree
from dulwich.pack import Pack, PackFileDisappeared
from dulwich.repo import Repo

from dream_memory.adapters import fsutil
from dream_memory.adapters.git.base import oid, repacked
from dream_memory.core.bounded import split_lines

GITLINK = 0o160000
SHA_ID = re.compile(rb"\b[0-9a-f]{40}\b")
PSEUDO_REFS = ("ORIG_HEAD", "FETCH_HEAD")


def reflog_files(repo: Repo) -> list[Path]:
    """Every reflog: the repository's, and each linked worktree's (worktrees/<name>/logs/HEAD)."""
    control = Path(repo.commondir())
    folders = [control / "logs", *sorted((control / "worktrees").glob("*/logs"))]
    return [p for logs in folders if logs.is_dir() for p in sorted(logs.rglob("*")) if p.is_file()]


def reflogs(repo: Repo) -> Iterator[tuple[Path, list[tuple[bytes, bytes]]]]:
    for path in reflog_files(repo):
        pairs: list[tuple[bytes, bytes]] = []
        for line in path.read_bytes().splitlines():
            fields = line.split(b" ", 2)
            if len(fields) == 3 and SHA_ID.fullmatch(fields[0]) and SHA_ID.fullmatch(fields[1]):
                pairs.append((fields[0], fields[1]))
        yield path, pairs


@dataclass(frozen=True)
class PruneResult:
    loose: int
    packs: int
    objects: int


def _starts(repo: Repo) -> list[bytes]:
    """What refs, HEAD, reflogs, pseudo-refs and the index name."""
    pending: list[bytes] = []
    refs = repo.refs
    for name in refs.allkeys():
        try:
            pending.append(bytes(refs[name]))
        except KeyError:
            continue
    for _, pairs in reflogs(repo):
        for old, new in pairs:
            pending += [old, new]
    for path in pseudo_files(repo):
        text = fsutil.read_text(path)
        if text:
            pending += SHA_ID.findall(text.encode("ascii", "replace"))
    for path in index_files(repo):
        for _, entry in Index(str(path)).items():
            if isinstance(entry, ConflictedIndexEntry):
                pending += [bytes(e.sha) for e in (entry.ancestor, entry.this, entry.other) if e is not None]
            else:
                pending.append(bytes(entry.sha))
    return pending


def pseudo_files(repo: Repo) -> list[Path]:
    """Files naming commits outside refs: ORIG_HEAD, FETCH_HEAD, and each linked worktree's HEAD
    (git's gc keeps what they name, so the rewrite maps them)."""
    control = Path(repo.commondir())
    found = [control / name for name in PSEUDO_REFS]
    for worktree in linked_worktrees(repo):
        found += [control / "worktrees" / worktree / name for name in ("HEAD", *PSEUDO_REFS)]
    return [p for p in found if p.is_file()]


def index_files(repo: Repo) -> list[Path]:
    """This work tree's index and each linked worktree's."""
    control = Path(repo.commondir())
    found = [Path(repo.index_path())] + [control / "worktrees" / w / "index" for w in linked_worktrees(repo)]
    return [p for p in dict.fromkeys(found) if p.is_file()]


def reachable(repo: Repo) -> set[bytes]:
    """What refs, HEAD, reflogs, pseudo-refs and the index reach: what git's gc would keep
    (everything else is what the purge must leave behind)."""
    pending = _starts(repo)
    seen: set[bytes] = set()
    store = repo.object_store
    while pending:
        sha = pending.pop()
        if sha in seen or sha == b"0" * 40:
            continue
        seen.add(sha)
        try:
            obj = store[oid(sha)]
        except KeyError:
            continue
        if isinstance(obj, Commit):
            pending.append(bytes(obj.tree))
            pending += [bytes(p) for p in obj.parents]
        elif isinstance(obj, Tree):
            pending += [bytes(e.sha) for e in obj.items() if e.mode != GITLINK]
        elif isinstance(obj, Tag):
            pending.append(bytes(obj.object[1]))
    return seen


def prune(repo_path: str) -> PruneResult:
    """Delete every object nothing reaches: loose ones, and packs holding any are written again
    with only what is kept. Safe to repeat after a crash: a new pack lands before an old one goes.
    Packs another process deletes meanwhile (git gc) are RepositoryChanged (exit 75)."""
    try:
        return _prune(repo_path)
    except PackFileDisappeared as exc:
        raise repacked() from exc


def _prune(repo_path: str) -> PruneResult:
    with Repo(repo_path) as repo:
        keep = reachable(repo)
        store = repo.object_store
        loose = 0
        for sha in list(store._iter_loose_objects()):
            if bytes(sha) not in keep:
                store.delete_loose_object(sha)
                loose += 1
        dropped = 0
        pack_dir = Path(store.pack_dir)
        replaced: list[Pack] = []
        kept: dict[bytes, ShaFile] = {}
        for pack in list(store.packs):
            shas = [bytes(s) for s in pack.index]  # hex ids
            gone = [s for s in shas if s not in keep]
            if not gone:
                continue
            kept.update((s, store[oid(s)]) for s in shas if s in keep)
            dropped += len(gone)
            replaced.append(pack)
        # One pack for what the old ones keep, written before any of them goes: a pack deleted
        # while the store still caches it made the next add_objects read its .idx again (dulwich
        # names every cached pack to find a duplicate), PackFileDisappeared, a traceback.
        if kept:
            store.add_objects([(obj, None) for obj in kept.values()])
        for pack in replaced:
            base = Path(pack._basename)
            pack.close()
            for suffix in (".keep", ".bitmap", ".rev", ".mtimes", ".promisor", ".idx", ".pack"):
                fsutil.remove(base.with_suffix(suffix), site="forget.prune")
        rewritten = len(replaced)
        objects_info = Path(store.path) / "info"
        for stale in (objects_info / "commit-graph", pack_dir / "multi-pack-index", objects_info / "packs"):
            fsutil.remove(stale, site="forget.prune")
        graphs = objects_info / "commit-graphs"
        if graphs.is_dir():
            for path in graphs.iterdir():
                fsutil.remove(path, site="forget.prune")
            graphs.rmdir()
        return PruneResult(loose=loose, packs=rewritten, objects=loose + dropped)


def remotes(repo: Repo) -> list[str]:
    """The names of the configured remotes."""
    config = repo.get_config()
    names = []
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            names.append(section[1].decode("utf-8", "replace"))
    return sorted(names)


def alternates(repo: Repo) -> list[str]:
    path = Path(repo.object_store.path) / "info" / "alternates"
    text = fsutil.read_text(path)
    return [line for line in split_lines(text or "") if line.strip() and not line.startswith("#")]


def linked_worktrees(repo: Repo) -> list[str]:
    """Names of the linked worktrees (``git worktree add``): their HEADs and indexes are theirs."""
    folder = Path(repo.commondir()) / "worktrees"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
