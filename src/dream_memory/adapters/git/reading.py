"""Reading a repository: commits, trees, blobs, the log and the changes between two commits.

Every tree entry's name is checked before it becomes part of a path (``core.paths``): a crafted
commit naming ``../x`` or ``.git/hooks/...`` is an ``UnsafeTree`` error, never a path we use.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dulwich.objects import Blob, Commit, ShaFile, Tree
from dulwich.refs import Ref

from dream_memory.adapters.git.base import (
    DAMAGE,
    HEADS,
    GitBase,
    git_errors,
    git_iter_errors,
    is_object_id,
    local_branches,
    name_bytes,
    oid,
)
from dream_memory.core import layout
from dream_memory.core.paths import describe, entry_name_problem, path_problem
from dream_memory.core.versions import CommitInfo, FileChange, format_time, unified_diff
from dream_memory.errors import UnknownRevision, UnsafeTree, VersionStoreError


class Reading(GitBase):
    """Commits, trees and blobs of the repository, read and checked."""

    @git_errors
    def head(self) -> str | None:
        """The commit HEAD names; None on a new repository's unborn branch. HEAD naming what is
        not a commit id, or a commit the repository lacks, is damage (exit 1), never "no
        versions yet": a run would start a new history beside the lost one."""
        try:
            sha = self.repo.head()
        except KeyError:
            self._check_unborn()
            return None
        if not is_object_id(sha):
            raise self._broken_ref(f"HEAD's branch holds {sha[:40]!r}, not a commit id")
        if sha not in self.repo.object_store:
            raise self._broken_ref(f"HEAD names the commit {sha.decode('ascii')}, which the repository lacks")
        return sha.decode("ascii")

    def _check_unborn(self) -> None:
        """HEAD names no commit: fine for the unborn branch of a new repository, damage when git
        itself would refuse the repository (HEAD empty, no refs folder, the branch's ref file
        empty or a folder)."""
        target = self.repo.refs.read_ref(Ref(b"HEAD"))
        common = Path(self.repo.commondir())
        if not target:
            raise self._broken_ref("its HEAD is empty")
        if not (common / "refs").is_dir():
            raise self._broken_ref("it has no refs folder")
        if target.startswith(b"ref: "):
            name = target[len(b"ref: ") :].decode("utf-8", errors="replace").strip()
            if os.path.lexists(common / name):
                raise self._broken_ref(f"HEAD's branch {name} holds no commit id ({_what_is_at(common / name)})")

    def _broken_ref(self, problem: str) -> VersionStoreError:
        return VersionStoreError(
            f"the git repository at {self.root} is damaged: {problem}",
            hint=f"`git -C {self.root} status` refuses it too; restore .git from a clone or a backup "
            "(`git reflog` and `git fsck --lost-found` find lost commits), then run again",
        )

    def branch(self) -> str | None:
        """The checked-out branch name, or None when HEAD is detached."""
        target = self.repo.refs.read_ref(Ref(b"HEAD"))
        if target and target.startswith(b"ref: " + HEADS):
            return target[len(b"ref: " + HEADS) :].decode("utf-8")
        return None

    def _object(self, sha: bytes, kind: type[ShaFile], what: str) -> ShaFile:
        """One object of the expected kind; a missing or damaged one is a VersionStoreError."""
        try:
            obj = self.repo[oid(sha)]
        except KeyError:
            raise VersionStoreError(
                f"the git repository at {self.root} lacks the {what} {sha.decode('ascii', 'replace')}",
                hint="`git fsck` shows what is missing; fetch it again from a clone, then run again",
            ) from None
        except DAMAGE as exc:
            raise self._damaged(exc) from exc
        if not isinstance(obj, kind):
            raise VersionStoreError(
                f"the git object {sha.decode('ascii', 'replace')} should be a {what} but is a {obj.type_name.decode()}",
                hint="a damaged or crafted repository: `git fsck` checks it",
            )
        return obj

    def _commit(self, sha: str | bytes) -> Commit:
        text = sha.decode("ascii") if isinstance(sha, bytes) else sha
        try:
            obj = self.repo[oid(text)]
        except (KeyError, ValueError):
            if any(text.encode("ascii", "replace") in self._parents_of(s) for s in self.shallow):
                raise UnknownRevision(
                    f"commit {text[:10]} is not in this shallow clone (it lies beyond its oldest commit)",
                    hint="`git fetch --unshallow` brings the whole history",
                ) from None
            raise UnknownRevision(f"no commit {text}") from None
        except DAMAGE as exc:
            raise self._damaged(exc) from exc
        if not isinstance(obj, Commit):
            raise UnknownRevision(f"{text} is not a commit")
        return obj

    def _parents_of(self, sha: bytes) -> list[bytes]:
        try:
            obj = self.repo[oid(sha)]
        except DAMAGE:
            return []
        return list(obj.parents) if isinstance(obj, Commit) else []

    def _tree(self, tree_id: bytes) -> Tree:
        obj = self._object(tree_id, Tree, "tree")
        assert isinstance(obj, Tree)
        return obj

    def _workspace_tree(self, tree_id: bytes | None) -> bytes | None:
        """The tree of the workspace folder inside a commit's root tree (None: not there)."""
        if tree_id is None or not self.prefix:
            return tree_id
        current: bytes = tree_id
        for part in self.prefix.split("/"):
            tree = self._tree(current)
            key = name_bytes(part)
            if key not in tree:
                return None
            mode, sub = tree[key]
            if not stat.S_ISDIR(mode):
                return None
            current = sub
        return current

    def _unsafe(self, where: str, path: str, problem: str) -> UnsafeTree:
        return UnsafeTree(
            f"{where} holds the path {describe(path)} ({problem}); it would lead outside the workspace or into "
            ".git, so nothing of it is used and nothing was changed",
            hint="a crafted or damaged commit: look at it with `git show --stat`; "
            "dream-memory never writes, deletes or serves such a path",
        )

    def _entries(self, tree_id: bytes, prefix: str, where: str) -> Iterator[tuple[str, int, bytes]]:
        """(workspace-relative path, mode, sha) of every entry of one tree, each name checked
        before it can become part of a path."""
        for item in self._tree(tree_id).iteritems():
            name, mode, sha = item.path, item.mode, item.sha
            assert name is not None and mode is not None and sha is not None
            problem = entry_name_problem(name)
            if problem is not None:
                raise self._unsafe(where, prefix + name.decode("utf-8", "replace"), problem)
            yield prefix + name.decode("utf-8", errors="surrogateescape"), mode, sha

    def _file_entry(self, path: str, where: str) -> bool:
        """True when a regular file at ``path`` may be used; an unsafe versioned path raises."""
        problem = path_problem(path)
        if problem is None:
            return True
        if self.is_versioned(path):
            raise self._unsafe(where, path, problem)
        return False  # a file of an enclosing repository that is not memory: never touched

    def _walk(self, tree_id: bytes, prefix: str, where: str, out: dict[str, tuple[int, bytes]]) -> None:
        for path, mode, sha in self._entries(tree_id, prefix, where):
            if stat.S_ISDIR(mode):
                self._walk(sha, path + "/", where, out)
            elif stat.S_ISREG(mode) and self._file_entry(path, where):
                out[path] = (mode, sha)

    def _tree_files(self, tree_id: bytes | None, where: str = "a commit") -> dict[str, tuple[int, bytes]]:
        """Workspace-relative path -> (mode, blob sha) under the workspace prefix."""
        files: dict[str, tuple[int, bytes]] = {}
        sub = self._workspace_tree(tree_id)
        if sub is not None:
            self._walk(sub, "", where, files)
        return files

    @git_errors
    def files_at(self, sha: str | None) -> dict[str, tuple[int, bytes]]:
        if sha is None:
            return {}
        return self._tree_files(self._commit(sha).tree, f"commit {sha[:10]}")

    @git_errors
    def entries_at(self, sha: str | None, paths: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        """(mode, blob) of those of ``paths`` that are regular files in commit ``sha``.

        Walks only the trees on the way to each path: a commit touches a few files, and reading
        the whole tree of a large repository for them cost most of a commit's time.
        """
        if sha is None:
            return {}
        root = self._commit(sha).tree
        trees: dict[bytes, Tree] = {}

        def tree(tree_id: bytes) -> Tree:
            if tree_id not in trees:
                trees[tree_id] = self._tree(tree_id)
            return trees[tree_id]

        found: dict[str, tuple[int, bytes]] = {}
        for rel in paths:
            entry = self._entry(root, rel, tree)
            if entry is not None and stat.S_ISREG(entry[0]):
                found[rel] = entry
        return found

    def _entry(self, root: bytes, rel: str, tree: Callable[[bytes], Tree]) -> tuple[int, bytes] | None:
        """(mode, object) of whatever ``rel`` names in the tree ``root``: a file, a symlink, a
        folder or a submodule; None when nothing is there or the path is never one of ours."""
        if path_problem(rel) is not None:
            return None  # never a path of ours: nothing of it is read
        *folders, name = self.repo_path(rel).split(b"/")
        current = root
        for part in folders:
            here = tree(current)
            if part not in here or not stat.S_ISDIR(here[part][0]):
                return None
            current = here[part][1]
        leaf = tree(current)
        return (leaf[name][0], leaf[name][1]) if name in leaf else None

    @git_errors
    def mode_at(self, sha: str, rel: str) -> int | None:
        """The git mode of what ``rel`` names in commit ``sha`` (a symlink is ``0o120000``), also
        when it is not a regular file; None when nothing is there."""
        entry = self._entry(self._commit(sha).tree, rel, self._tree)
        return None if entry is None else entry[0]

    @git_errors
    def blob(self, blob_sha: bytes) -> bytes:
        obj = self._object(blob_sha, Blob, "file content (blob)")
        assert isinstance(obj, Blob)
        return obj.data

    @git_errors
    def read_at(self, sha: str, rel: str) -> bytes | None:
        """The bytes of ``rel`` in commit ``sha``; None when it is not a regular file there."""
        entry = self.entries_at(sha, [rel]).get(rel)
        return None if entry is None else self.blob(entry[1])

    @property
    def is_shallow(self) -> bool:
        """A shallow clone (actions/checkout's default): commits before its oldest are absent."""
        return bool(self.shallow)

    @git_iter_errors
    def first_parent_chain(self, start: str | None = None) -> Iterator[Commit]:
        """Commits from ``start`` (HEAD) back along first parents; in a shallow clone the walk
        ends at the oldest commit that is there."""
        sha = start or self.head()
        commit = self._commit(sha) if sha else None
        while commit is not None:
            yield commit
            if commit.id in self.shallow or not commit.parents:
                return
            commit = self._parent(commit.parents[0])

    def _parent(self, sha: bytes) -> Commit:
        """A parent a commit names: missing, it is damage (exit 1), not a revision the user mistyped."""
        parent = self._object(sha, Commit, "commit")
        assert isinstance(parent, Commit)  # _object checked the kind
        return parent

    @git_errors
    def info(self, sha: str, *, with_files: bool = True, against: str | None = None) -> CommitInfo:
        commit = self._commit(sha)
        parent = commit.parents[0].decode("ascii") if commit.parents else None
        shallow = commit.id in self.shallow and against is None
        if parent is not None and against is None and not shallow and with_files:
            self._parent(commit.parents[0])  # a parent gone is damage, not an unknown revision
        base = against if against is not None else parent
        files = tuple(self.changes(base, sha)) if with_files and not shallow else ()
        message = commit.message.decode("utf-8", errors="replace")
        return CommitInfo(
            sha=sha,
            subject=message.split("\n", 1)[0],
            message=message,
            time=format_time(commit.commit_time, commit.commit_timezone),
            author=commit.author.decode("utf-8", errors="replace"),
            parent=parent,
            files=files,
            shallow=shallow,
        )

    def _diff_trees(self, old: bytes | None, new: bytes | None, prefix: str, where: str, found: set[str]) -> None:
        """Paths of the regular files that differ between two trees (None: empty); only the
        subtrees that differ are read, and every name met there is checked."""
        left = {p: (m, s) for p, m, s in self._entries(old, prefix, where)} if old is not None else {}
        right = {p: (m, s) for p, m, s in self._entries(new, prefix, where)} if new is not None else {}
        for path in left.keys() | right.keys():
            a, b = left.get(path), right.get(path)
            if a == b:
                continue
            a_dir = a is not None and stat.S_ISDIR(a[0])
            b_dir = b is not None and stat.S_ISDIR(b[0])
            if a_dir or b_dir:
                self._diff_trees(
                    a[1] if a is not None and a_dir else None,
                    b[1] if b is not None and b_dir else None,
                    path + "/",
                    where,
                    found,
                )
            a_file = a is not None and stat.S_ISREG(a[0])
            b_file = b is not None and stat.S_ISREG(b[0])
            if (a_file or b_file) and self._file_entry(path, where):
                found.add(path)

    @git_errors
    def changed_paths(self, old: str | None, new: str | None) -> list[str]:
        """Workspace-relative paths of the regular files that differ between two commits (None:
        the empty tree). Only subtrees that differ are read, so this stays cheap in a large
        repository with a long history."""
        old_tree = self._workspace_tree(self._commit(old).tree) if old else None
        new_tree = self._workspace_tree(self._commit(new).tree) if new else None
        found: set[str] = set()
        if old_tree != new_tree:
            where = f"commit {(new or old or '')[:10]}"
            self._diff_trees(old_tree, new_tree, "", where, found)
        return sorted(found)

    @git_errors
    def changes(self, old: str | None, new: str | None) -> list[FileChange]:
        """File changes between two commits (None: the empty tree; the working tree is not used)."""
        paths = self.changed_paths(old, new)
        before = self.entries_at(old, paths)
        after = self.entries_at(new, paths)
        result: list[FileChange] = []
        for path in paths:
            a, b = before.get(path), after.get(path)
            if a == b:
                continue
            result.append(
                unified_diff(path, None if a is None else self.blob(a[1]), None if b is None else self.blob(b[1]))
            )
        return result

    @git_iter_errors
    def all_commits(self) -> Iterator[str]:
        """Every commit reachable from HEAD and the local branches, each once (in a shallow
        clone, those that are there)."""
        heads = [self.head()] + [v.decode("ascii") for v in local_branches(self.repo).values()]
        seen: set[str] = set()
        stack = [h for h in heads if h]
        while stack:
            sha = stack.pop()
            if sha in seen:
                continue
            seen.add(sha)
            yield sha
            commit = self._commit(sha) if sha in heads else self._parent(sha.encode("ascii"))
            if commit.id not in self.shallow:
                stack.extend(p.decode("ascii") for p in commit.parents)

    @git_errors
    def resolve(self, rev: str) -> str:
        """A commit from a hex prefix (at least 4 digits), ``HEAD``, ``HEAD~N`` or a branch name.

        A prefix is looked up among every commit in the object store, as ``git rev-parse``
        does, so a prefix git calls ambiguous is ambiguous here too.
        """
        text = rev.strip()
        if not text:  # `dream log ''` showed HEAD
            raise UnknownRevision(
                "an empty revision names no commit", hint="give a branch name, HEAD, HEAD~N or a SHA prefix"
            )
        upper = text.upper()
        if upper == "HEAD" or upper.startswith("HEAD~"):
            sha = self.head()
            if sha is None:
                raise UnknownRevision("there are no commits yet")
            count = text[5:]
            # ASCII digits only: str.isdigit() takes "²" (which int() refuses) and "١" (which it reads as 1).
            if count and not (count.isascii() and count.isdigit()):
                raise UnknownRevision(f"{rev!r} is not a commit: HEAD~N takes a number of steps")
            steps = int(count) if count else (1 if upper.startswith("HEAD~") else 0)
            chain = self.first_parent_chain(sha)
            # Stops at the first commit: HEAD~99999999999999999999 used to spin for ever (holding
            # the Dream lock, under dream restore).
            found = next(itertools.islice(chain, min(steps, sys.maxsize), None), None)
            if found is None:
                oldest = "the oldest commit of this shallow clone" if self.is_shallow else "the first commit"
                raise UnknownRevision(f"{rev!r} goes past {oldest}")
            return found.id.decode("ascii")
        branch = local_branches(self.repo).get(name_bytes(text))
        if branch:
            return branch.decode("ascii")
        lowered = text.lower()
        accepted = "a branch name, HEAD, HEAD~N or a SHA prefix of at least 4 hex digits"
        if len(lowered) < 4 or any(c not in "0123456789abcdef" for c in lowered):
            raise UnknownRevision(f"no branch or commit named {rev!r}", hint=f"give {accepted}")
        if len(lowered) > 40:
            raise UnknownRevision(f"no commit matches {rev!r}", hint=f"give {accepted}")
        matches = sorted(
            sha.decode("ascii")
            for sha in set(self.repo.object_store.iter_prefix(lowered.encode("ascii")))
            if isinstance(self.repo.object_store[sha], Commit)
        )
        if not matches:
            if (self.workspace / layout.FORGOTTEN_RECORD).is_file():
                raise UnknownRevision(
                    f"no commit matches {rev!r}: `dream forget` rewrote this repository's history, and every "
                    "commit from before the purge has a new id",
                    hint="`dream restore` lists the commits as they are now (`dream log` shows one)",
                )
            raise UnknownRevision(f"no branch or commit matches {rev!r}", hint=f"give {accepted}")
        if len(matches) > 1:
            raise UnknownRevision(
                f"{rev!r} is ambiguous: it matches {len(matches)} commits ({', '.join(m[:12] for m in matches[:4])})",
                hint="give more digits",
            )
        return matches[0]


def _what_is_at(path: Path) -> str:
    """What a branch's ref file holds instead of a commit id, in words."""
    if path.is_dir():
        return "it is a folder"
    try:
        size = path.stat().st_size
    except OSError:
        return "it cannot be read"
    return "it is empty" if size == 0 else "its first line is empty"
