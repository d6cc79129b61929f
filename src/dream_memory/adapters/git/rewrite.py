"""Rewriting every commit of a repository (``dream forget``): blobs, paths, messages, refs,
reflogs, and the old objects pruned, loose and packed.

Every commit reachable from any ref (branches, tags, remote-tracking refs, notes, the stash),
from HEAD, from a reflog or from ORIG_HEAD/FETCH_HEAD is rewritten, parents first, with the
rules the caller gives; a commit whose content and parents do not change keeps its id. Author,
committer and dates are kept, so the rewrite is deterministic: run again on a half-rewritten
repository (some refs moved, others not) it produces the same commits, which is what makes an
interrupted purge finish on a rerun. Signatures (gpgsig, mergetag) of changed commits and tags
are dropped: they signed the old content.

Then the refs move (compare-and-set), packed-refs and the reflogs are rewritten through the
mapping, and ``prune`` keeps exactly what the new refs, reflogs and the index reach: loose
objects outside that set are deleted, and a pack holding any of them is written again without
them. The commit-graph and multi-pack-index files name old commits and are removed (git works
without them and rebuilds them on its next gc).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.objects import Blob, Commit, ShaFile, Tag, Tree
from dulwich.pack import PackFileDisappeared
from dulwich.refs import Ref
from dulwich.repo import Repo

from dream_memory.adapters import fsutil
from dream_memory.adapters.git.base import DAMAGE, is_damage, is_object_id, oid, repacked
from dream_memory.adapters.git.prune import GITLINK, SHA_ID, pseudo_files, reflog_files, reflogs
from dream_memory.errors import VersionStoreError

_HEXISH = re.compile(rb"\b[0-9a-f]{7,40}\b")
NOTES = b"refs/notes/"


@dataclass(frozen=True)
class Rules:
    """How one blob, path name and message change. Paths are workspace-relative."""

    in_scope: Callable[[str], bool]  # the files this rewrite may change
    blob: Callable[[str, bytes], bytes | None]  # None: the file goes
    name: Callable[[str], str]
    message: Callable[[bytes], bytes]
    holds: Callable[[bytes], bool]  # the data holds what is purged (for files out of scope)


@dataclass
class RewritePlan:
    """What a rewrite changes (``write=False``) or changed."""

    commits: int = 0  # commits walked
    holding: list[str] = field(default_factory=list)  # old commits whose own tree or message changed
    rewritten: int = 0  # commits with a new id (their own change, or a parent's)
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)  # ref -> (old, new)
    blobs: int = 0  # distinct file versions changed
    outside: set[str] = field(default_factory=set)  # paths out of scope that hold the value
    new_objects: list[ShaFile] = field(default_factory=list)
    mapping: dict[bytes, bytes] = field(default_factory=dict)  # old object id -> new


def check_refs(repo: Repo) -> None:
    """Refuse, before anything is purged, a ref that holds no object id: the rewrite starts from
    every ref, and a garbage one failed deep in dulwich (an AssertionError traceback) after the
    memory files were already purged."""
    refs = repo.refs
    for name in refs.allkeys():
        try:
            value = bytes(refs[name])
        except KeyError:
            continue
        if not is_object_id(value):
            ref = bytes(name).decode("utf-8", "replace")
            raise VersionStoreError(
                f"the git repository at {repo.path} is damaged: the ref {ref} holds {value[:40]!r},"
                " not an object id; nothing was changed",
                hint=f"repair or delete that ref (`git update-ref -d {ref}`), then run dream forget again",
            )


class Rewriter:
    """One rewrite of one repository (see the module docstring)."""

    def __init__(self, repo: Repo, prefix: str, rules: Rules) -> None:
        self.repo = repo
        self.store = repo.object_store
        self.prefix = prefix.encode("utf-8") if prefix else b""
        self.rules = rules
        self.plan = RewritePlan()
        self._trees: dict[tuple[bytes, bytes], bytes | None] = {}
        self._blobs: dict[tuple[bytes, str], bytes | None] = {}
        self._seen_outside: set[tuple[bytes, str]] = set()

    # --- where to start ------------------------------------------------------------------------

    def tips(self, *, notes: bool | None = None) -> list[bytes]:
        """Every object a ref, HEAD, a reflog or a pseudo-ref names; ``notes``: only those of
        notes refs (True) or only the others (False)."""
        found: list[bytes] = []
        refs = self.repo.refs
        for name in refs.allkeys():
            if notes is not None and bytes(name).startswith(NOTES) != notes:
                continue
            try:
                found.append(bytes(refs[name]))
            except KeyError:
                continue
        logs = Path(self.repo.commondir()) / "logs"
        for path, entries in reflogs(self.repo):
            is_notes = path.is_relative_to(logs / "refs" / "notes")
            if notes is not None and is_notes != notes:
                continue
            for old, new in entries:
                found += [old, new]
        if notes:
            return [sha for sha in dict.fromkeys(found) if sha != b"0" * 40]
        for path in pseudo_files(self.repo):
            data = fsutil.read_text(path)
            if data:
                found += SHA_ID.findall(data.encode("ascii", "replace"))
        return [sha for sha in dict.fromkeys(found) if sha != b"0" * 40]

    # --- rewriting -----------------------------------------------------------------------------

    def run(self) -> RewritePlan:
        try:
            for sha in self._commit_order(self.tips(notes=False)):
                self._rewrite_commit(sha)
            # Notes last: their trees are named by the ids of the commits they annotate.
            for sha in self._commit_order(self.tips(notes=True)):
                self._rewrite_commit(sha, notes=True)
            for sha in self.tips():
                self.map_object(sha)
        except DAMAGE as exc:
            if not is_damage(exc):
                raise
            raise VersionStoreError(
                f"the git repository at {self.repo.path} has an object that cannot be read ({exc}); "
                "nothing was changed",
                hint="`git fsck` names it; repair the repository, then run the purge again",
            ) from exc
        return self.plan

    def _get(self, sha: bytes) -> ShaFile | None:
        try:
            return self.store[oid(sha)]
        except KeyError:
            return None  # beyond a shallow clone's boundary, or a pseudo-ref's stale object

    def _commit_order(self, tips: Iterable[bytes]) -> Iterator[bytes]:
        """Commits, parents before children (iterative: histories are deep)."""
        done: set[bytes] = set()
        for tip in tips:
            obj = self._get(tip)
            while isinstance(obj, Tag):
                obj = self._get(bytes(obj.object[1]))
            if not isinstance(obj, Commit) or obj.id in done:
                continue
            stack: list[tuple[bytes, bool]] = [(bytes(obj.id), False)]
            while stack:
                sha, expanded = stack.pop()
                if sha in done:
                    continue
                if expanded:
                    done.add(sha)
                    yield sha
                    continue
                commit = self._get(sha)
                if not isinstance(commit, Commit):
                    done.add(sha)
                    continue
                stack.append((sha, True))
                stack.extend((bytes(p), False) for p in commit.parents if bytes(p) not in done)

    def _add(self, obj: ShaFile) -> bytes:
        self.plan.new_objects.append(obj)
        return bytes(obj.id)

    def _rewrite_commit(self, sha: bytes, *, notes: bool = False) -> None:
        commit = self._get(sha)
        assert isinstance(commit, Commit)
        self.plan.commits += 1
        tree = self._notes_tree(bytes(commit.tree)) if notes else self._tree(bytes(commit.tree), b"")
        if tree is None:
            tree = self._add(Tree())
        parents = [self.plan.mapping.get(bytes(p), bytes(p)) for p in commit.parents]
        message = self._map_ids(self.rules.message(commit.message))
        author = self.rules.message(commit.author)
        committer = self.rules.message(commit.committer)
        own = (tree, message, author, committer) != (commit.tree, commit.message, commit.author, commit.committer)
        if not own and parents == [bytes(p) for p in commit.parents]:
            return
        new = commit.copy()
        assert isinstance(new, Commit)
        new.tree = oid(tree)
        new.parents = [oid(p) for p in parents]
        new.message, new.author, new.committer = message, author, committer
        new.gpgsig = None
        new.mergetag = []
        if own:
            self.plan.holding.append(sha.decode("ascii"))
        self.plan.rewritten += 1
        self.plan.mapping[sha] = self._add(new)

    def _map_ids(self, message: bytes) -> bytes:
        """Commit ids a message names ("Reverts: <id>", "revert 1a2b3c4d5e") follow the rewrite:
        a full id through the mapping, an abbreviated one (7+ hex digits) when it names exactly
        one rewritten commit, abbreviated to the same length."""
        if not self.plan.mapping or not _HEXISH.search(message):
            return message

        def one(match: re.Match[bytes]) -> bytes:
            token = match.group(0)
            if len(token) == 40:
                return self.plan.mapping.get(token, token)
            hits = [old for old in self.plan.mapping if old.startswith(token)]
            return self.plan.mapping[hits[0]][: len(token)] if len(hits) == 1 else token

        return _HEXISH.sub(one, message)

    def _notes_tree(self, sha: bytes) -> bytes | None:
        """A notes tree: each note's text purged, and its name (the annotated object's id, in
        any fan-out) mapped to the rewritten id, written flat (git reads either)."""
        key = (sha, b"\0notes")
        if key in self._trees:
            return self._trees[key]
        notes: dict[bytes, tuple[int, bytes]] = {}
        self._collect_notes(sha, b"", notes)
        out = Tree()
        changed = False
        for name, (mode, blob_sha) in notes.items():
            new_name = self.plan.mapping.get(name, name) if SHA_ID.fullmatch(name) else name
            new_blob = blob_sha
            blob = self._get(blob_sha)
            if isinstance(blob, Blob):
                data = blob.as_raw_string()
                purged = self.rules.message(data)
                if purged != data:
                    new_blob = self._add(Blob.from_string(purged))
                    self.plan.blobs += 1
            changed |= new_name != name or new_blob != blob_sha
            out.add(new_name, mode, oid(new_blob))
        result: bytes | None = (self._add(out) if out.items() else None) if changed else sha
        self._trees[key] = result
        return result

    def _collect_notes(self, sha: bytes, prefix: bytes, into: dict[bytes, tuple[int, bytes]]) -> None:
        tree = self._get(sha)
        if not isinstance(tree, Tree):
            return
        for entry in tree.items():
            name = prefix + bytes(entry.path)
            if entry.mode & 0o170000 == 0o040000:
                self._collect_notes(bytes(entry.sha), name, into)
            else:
                into[name] = (entry.mode, bytes(entry.sha))

    def _rel(self, repo_path: bytes) -> str | None:
        if not self.prefix:
            return repo_path.decode("utf-8", "surrogateescape")
        if repo_path.startswith(self.prefix + b"/"):
            return repo_path[len(self.prefix) + 1 :].decode("utf-8", "surrogateescape")
        return None

    def _tree(self, sha: bytes, path: bytes) -> bytes | None:
        """The tree's new id (None: nothing left in it)."""
        key = (sha, path)
        if key in self._trees:
            return self._trees[key]
        tree = self._get(sha)
        if not isinstance(tree, Tree):
            return sha
        out = Tree()
        changed = False
        for entry in tree.items():
            name, mode, child = bytes(entry.path), entry.mode, bytes(entry.sha)
            new_name, new_child = self._entry(name, mode, child, path + b"/" + name if path else name)
            if new_child is None:
                changed = True
                continue
            changed |= new_child != child or new_name != name
            out.add(new_name, mode, oid(new_child))
        result: bytes | None = sha
        if changed:
            result = self._add(out) if out.items() else None
        self._trees[key] = result
        return result

    def _entry(self, name: bytes, mode: int, child: bytes, full: bytes) -> tuple[bytes, bytes | None]:
        """One tree entry's new name and id (None: it goes)."""
        if mode == GITLINK:
            return name, child
        if mode & 0o170000 == 0o040000:
            return name, self._tree(child, full)
        rel = self._rel(full)
        if rel is None:  # outside the workspace: never changed, only reported
            self._scan(child, full.decode("utf-8", "surrogateescape"))
            return name, child
        new_child = self._blob(child, rel)
        if new_child is not None and self.rules.in_scope(rel):
            renamed = self.rules.name(rel)
            if renamed != rel:
                name = renamed.rsplit("/", 1)[-1].encode("utf-8", "surrogateescape")
        return name, new_child

    def _scan(self, sha: bytes, path: str) -> None:
        if (sha, path) in self._seen_outside:
            return
        self._seen_outside.add((sha, path))
        blob = self._get(sha)
        if isinstance(blob, Blob) and self.rules.holds(blob.as_raw_string()):
            self.plan.outside.add(path)

    def _blob(self, sha: bytes, rel: str) -> bytes | None:
        key = (sha, rel)
        if key in self._blobs:
            return self._blobs[key]
        blob = self._get(sha)
        result: bytes | None = sha
        if isinstance(blob, Blob):
            data = blob.as_raw_string()
            if not self.rules.in_scope(rel):
                if self.rules.holds(data):
                    self.plan.outside.add(rel)
            else:
                new = self.rules.blob(rel, data)
                if new is None:
                    result = None
                    self.plan.blobs += 1
                elif new != data:
                    result = self._add(Blob.from_string(new))
                    self.plan.blobs += 1
        self._blobs[key] = result
        return result

    def map_object(self, sha: bytes) -> bytes:
        """The new id of what a ref names: a commit, or an annotated tag (rewritten over it)."""
        if sha in self.plan.mapping:
            return self.plan.mapping[sha]
        obj = self._get(sha)
        if isinstance(obj, Tag):
            target = self.map_object(bytes(obj.object[1]))
            message = self._map_ids(self.rules.message(obj.message or b""))
            if target == bytes(obj.object[1]) and message == (obj.message or b""):
                return sha
            new = obj.copy()
            assert isinstance(new, Tag)
            new.object = (obj.object[0], oid(target))
            new.message = message
            new.signature = None
            self.plan.mapping[sha] = self._add(new)
            return self.plan.mapping[sha]
        if isinstance(obj, Tree):
            return self._tree(sha, b"") or sha
        return sha


