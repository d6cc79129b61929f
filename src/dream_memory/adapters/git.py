"""GitStore: versioned memory over dulwich (no git binary needed).

Commits are built at the object level (blobs, trees, commit, compare-and-set of the ref), never
through ``porcelain.commit``: that path would run repository hooks, may call gpg, and would sweep
whatever else a user has staged into our commit. Only the paths we name are ever written to the
tree or the index, so a workspace inside a larger repository leaves every other file alone.

Paths given to and returned from this class are workspace-relative POSIX strings; the repository
may sit above the workspace (``prefix``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os
import shutil
import stat
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

from dulwich.errors import ApplyDeltaError, ChecksumMismatch, NotGitRepository, ObjectFormatException
from dulwich.file import FileLocked
from dulwich.index import ConflictedIndexEntry, Index, IndexEntry, index_entry_from_stat
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree, hex_to_filename
from dulwich.refs import Ref
from dulwich.repo import Repo

from dream_memory.adapters import fsutil
from dream_memory.adapters.rooted import RootedDir
from dream_memory.core import layout
from dream_memory.core.paths import (
    branch_name_problem,
    describe,
    entry_name_problem,
    memory_write_problem,
    path_problem,
)
from dream_memory.core.ports import Clock
from dream_memory.errors import (
    DreamError,
    RepositoryStateError,
    UnknownRevision,
    UnsafeTree,
    UsageError,
    VersionStoreError,
)

GITIGNORE_BEGIN = "# >>> dream-memory: version only the memory files"
GITIGNORE_END = "# <<< dream-memory"
EXCLUDE_BEGIN = "# >>> dream-memory runtime files of"
FILE_MODE = 0o100644
EXEC_MODE = 0o100755
HEADS = b"refs/heads/"
_STALE_LOCK_WAIT_SECONDS = 2.0

# Files a workspace holds while it works (locks, the commit journal, migration and compaction
# markers, temp files of atomic writes): never versioned, and kept out of an enclosing
# repository's `git status` through its local .git/info/exclude.
RUNTIME_PATTERNS: tuple[str, ...] = (
    "memory/.*.lock",  # .history.lock, .dream.lock and any lock a later version adds
    layout.DREAM_JOURNAL,
    layout.MIGRATION_MARKER,
    f"{layout.ARCHIVE_DIR}/.pending.json",
    "memory/.*.tmp",
    f"{layout.ARCHIVE_DIR}/.*.tmp",
    f"{layout.SESSIONS_DIR}/*.lock",  # taken by `dream consolidate --update-sessions`
)


P = ParamSpec("P")
R = TypeVar("R")

# What dulwich raises on an object it cannot read: a truncated or corrupt loose object, a pack
# whose checksum or delta is wrong, a tree or commit that does not parse, a missing object.
_DAMAGE: tuple[type[BaseException], ...] = (
    ObjectFormatException,
    ChecksumMismatch,
    ApplyDeltaError,
    zlib.error,
    ValueError,
    KeyError,
    EOFError,
)


def _git_errors(func: Callable[P, R]) -> Callable[P, R]:
    """A damaged or incomplete repository is a VersionStoreError naming it, never a traceback.
    Our own errors pass through as they are."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except DreamError:
            raise
        except _DAMAGE as exc:
            store = args[0]
            assert isinstance(store, GitStore)
            raise store._damaged(exc) from exc

    return wrapper