# --- applying a plan ------------------------------------------------------------------------------


def store_objects(repo: Repo, plan: RewritePlan) -> None:
    """The new objects into the object store, as one pack, before any ref names them."""
    if plan.new_objects:
        fsutil.checkpoint("forget.objects", Path(repo.object_store.path))
        unique = {bytes(o.id): o for o in plan.new_objects}
        try:
            repo.object_store.add_objects([(o, None) for o in unique.values()])
        except PackFileDisappeared as exc:  # a pack this store had read was deleted (git gc)
            raise repacked() from exc


def move_refs(repo: Repo, rewriter: Rewriter) -> dict[str, tuple[str, str]]:
    """Every ref (and a detached HEAD) to its rewritten object, compare-and-set; packed-refs
    rewritten through the mapping. Returns ref -> (old, new) of the refs moved."""
    moved: dict[str, tuple[str, str]] = {}
    refs = repo.refs
    control = Path(repo.commondir())
    for name in sorted(refs.allkeys()):
        raw = refs.read_ref(name)
        if raw is None or raw.startswith(b"ref: "):
            continue  # symbolic (HEAD on a branch): it follows its branch
        old = bytes(raw)
        new = rewriter.map_object(old)
        if new == old:
            continue
        fsutil.checkpoint("forget.ref", control / name.decode("utf-8", "surrogateescape"))
        if not refs.set_if_equals(name, oid(old), oid(new)):
            raise VersionStoreError(
                f"{name.decode('utf-8', 'replace')} moved while the purge was rewriting it; nothing is lost",
                hint="run the same dream forget again: it finishes the rewrite",
            )
        moved[name.decode("utf-8", "replace")] = (old.decode("ascii"), new.decode("ascii"))
    _map_file(control / "packed-refs", rewriter.plan.mapping)
    for path in pseudo_files(repo):
        _map_file(path, rewriter.plan.mapping)
    shallow = control / "shallow"
    _map_file(shallow, rewriter.plan.mapping)
    return moved