def _git_iter_errors(func: Callable[P, Iterator[R]]) -> Callable[P, Iterator[R]]:
    """``_git_errors`` for a generator: the objects are read while it is consumed."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
        try:
            yield from func(*args, **kwargs)
        except DreamError:
            raise
        except _DAMAGE as exc:
            store = args[0]
            assert isinstance(store, GitStore)
            raise store._damaged(exc) from exc

    return wrapper


def _oid(sha: str | bytes) -> ObjectID:
    return ObjectID(sha.encode("ascii") if isinstance(sha, str) else sha)


def _branches(repo: Repo) -> dict[bytes, bytes]:
    """Local branch name -> commit sha."""
    return {bytes(k): bytes(v) for k, v in repo.refs.as_dict(Ref(HEADS)).items() if v}


def gitignore_lines() -> list[str]:
    """Ignore everything at the workspace root but the tracked paths (CONTRACT section 2)."""
    lines = ["/*", "!/.gitignore", f"!/{layout.SOUL}", f"!/{layout.USER}", "!/memory/", "/memory/*"]
    lines += [
        f"!/{layout.MEMORY}",
        f"!/{layout.DREAM_CURSOR}",
        f"!/{layout.DREAM_STATE}",
        f"!/{layout.DREAM_HELD_DIR}/",
        f"!/{layout.SKILLS_DIR}/",
        f"!/{layout.INDEX}",
        f"!/{layout.ENTITIES_DIR}/",
        f"!/{layout.SECTIONS_DIR}/",
        f"!/{layout.OBSERVATIONS}",
    ]
    return lines


def merge_gitignore(existing: str | None) -> str | None:
    """The .gitignore with our block in step; None when it already is. User lines are kept as they are."""
    return merge_block(existing, GITIGNORE_BEGIN, GITIGNORE_END, gitignore_lines())


def merge_block(existing: str | None, begin: str, end: str, body: Sequence[str]) -> str | None:
    """``existing`` with the block ``begin``..``end`` holding ``body``; None when it already does.

    Every line outside the block is kept byte for byte (CRLF line ends too), so a user's own
    ignore rules are never rewritten; the block is added at the end the first time, where its
    negations win over earlier user rules.
    """
    ours = [begin, *body, end]
    if not existing:
        return "\n".join(ours) + "\n"
    lines = existing.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    if begin in bare and end in bare[bare.index(begin) :]:
        start = bare.index(begin)
        stop = bare.index(end, start)
        if bare[start : stop + 1] == ours:
            return None
        return "".join(lines[:start]) + "\n".join(ours) + "\n" + "".join(lines[stop + 1 :])
    text = existing if existing.endswith(("\n", "\r")) else existing + "\n"
    separator = "\n" if bare[-1].strip() else ""
    return text + separator + "\n".join(ours) + "\n"


def parse_identity(identity: str) -> bytes:
    return identity.encode("utf-8")


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # "added" | "modified" | "deleted"
    added: int
    removed: int
    diff: str = field(default="", repr=False)
    binary: bool = False

    def to_json(self, *, with_diff: bool = True) -> dict[str, object]:
        data: dict[str, object] = {
            "path": self.path,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
        }
        if with_diff:
            data["diff"] = self.diff
        return data


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    message: str
    time: str  # ISO 8601 with offset
    author: str
    parent: str | None
    files: tuple[FileChange, ...] = ()
    shallow: bool = False  # the oldest commit of a shallow clone: its parent is absent, so no diff

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def body(self) -> str:
        return self.message.partition("\n")[2].strip()

    def trailers(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for line in self.body.splitlines():
            key, sep, value = line.partition(": ")
            if sep and key and key.replace("-", "").isalnum() and key[0].isupper():
                found[key] = value.strip()
        return found

    def to_json(self, *, with_diff: bool = True) -> dict[str, object]:
        return {
            "commit": self.sha,
            "short": self.short,
            "subject": self.subject,
            "time": self.time,
            "author": self.author,
            "parent": self.parent,
            "shallow": self.shallow,
            "files": [f.to_json(with_diff=with_diff) for f in self.files],
        }


def unified_diff(path: str, old: bytes | None, new: bytes | None) -> FileChange:
    status = "added" if old is None else "deleted" if new is None else "modified"
    old_b, new_b = old or b"", new or b""
    if b"\0" in old_b or b"\0" in new_b:
        return FileChange(path, status, 0, 0, f"Binary files a/{path} and b/{path} differ\n", binary=True)
    old_lines = old_b.decode("utf-8", errors="replace").splitlines(keepends=True)
    new_lines = new_b.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
        )
    )
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    text = "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)
    return FileChange(path, status, added, removed, text)


def _format_time(seconds: int, offset: int) -> str:
    from datetime import timedelta, timezone

    return datetime.fromtimestamp(seconds, timezone(timedelta(seconds=offset))).isoformat(timespec="seconds")


class GitStore:
    """The repository that versions one workspace's memory."""

    def __init__(self, repo: Repo, workspace: Path, *, author: str, clock: Clock, created: bool) -> None:
        self.repo = repo
        self.workspace = workspace
        self.root = Path(repo.path).resolve()
        rel = os.path.relpath(workspace.resolve(), self.root)
        self.prefix = "" if rel == "." else Path(rel).as_posix()
        self.author = parse_identity(author)
        self.clock = clock
        self.created = created  # True when this repository was made for the workspace by us
        self.fs = RootedDir(workspace)  # every file this store writes, deletes or reads to decide
        try:
            self.shallow: frozenset[bytes] = frozenset(repo.get_shallow())
        except OSError:
            self.shallow = frozenset()
        store = repo.object_store
        if hasattr(store, "fsync_object_files"):
            # objects reach the disk before the ref (fsynced by dulwich) that makes them reachable
            store.fsync_object_files = True

    # --- opening -----------------------------------------------------------------------------

    @staticmethod
    def find_enclosing(workspace: Path) -> Path | None:
        """The work tree root of a repository containing ``workspace``, if any."""
        current = workspace.resolve()
        for candidate in (current, *current.parents):
            if (candidate / ".git").exists():
                return candidate
        return None

    @classmethod
    def open(cls, workspace: Path, *, author: str, clock: Clock, create: bool = True) -> GitStore | None:
        """Open the repository versioning ``workspace``; create one at the workspace root if there
        is none and ``create`` is set (else None)."""
        root = cls.find_enclosing(workspace)
        try:
            if root is not None and root == workspace.resolve() and _half_created(root / ".git"):
                if not create:
                    return None
                # A creation killed before HEAD existed: nothing is in it, so it is made again.
                shutil.rmtree(root / ".git")
                root = None
            if root is not None:
                repo = Repo(str(root))
                standalone = root == workspace.resolve() and _is_ours(workspace)
                return cls(repo, workspace, author=author, clock=clock, created=standalone)
            if not create:
                return None
            workspace.mkdir(parents=True, exist_ok=True)
            # The .gitignore block first: it is what marks the repository as ours, so a crash
            # between the two steps cannot leave a repository taken for a user's.
            merged = merge_gitignore(fsutil.read_text(workspace / ".gitignore"))
            if merged is not None:
                fsutil.atomic_write(workspace / ".gitignore", merged, site="gitignore")
            repo = Repo.init(str(workspace), default_branch=b"main")
        except NotGitRepository as exc:
            raise VersionStoreError(f"{root or workspace} holds a .git that is not a usable repository") from exc
        except (OSError, FileLocked) as exc:
            reason = fsutil.describe_os_error(exc) if isinstance(exc, OSError) else "a git lock file is in the way"
            raise VersionStoreError(f"cannot open or create a repository at {workspace}: {reason}") from exc
        return cls(repo, workspace, author=author, clock=clock, created=True)

    def close(self) -> None:
        self.repo.close()

    def __enter__(self) -> GitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def enclosing(self) -> bool:
        """True when the repository was not made by us for this workspace (a user's checkout)."""
        return not self.created

    def ensure_gitignore(self) -> bool:
        """Keep our block in the workspace .gitignore in step (standalone repositories only)."""
        if not self.created:
            return False
        path = self.workspace / ".gitignore"
        merged = merge_gitignore(fsutil.read_text(path))
        if merged is None:
            return False
        fsutil.atomic_write(path, merged, site="gitignore")
        return True

    def ensure_exclude(self) -> bool:
        """In a repository that is not ours, keep the workspace's runtime files out of its
        ``git status``: a block in ``.git/info/exclude``, which is local and never committed,
        so nothing in the user's work tree or history changes."""
        if self.created:
            return False
        # the workspace's own path is literal: escape what gitignore would read as a pattern
        literal = "".join("\\" + c if c in "\\*?[" else c for c in self.prefix)
        base = f"/{literal}/" if literal else "/"
        path = Path(self.repo.commondir()) / "info" / "exclude"
        begin = f"{EXCLUDE_BEGIN} {base}"
        merged = merge_block(fsutil.read_text(path), begin, GITIGNORE_END, [base + p for p in RUNTIME_PATTERNS])
        if merged is None:
            return False
        fsutil.atomic_write(path, merged, site="exclude")
        return True

    # --- paths -------------------------------------------------------------------------------

    def repo_path(self, rel: str) -> bytes:
        return (f"{self.prefix}/{rel}" if self.prefix else rel).encode("utf-8")

    def _rel(self, repo_path: bytes) -> str | None:
        text = repo_path.decode("utf-8", errors="surrogateescape")
        if not self.prefix:
            return text
        if text.startswith(self.prefix + "/"):
            return text[len(self.prefix) + 1 :]
        return None

    def is_versioned(self, rel: str) -> bool:
        return layout.is_tracked(rel) or (self.created and rel == ".gitignore")

    def worktree_paths(self) -> list[str]:
        """Tracked paths that exist as regular files in the workspace: no symlink is followed
        (a file beyond a symlinked folder is not in the workspace), and a name no commit may
        hold (control characters, a .git folder) is never versioned."""
        found: list[str] = []
        for top in layout.tracked_roots():
            st = self.fs.lstat(top)
            if st is None:
                continue
            if stat.S_ISREG(st.st_mode):
                if self.is_versioned(top):
                    found.append(top)
            elif stat.S_ISDIR(st.st_mode):
                found += [r for r in self.fs.walk_files(top) if path_problem(r) is None and self.is_versioned(r)]
        if self.created and self.fs.is_file(".gitignore"):
            found.append(".gitignore")
        return sorted(set(found))

    # --- reading commits ---------------------------------------------------------------------

    def head(self) -> str | None:
        try:
            return self.repo.head().decode("ascii")
        except KeyError:
            return None

    def branch(self) -> str | None:
        """The checked-out branch name, or None when HEAD is detached."""
        target = self.repo.refs.read_ref(Ref(b"HEAD"))
        if target and target.startswith(b"ref: " + HEADS):
            return target[len(b"ref: " + HEADS) :].decode("utf-8")
        return None

    def _damaged(self, exc: BaseException) -> VersionStoreError:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return VersionStoreError(
            f"the git repository at {self.root} is damaged: an object cannot be read ({detail[:200]})",
            hint="`git fsck` names the damaged objects; restore them from a clone or a backup, then run again",
        )

    def _object(self, sha: bytes, kind: type[ShaFile], what: str) -> ShaFile:
        """One object of the expected kind; a missing or damaged one is a VersionStoreError."""
        try:
            obj = self.repo[_oid(sha)]
        except KeyError:
            raise VersionStoreError(
                f"the git repository at {self.root} lacks the {what} {sha.decode('ascii', 'replace')}",
                hint="`git fsck` shows what is missing; fetch it again from a clone, then run again",
            ) from None
        except _DAMAGE as exc:
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
            obj = self.repo[_oid(text)]
        except (KeyError, ValueError):
            if any(text.encode("ascii", "replace") in self._parents_of(s) for s in self.shallow):
                raise UnknownRevision(
                    f"commit {text[:10]} is not in this shallow clone (it lies beyond its oldest commit)",
                    hint="`git fetch --unshallow` brings the whole history",
                ) from None
            raise UnknownRevision(f"no commit {text}") from None
        except _DAMAGE as exc:
            raise self._damaged(exc) from exc
        if not isinstance(obj, Commit):
            raise UnknownRevision(f"{text} is not a commit")
        return obj

    def _parents_of(self, sha: bytes) -> list[bytes]:
        try:
            obj = self.repo[_oid(sha)]
        except _DAMAGE:
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
            key = part.encode("utf-8")
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

    @_git_errors
    def files_at(self, sha: str | None) -> dict[str, tuple[int, bytes]]:
        if sha is None:
            return {}
        return self._tree_files(self._commit(sha).tree, f"commit {sha[:10]}")

    @_git_errors
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
            if path_problem(rel) is not None:
                continue  # never a path of ours: nothing of it is read
            *folders, name = self.repo_path(rel).split(b"/")
            current: bytes | None = root
            for part in folders:
                assert current is not None
                here = tree(current)
                if part not in here or not stat.S_ISDIR(here[part][0]):
                    current = None
                    break
                current = here[part][1]
            if current is None:
                continue
            leaf = tree(current)
            if name in leaf and stat.S_ISREG(leaf[name][0]):
                found[rel] = (leaf[name][0], leaf[name][1])
        return found

    @_git_errors
    def blob(self, blob_sha: bytes) -> bytes:
        obj = self._object(blob_sha, Blob, "file content (blob)")
        assert isinstance(obj, Blob)
        return obj.data

    @_git_errors
    def read_at(self, sha: str, rel: str) -> bytes | None:
        entry = self.entries_at(sha, [rel]).get(rel)
        return None if entry is None else self.blob(entry[1])

    @property
    def is_shallow(self) -> bool:
        """A shallow clone (actions/checkout's default): commits before its oldest are absent."""
        return bool(self.shallow)

    @_git_iter_errors
    def first_parent_chain(self, start: str | None = None) -> Iterator[Commit]:
        """Commits from ``start`` (HEAD) back along first parents; in a shallow clone the walk
        ends at the oldest commit that is there."""
        sha = start or self.head()
        while sha:
            commit = self._commit(sha)
            yield commit
            if commit.id in self.shallow:
                return
            sha = commit.parents[0].decode("ascii") if commit.parents else None

    @_git_errors
    def info(self, sha: str, *, with_files: bool = True, against: str | None = None) -> CommitInfo:
        commit = self._commit(sha)
        parent = commit.parents[0].decode("ascii") if commit.parents else None
        shallow = commit.id in self.shallow and against is None
        base = against if against is not None else parent
        files = tuple(self.changes(base, sha)) if with_files and not shallow else ()
        message = commit.message.decode("utf-8", errors="replace")
        return CommitInfo(
            sha=sha,
            subject=message.split("\n", 1)[0],
            message=message,
            time=_format_time(commit.commit_time, commit.commit_timezone),
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

    @_git_errors
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

    @_git_errors
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

    @_git_iter_errors
    def all_commits(self) -> Iterator[str]:
        """Every commit reachable from HEAD and the local branches, each once (in a shallow
        clone, those that are there)."""
        heads = [self.head()] + [v.decode("ascii") for v in _branches(self.repo).values()]
        seen: set[str] = set()
        stack = [h for h in heads if h]
        while stack:
            sha = stack.pop()
            if sha in seen:
                continue
            seen.add(sha)
            yield sha
            commit = self._commit(sha)
            if commit.id not in self.shallow:
                stack.extend(p.decode("ascii") for p in commit.parents)

    @_git_errors
    def resolve(self, rev: str) -> str:
        """A commit from a hex prefix (at least 4 digits), ``HEAD``, ``HEAD~N`` or a branch name.

        A prefix is looked up among every commit in the object store, as ``git rev-parse``
        does, so a prefix git calls ambiguous is ambiguous here too.
        """
        text = rev.strip()
        upper = text.upper()
        if upper == "HEAD" or upper.startswith("HEAD~"):
            sha = self.head()
            if sha is None:
                raise UnknownRevision("there are no commits yet")
            count = text[5:]
            if count and not count.isdigit():
                raise UnknownRevision(f"{rev!r} is not a commit: HEAD~N takes a number of steps")
            steps = int(count) if count else (1 if upper.startswith("HEAD~") else 0)
            chain = self.first_parent_chain(sha)
            for _ in range(steps):
                next(chain, None)
            found = next(chain, None)
            if found is None:
                oldest = "the oldest commit of this shallow clone" if self.is_shallow else "the first commit"
                raise UnknownRevision(f"{rev!r} goes past {oldest}")
            return found.id.decode("ascii")
        branch = _branches(self.repo).get(text.encode("utf-8"))
        if branch:
            return branch.decode("ascii")
        lowered = text.lower()
        if len(lowered) < 4 or any(c not in "0123456789abcdef" for c in lowered):
            raise UnknownRevision(f"{rev!r} is not a commit: give at least 4 hex digits of a SHA")
        if len(lowered) > 40:
            raise UnknownRevision(f"no commit matches {rev!r}")
        matches = sorted(
            sha.decode("ascii")
            for sha in set(self.repo.object_store.iter_prefix(lowered.encode("ascii")))
            if isinstance(self.repo.object_store[sha], Commit)
        )
        if not matches:
            raise UnknownRevision(f"no commit matches {rev!r}")
        if len(matches) > 1:
            raise UnknownRevision(
                f"{rev!r} is ambiguous: it matches {len(matches)} commits ({', '.join(m[:12] for m in matches[:4])})",
                hint="give more digits",
            )
        return matches[0]

    # --- working tree ------------------------------------------------------------------------

    def read_file(self, rel: str) -> bytes | None:
        """The bytes of a workspace file as a commit would take them: None when missing, not a
        regular file, a symlink or beyond a symlinked folder."""
        return self.fs.read(rel)

    @_git_errors
    def worktree_state(self, paths: Iterable[str] | None = None) -> dict[str, bytes | None]:
        """Blob ids of tracked files as they are on disk (None: missing, or not a regular file
        in the workspace itself: a symlink, or a file beyond a symlinked folder)."""
        wanted = self.worktree_paths() if paths is None else list(paths)
        index = self._open_index()
        state: dict[str, bytes | None] = {}
        for rel in wanted:
            st = self.fs.lstat(rel) if path_problem(rel) is None else None
            if st is None or not stat.S_ISREG(st.st_mode):
                state[rel] = None
                continue
            entry = _index_entry(index, self.repo_path(rel))
            if entry is not None and _stat_matches(entry, st):
                state[rel] = entry.sha
            else:
                data = self.fs.read(rel)
                state[rel] = None if data is None else Blob.from_string(data).id
        return state

    @_git_errors
    def dirty(self, *, only: Iterable[str] | None = None) -> list[str]:
        """Versioned paths whose content on disk differs from HEAD (added, changed or removed);
        ``only``: among those paths (then neither the work tree nor HEAD's tree is walked)."""
        if only is not None:
            candidates = {p for p in only if self.is_versioned(p)}
            head_files = self.entries_at(self.head(), candidates)
        else:
            head_files = self.files_at(self.head())
            candidates = set(self.worktree_paths()) | {p for p in head_files if self.is_versioned(p)}
        state = self.worktree_state(sorted(candidates))
        return sorted(p for p in candidates if state.get(p) != (head_files[p][1] if p in head_files else None))

    @_git_errors
    def tracked_in_head(self, patterns: Sequence[str]) -> list[str]:
        """Paths matching ``patterns`` that HEAD already tracks (for carried memory files)."""
        head_files = self.files_at(self.head())
        return sorted(p for p in head_files if layout.matches_any(p, tuple(patterns)))

    def _index_file(self) -> Path:
        return Path(self.repo.index_path())

    def _open_index(self) -> Index | None:
        """The index, or None when there is none or when dulwich cannot rewrite it faithfully."""
        if not self._index_file().exists():
            return None
        try:
            index = self.repo.open_index()
        except Exception:  # dulwich raises assorted errors on index formats it does not read
            return None
        # A split index keeps most entries in a shared file dulwich does not read, and a sparse
        # one folds folders into single entries: written back, either would lose staged work.
        if index.is_sparse() or any(ext.signature == b"link" for ext in index._extensions):
            return None
        return index

    def _check_index(self) -> None:
        """Refuse before anything changes when an index exists that we could not rewrite safely:
        writing a fresh one would unstage everything the user has staged."""
        if self._index_file().exists() and self._open_index() is None:
            raise VersionStoreError(
                f"the git index of {self.root} is in a form dulwich cannot rewrite safely"
                " (split, sparse or unreadable); nothing was changed",
                hint="there: `git update-index --no-split-index` or `git sparse-checkout disable`, then retry",
            )

    # --- writing -----------------------------------------------------------------------------

    def _signature(self) -> tuple[int, int]:
        now = self.clock.now()
        offset = now.utcoffset()
        return int(now.timestamp()), int(offset.total_seconds()) if offset else 0

    def _add(self, obj: ShaFile) -> None:
        """Store one object. A process killed while dulwich wrote this very object leaves its
        ``objects/xx/<id>.lock``, on which dulwich would fail for ever: objects are named by
        their content, so the object is written here the way git writes it (a temp file renamed
        into place) and the dead writer's lock is removed."""
        store = self.repo.object_store
        try:
            store.add_object(obj)
            return
        except FileLocked:
            pass
        objects = os.fspath(getattr(store, "path", Path(self.repo.commondir()) / "objects"))
        path = Path(os.fsdecode(hex_to_filename(objects, obj.id)))
        if not path.exists():
            data = b"".join(obj.as_legacy_object_chunks())
            fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.chmod(tmp, 0o444)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + ".lock").unlink()

    def check_paths(self, paths: Iterable[str]) -> None:
        """Refuse, before anything is written, a path a memory commit must never hold: one that
        leaves the workspace, enters .git, or is not a versioned memory file."""
        for rel in paths:
            problem = memory_write_problem(rel, gitignore=self.created)
            if problem is not None:
                raise VersionStoreError(
                    f"refusing to commit or write {describe(rel)}: {problem}; nothing was changed",
                    hint="only the memory files of docs/versioning.md are ever written",
                )

    def check_writable(self, paths: Iterable[str]) -> None:
        """Refuse, before a commit is made, to write files that cannot be reached without going
        through a symlink (a commit whose files could not be written would say what is not)."""
        self.check_paths(paths)
        for rel in paths:
            self.fs.check_reachable(rel)

    def in_progress(self) -> tuple[str, str] | None:
        """(the git operation under way in this repository, how to finish or abort it): a merge,
        rebase, cherry-pick, revert or unmerged files; None when there is none."""
        control = Path(self.repo.controldir())
        markers = (
            ("MERGE_HEAD", "a merge", "git merge --abort"),
            ("rebase-merge", "a rebase", "git rebase --abort"),
            ("rebase-apply", "a rebase or `git am`", "git rebase --abort"),
            ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --abort"),
            ("REVERT_HEAD", "a revert", "git revert --abort"),
        )
        found = next(((what, undo) for name, what, undo in markers if (control / name).exists()), None)
        conflicted: list[str] = []
        index = self._open_index()
        if index is not None and index.has_conflicts():
            conflicted = sorted(
                path.decode("utf-8", "replace")
                for path, entry in index.items()
                if isinstance(entry, ConflictedIndexEntry)
            )
        if found is None and not conflicted:
            return None
        what, undo = found or ("a conflicted operation (`git stash pop`, say)", "git checkout --merge or git reset")
        if conflicted:
            shown = ", ".join(conflicted[:3]) + (f" and {len(conflicted) - 3} more" if len(conflicted) > 3 else "")
            what += f" with unmerged files ({shown})"
        return what, f"resolve and commit it (git add, git commit) or abort it ({undo}), then run again"

    def check_can_commit(self) -> None:
        """Refuse to commit while git is in the middle of something, or on a detached HEAD of a
        repository dream-memory made (its commits would belong to no branch and be lost on the
        next checkout). A user's checkout may be detached: CI checks out a commit, not a branch.
        The fix is in the message itself: Dream's report carries only messages."""
        busy = self.in_progress()
        if busy is not None:
            what, fix = busy
            raise RepositoryStateError(f"{self.root} is in the middle of {what}: {fix}; dream-memory committed nothing")
        head = self.head()
        if self.created and head is not None and self.branch() is None:
            raise RepositoryStateError(
                f"HEAD of {self.root} is detached at {head[:10]}, so a commit would belong to no branch: "
                f"check a branch out (git -C {self.root} checkout main) or give dream run --branch NAME; "
                "dream-memory committed nothing"
            )

    @_git_errors
    def build_commit(self, changes: dict[str, bytes | None], message: str) -> tuple[str, str | None]:
        """Write blobs, trees and a commit object for ``changes`` on top of HEAD; the ref is not
        moved yet. Returns (new sha, base sha)."""
        self.check_paths(changes)
        self.check_can_commit()
        self._check_index()
        base = self.head()
        store = self.repo.object_store
        tree_changes: list[tuple[list[bytes], int, ObjectID | None]] = []
        for rel, data in sorted(changes.items()):
            parts = self.repo_path(rel).split(b"/")
            if data is None:
                tree_changes.append((parts, 0, None))
            else:
                blob = Blob.from_string(data)
                self._add(blob)
                st = self.fs.lstat(rel)
                executable = st is not None and stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o100)
                tree_changes.append((parts, EXEC_MODE if executable else FILE_MODE, blob.id))
        base_tree = self._commit(base).tree if base is not None else None
        tree_id = _apply_tree_changes(store, base_tree, tree_changes, self._add)
        if tree_id is None:
            # Every file deleted: a commit still needs a tree, and this one is reachable.
            empty = Tree()
            self._add(empty)
            tree_id = empty.id
        commit = Commit()
        commit.tree = tree_id
        commit.parents = [_oid(base)] if base else []
        commit.author = commit.committer = self.author
        when, offset = self._signature()
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = offset
        commit.message = (message.rstrip("\n") + "\n").encode("utf-8")
        self._add(commit)
        return commit.id.decode("ascii"), base

    @_git_errors
    def move_head(self, new: str, base: str | None, subject: str) -> None:
        """Point the checked-out branch (or a detached HEAD) at ``new`` if it still is at ``base``."""
        chain, _ = self.repo.refs.follow(Ref(b"HEAD"))
        ref = chain[-1] if chain else Ref(b"HEAD")
        message = b"commit: " + subject.encode("utf-8")
        when, offset = self._signature()
        fsutil.checkpoint("git.ref", Path(self.repo.controldir()) / ref.decode("utf-8", "replace"))
        try:
            if base is None:
                ok = self.repo.refs.add_if_new(
                    ref, _oid(new), committer=self.author, timestamp=when, timezone=offset, message=message
                )
            else:
                ok = self.repo.refs.set_if_equals(
                    ref, _oid(base), _oid(new), committer=self.author, timestamp=when, timezone=offset, message=message
                )
        except FileLocked:
            ok = False
        if not ok:
            raise VersionStoreError(
                f"{ref.decode()} moved while committing; nothing was changed",
                hint="another process committed to this repository at the same time; run again",
            )

    @_git_errors
    def sync_index(self, paths: Iterable[str], sha: str) -> None:
        """Make the index agree with commit ``sha`` for ``paths`` (and only those): every other
        entry, staged or not, is written back exactly as it was."""
        index = self._open_index()
        if index is None:
            if self._index_file().exists():
                return  # unreadable (build_commit refused before); never replace it
            index = Index(self._index_file(), read=False)
        paths = list(paths)
        files = self.entries_at(sha, paths)
        for rel in paths:
            key = self.repo_path(rel)
            st = self.fs.lstat(rel) if rel in files else None
            data = self.fs.read(rel) if st is not None and stat.S_ISREG(st.st_mode) else None
            if rel in files and st is not None and data is not None:
                mode, blob_id = files[rel]
                entry = index_entry_from_stat(st, _oid(blob_id), mode)
                if Blob.from_string(data).id != blob_id:
                    # The file moved on since the commit (an append to a carried history.jsonl,
                    # an edit): recording its stat would make git trust it as unchanged. A size
                    # of 0 never matches, so git hashes it and shows the change.
                    entry = dataclasses.replace(entry, size=0, mtime=(0, 0))
                index[key] = entry
            elif key in index:
                del index[key]
        fsutil.checkpoint("git.index", self._index_file())
        try:
            index.write()
        except FileLocked as exc:
            raise VersionStoreError(
                f"the git index of {self.root} is locked (index.lock): another git command is running",
                hint="the commit is made; run the command again to bring the index in step",
            ) from exc

    @_git_errors
    def effective_changes(self, changes: dict[str, bytes | None]) -> dict[str, bytes | None]:
        """The part of ``changes`` that differs from HEAD."""
        head_files = self.entries_at(self.head(), changes)

        def differs(rel: str, data: bytes | None) -> bool:
            new = None if data is None else Blob.from_string(data).id
            return new != (head_files[rel][1] if rel in head_files else None)

        return {rel: data for rel, data in changes.items() if differs(rel, data)}

    def clear_stale_locks(self, *, since: float, wait: float = _STALE_LOCK_WAIT_SECONDS) -> list[str]:
        """Remove index.lock and the checked-out branch's ref lock when a process killed while
        writing them left them behind (they would block every later commit, as they block git).

        Only for a change known to be interrupted (its journal, written at ``since``, outlived
        its writer): a lock older than that is not judged, and a younger one is first given
        ``wait`` seconds to go away, as a live git's would within milliseconds.
        """
        control = Path(self.repo.controldir())
        candidates = [Path(os.fsdecode(self.repo.index_path()) + ".lock"), control / "HEAD.lock"]
        chain, _ = self.repo.refs.follow(Ref(b"HEAD"))
        if chain and chain[-1] != b"HEAD":
            candidates.append(control / (os.fsdecode(chain[-1]) + ".lock"))
        removed: list[str] = []
        for lock in candidates:
            try:
                if lock.stat().st_mtime < since - 1:
                    continue
            except FileNotFoundError:
                continue
            deadline = time.monotonic() + wait
            while lock.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if lock.exists():
                fsutil.remove(lock, site="git.stale_lock")
                removed.append(lock.relative_to(control).as_posix())
        return removed

    def clear_stale_object_locks(self, *, wait: float = 0.5) -> list[str]:
        """Remove ``objects/xx/<id>.lock`` files a killed writer left behind.

        Only dulwich makes these (git writes objects through ``tmp_obj_*`` files), and a live
        write lasts milliseconds, so a lock still there after ``wait`` seconds is dead. Left in
        place it fails ``git fsck`` and, were that object written again, every later commit.
        Callers hold the Dream lock, so no other Dream run is writing objects meanwhile.
        """
        objects = Path(os.fspath(getattr(self.repo.object_store, "path", Path(self.repo.commondir()) / "objects")))
        locks = [p for p in objects.glob("[0-9a-f][0-9a-f]/*.lock") if p.is_file()]
        if not locks:
            return []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(p.exists() for p in locks):
            time.sleep(0.05)
        removed: list[str] = []
        for lock in locks:
            if lock.exists():
                fsutil.remove(lock, site="git.stale_lock")
                removed.append(lock.relative_to(objects).as_posix())
        return removed

    @_git_errors
    def commit(self, changes: dict[str, bytes | None], message: str) -> str | None:
        """Commit the given contents (None deletes) as they already are on disk; None if no change."""
        self.check_paths(changes)
        effective = self.effective_changes(changes)
        if not effective:
            return None
        sha, base = self.build_commit(effective, message)
        self.move_head(sha, base, message.split("\n", 1)[0])
        self.sync_index(effective, sha)
        return sha

    @_git_errors
    def commit_paths(self, paths: Iterable[str], message: str) -> str | None:
        """Commit the on-disk state of ``paths`` (missing files are deletions)."""
        changes: dict[str, bytes | None] = {rel: self.fs.read(rel) for rel in paths}
        return self.commit(changes, message)

    def write_files(self, contents: dict[str, bytes | None]) -> None:
        """Write (or delete) workspace files durably; used after a commit lands.

        Every path is checked first (nothing is written when one is refused), and each is
        reached without following a symlink (``adapters.rooted``): a symlinked folder on the
        way is an error, never a door out of the workspace."""
        self.check_paths(contents)
        for rel, data in contents.items():
            if data is None:
                self.fs.remove(rel, site="memory.remove")
            else:
                self.fs.write(rel, data, site="memory.write")

    @_git_errors
    def checkout_branch(self, name: str) -> bool:
        """Make ``name`` the checked-out branch; create it from HEAD when missing (True if created).

        Switching to an existing branch that points elsewhere rewrites the versioned memory files
        to that branch's content (only those), after checking that none of them has unsaved edits.
        """
        problem = branch_name_problem(name)
        if problem is not None:
            raise UsageError(
                f"--branch {describe(name)} is not a branch name git accepts ({problem})",
                hint="name a branch as `git check-ref-format --branch` accepts it, e.g. memory/dream",
            )
        busy = self.in_progress()
        if busy is not None:
            what, fix = busy
            raise RepositoryStateError(f"cannot switch to branch {name}: {self.root} is in the middle of {what}: {fix}")
        ref = Ref(HEADS + name.encode("utf-8"))
        existing = _branches(self.repo).get(name.encode("utf-8"))
        head = self.head()
        if existing is None:
            if head is not None:
                self.repo.refs.add_if_new(ref, _oid(head), message=b"branch: created by dream-memory")
            self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
            return True
        target = existing.decode("ascii")
        if self.branch() == name:
            return False
        if target != head:
            dirty = self.dirty()
            if dirty:
                raise VersionStoreError(
                    f"cannot switch to branch {name}: memory files have uncommitted edits ({', '.join(dirty)})"
                )
            old_files = self.files_at(head)
            new_files = self.files_at(target)
            other = self._other_differences(head, target)
            if other:
                raise VersionStoreError(
                    f"cannot switch to branch {name}: it differs from HEAD outside the memory files ({other[0]}, ...)",
                    hint="check the branch out with git before running Dream",
                )
            writes: dict[str, bytes | None] = {}
            for rel in sorted(set(old_files) | set(new_files)):
                if old_files.get(rel) != new_files.get(rel):
                    writes[rel] = self.blob(new_files[rel][1]) if rel in new_files else None
            self.write_files(writes)
            self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
            self.sync_index(writes, target)
            return False
        self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
        return False

    @_git_errors
    def _other_differences(self, a: str | None, b: str | None) -> list[str]:
        """Repository paths outside this workspace's versioned files that differ between commits."""

        def everything(sha: str | None) -> dict[bytes, bytes]:
            if sha is None:
                return {}
            tree = self._commit(sha).tree
            return {
                e.path: e.sha
                for e in self.repo.object_store.iter_tree_contents(tree)
                if e.path is not None and e.sha is not None
            }

        left, right = everything(a), everything(b)
        out: list[str] = []
        for path in sorted(set(left) | set(right)):
            if left.get(path) == right.get(path):
                continue
            rel = self._rel(path)
            if rel is None or not (self.is_versioned(rel) or layout.matches_any(rel, layout.CARRIED_PATTERNS)):
                out.append(path.decode("utf-8", errors="replace"))
        return out