def _map_file(path: Path, mapping: dict[bytes, bytes]) -> None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    new = SHA_ID.sub(lambda m: mapping.get(m.group(0), m.group(0)), data)
    if new != data:
        fsutil.atomic_write(path, new, site="forget.refs")


def rewrite_reflogs(repo: Repo, rewriter: Rewriter) -> int:
    """Every reflog line's ids mapped and its message purged; returns the lines changed."""
    changed = 0
    for path in reflog_files(repo):
        data = path.read_bytes()
        out: list[bytes] = []
        for line in data.splitlines(keepends=True):
            head, tab, message = line.partition(b"\t")
            fields = head.split(b" ", 2)
            if len(fields) == 3:
                fields[0] = rewriter.map_object(fields[0]) if SHA_ID.fullmatch(fields[0]) else fields[0]
                fields[1] = rewriter.map_object(fields[1]) if SHA_ID.fullmatch(fields[1]) else fields[1]
                fields[2] = rewriter.rules.message(fields[2])
            new = b" ".join(fields) + tab + (rewriter.rules.message(message) if tab else b"")
            changed += new != line
            out.append(new)
        if b"".join(out) != data:
            fsutil.atomic_write(path, b"".join(out), site="forget.reflog")
    return changed


MESSAGE_FILES = ("COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG", "TAG_EDITMSG")


def rewrite_message_files(repo: Repo, rewriter: Rewriter) -> int:
    """The message files git leaves behind (the last commit's message, a merge's or a squash's
    draft), the repository's and each linked worktree's, purged as commit messages are; returns
    the files changed."""
    control = Path(repo.commondir())
    folders = [control, *sorted(p for p in (control / "worktrees").glob("*") if p.is_dir())]
    changed = 0
    for path in (folder / name for folder in folders for name in MESSAGE_FILES):
        data = path.read_bytes() if path.is_file() else b""
        new = rewriter.rules.message(data) if data else data
        if new != data:
            fsutil.atomic_write(path, new, site="forget.message_file")
            changed += 1
    return changed


def ref_exists(repo: Repo, name: str) -> bool:
    return repo.refs.read_ref(Ref(name.encode("utf-8"))) is not None


def planned_refs(repo: Repo, rewriter: Rewriter) -> dict[str, tuple[str, str]]:
    """ref -> (old, new) of the refs a rewrite would move (a dry run: nothing is written)."""
    planned: dict[str, tuple[str, str]] = {}
    for name in sorted(repo.refs.allkeys()):
        raw = repo.refs.read_ref(name)
        if raw is None or raw.startswith(b"ref: "):
            continue
        new = rewriter.map_object(bytes(raw))
        if new != bytes(raw):
            planned[name.decode("utf-8", "replace")] = (bytes(raw).decode("ascii"), new.decode("ascii"))
    return planned