class _NoClock:
    """The clock of a repository opened for reading: it never signs a commit or a ref."""

    def now(self) -> datetime:
        raise VersionStoreError("internal error: a repository opened read-only was asked to write")

    def monotonic(self) -> float:
        return time.monotonic()


READ_ONLY_AUTHOR = "dream-memory (read-only) <read-only@dream-memory.invalid>"


def open_readonly(workspace: Path) -> GitStore | None:
    """The repository versioning ``workspace``, opened to read commits (``dream search --at``,
    the evaluation's history checks): nothing is created, and it has no author or clock to write
    with. None when the workspace is not inside a repository."""
    return GitStore.open(workspace, author=READ_ONLY_AUTHOR, clock=_NoClock(), create=False)


def _half_created(git_dir: Path) -> bool:
    """A .git folder our own creation left without HEAD, holding no object: git cannot use it,
    and there is nothing in it to keep."""
    if not git_dir.is_dir() or (git_dir / "HEAD").exists():
        return False
    objects = git_dir / "objects"
    return not objects.is_dir() or not any(p.is_file() for p in objects.rglob("*") if p.parent.name not in ("info",))


def _is_ours(workspace: Path) -> bool:
    """A repository at the workspace root is ours when its .gitignore carries our block."""
    text = fsutil.read_text(workspace / ".gitignore")
    return text is not None and GITIGNORE_BEGIN in text


_RACY_SECONDS = 2.0


def _apply_tree_changes(
    store: BaseObjectStore,
    tree_id: bytes | None,
    changes: list[tuple[list[bytes], int, ObjectID | None]],
    add: Callable[[ShaFile], None],
) -> ObjectID | None:
    """The tree ``tree_id`` with ``changes`` (path parts, mode, blob; None deletes) applied.

    Returns None for an empty tree and stores only non-empty trees: dulwich's
    ``commit_tree_changes`` stores the emptied subtree of a deleted folder, which
    ``git fsck`` then reports as a dangling object.
    """
    tree = Tree()
    if tree_id is not None:
        old = store[_oid(tree_id)]
        assert isinstance(old, Tree)
        for item in old.iteritems():
            tree[item.path] = (item.mode, item.sha)
    nested: dict[bytes, list[tuple[list[bytes], int, ObjectID | None]]] = {}
    for parts, mode, sha in changes:
        name = parts[0]
        if len(parts) > 1:
            nested.setdefault(name, []).append((parts[1:], mode, sha))
        elif sha is None:
            if name in tree:
                del tree[name]
        else:
            tree[name] = (mode, sha)
    for name, sub in nested.items():
        base: bytes | None = None
        if name in tree:
            mode, sha = tree[name]
            base = sha if stat.S_ISDIR(mode) else None
        sub_id = _apply_tree_changes(store, base, sub, add)
        if sub_id is None:
            if name in tree:
                del tree[name]
        else:
            tree[name] = (stat.S_IFDIR, sub_id)
    if not len(tree):
        return None
    add(tree)
    return tree.id


def _index_entry(index: Index | None, key: bytes) -> IndexEntry | None:
    if index is None:
        return None
    try:
        entry = index[key]
    except KeyError:
        return None
    return None if isinstance(entry, ConflictedIndexEntry) else entry


def _stat_matches(entry: IndexEntry, st: os.stat_result) -> bool:
    """True when the index's stat data proves the file unchanged (git's stat cache).

    A file modified within the last moments is hashed anyway: timestamps are coarse, and an edit
    of the same size right after a commit would otherwise look clean ("racy git").
    """
    size = entry.size
    mtime = entry.mtime
    ino = entry.ino
    if size != st.st_size or (ino and ino != st.st_ino):
        return False
    if st.st_mtime > time.time() - _RACY_SECONDS:
        return False
    if isinstance(mtime, tuple):
        seconds, nanos = mtime
        return bool(seconds == int(st.st_mtime) and nanos == st.st_mtime_ns % 1_000_000_000)
    return bool(int(mtime) == int(st.st_mtime))
