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
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dulwich.diff_tree import tree_changes
from dulwich.errors import NotGitRepository
from dulwich.file import FileLocked
from dulwich.index import ConflictedIndexEntry, Index, IndexEntry, index_entry_from_stat
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree, hex_to_filename
from dulwich.refs import Ref
from dulwich.repo import Repo

from dream_memory.adapters import fsutil
from dream_memory.core import layout
from dream_memory.core.ports import Clock
from dream_memory.errors import UnknownRevision, VersionStoreError

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
        """Tracked paths that exist as regular files in the workspace (symlinks never count)."""
        found: list[str] = []
        for top in layout.tracked_roots():
            base = self.workspace / top
            if base.is_symlink():
                continue
            if base.is_file():
                if self.is_versioned(top):
                    found.append(top)
                continue
            if not base.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if not (Path(dirpath) / d).is_symlink() and d != ".git")
                for name in sorted(filenames):
                    full = Path(dirpath) / name
                    if full.is_symlink() or not full.is_file():
                        continue
                    rel = full.relative_to(self.workspace).as_posix()
                    if self.is_versioned(rel):
                        found.append(rel)
        if self.created and (self.workspace / ".gitignore").is_file():
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

    def _commit(self, sha: str | bytes) -> Commit:
        text = sha.decode("ascii") if isinstance(sha, bytes) else sha
        try:
            obj = self.repo[_oid(text)]
        except (KeyError, ValueError):
            raise UnknownRevision(f"no commit {text}") from None
        if not isinstance(obj, Commit):
            raise UnknownRevision(f"{text} is not a commit")
        return obj

    def _tree_files(self, tree_id: bytes | None) -> dict[str, tuple[int, bytes]]:
        """Workspace-relative path -> (mode, blob sha) under the workspace prefix."""
        if tree_id is None:
            return {}
        files: dict[str, tuple[int, bytes]] = {}
        tree = self.repo[tree_id]
        if self.prefix:
            for part in self.prefix.split("/"):
                assert isinstance(tree, Tree)
                try:
                    mode, sub = tree[part.encode("utf-8")]
                except KeyError:
                    return {}
                if not stat.S_ISDIR(mode):
                    return {}
                tree = self.repo[sub]
        assert isinstance(tree, Tree)
        for entry in self.repo.object_store.iter_tree_contents(tree.id):
            path = entry.path
            assert path is not None and entry.mode is not None and entry.sha is not None
            if stat.S_ISREG(entry.mode):
                files[path.decode("utf-8", errors="surrogateescape")] = (entry.mode, entry.sha)
        return files

    def files_at(self, sha: str | None) -> dict[str, tuple[int, bytes]]:
        if sha is None:
            return {}
        return self._tree_files(self._commit(sha).tree)

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
                obj = self.repo[_oid(tree_id)]
                assert isinstance(obj, Tree)
                trees[tree_id] = obj
            return trees[tree_id]

        found: dict[str, tuple[int, bytes]] = {}
        for rel in paths:
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

    def blob(self, blob_sha: bytes) -> bytes:
        obj = self.repo[blob_sha]
        assert isinstance(obj, Blob)
        return obj.data

    def read_at(self, sha: str, rel: str) -> bytes | None:
        entry = self.files_at(sha).get(rel)
        return None if entry is None else self.blob(entry[1])

    def first_parent_chain(self, start: str | None = None) -> Iterator[Commit]:
        sha = start or self.head()
        while sha:
            commit = self._commit(sha)
            yield commit
            sha = commit.parents[0].decode("ascii") if commit.parents else None

    def info(self, sha: str, *, with_files: bool = True, against: str | None = None) -> CommitInfo:
        commit = self._commit(sha)
        parent = commit.parents[0].decode("ascii") if commit.parents else None
        base = against if against is not None else parent
        files = tuple(self.changes(base, sha)) if with_files else ()
        message = commit.message.decode("utf-8", errors="replace")
        return CommitInfo(
            sha=sha,
            subject=message.split("\n", 1)[0],
            message=message,
            time=_format_time(commit.commit_time, commit.commit_timezone),
            author=commit.author.decode("utf-8", errors="replace"),
            parent=parent,
            files=files,
        )

    def changed_paths(self, old: str | None, new: str | None) -> list[str]:
        """Workspace-relative paths of the regular files that differ between two commits (None:
        the empty tree). Only subtrees that differ are read, so this stays cheap in a large
        repository with a long history."""
        old_tree = self._commit(old).tree if old else None
        new_tree = self._commit(new).tree if new else None
        within = [self.prefix.encode("utf-8")] if self.prefix else None
        found: set[str] = set()
        for change in tree_changes(self.repo.object_store, old_tree, new_tree, paths=within):
            for entry in (change.old, change.new):
                if entry is None or entry.path is None or entry.mode is None or not stat.S_ISREG(entry.mode):
                    continue
                rel = self._rel(entry.path)
                if rel is not None:
                    found.add(rel)
        return sorted(found)

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

    def all_commits(self) -> Iterator[str]:
        """Every commit reachable from HEAD and the local branches, each once."""
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
            stack.extend(p.decode("ascii") for p in commit.parents)

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
                raise UnknownRevision(f"{rev!r} goes past the first commit")
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

    def _blob_id_of_file(self, path: Path) -> bytes:
        return Blob.from_string(path.read_bytes()).id

    def worktree_state(self, paths: Iterable[str] | None = None) -> dict[str, bytes | None]:
        """Blob ids of tracked files as they are on disk (None: missing)."""
        wanted = self.worktree_paths() if paths is None else list(paths)
        index = self._open_index()
        state: dict[str, bytes | None] = {}
        for rel in wanted:
            full = self.workspace / rel
            try:
                st = full.lstat()
            except (FileNotFoundError, NotADirectoryError):
                state[rel] = None
                continue
            if not stat.S_ISREG(st.st_mode):
                state[rel] = None
                continue
            entry = _index_entry(index, self.repo_path(rel))
            if entry is not None and _stat_matches(entry, st):
                state[rel] = entry.sha
            else:
                state[rel] = self._blob_id_of_file(full)
        return state

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

    def build_commit(self, changes: dict[str, bytes | None], message: str) -> tuple[str, str | None]:
        """Write blobs, trees and a commit object for ``changes`` on top of HEAD; the ref is not
        moved yet. Returns (new sha, base sha)."""
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
                mode = EXEC_MODE if _is_executable(self.workspace / rel) else FILE_MODE
                tree_changes.append((parts, mode, blob.id))
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
            full = self.workspace / rel
            if rel in files and full.is_file() and not full.is_symlink():
                mode, blob_id = files[rel]
                st = full.lstat()
                entry = index_entry_from_stat(st, _oid(blob_id), mode)
                if self._blob_id_of_file(full) != blob_id:
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

    def commit(self, changes: dict[str, bytes | None], message: str) -> str | None:
        """Commit the given contents (None deletes) as they already are on disk; None if no change."""
        effective = self.effective_changes(changes)
        if not effective:
            return None
        sha, base = self.build_commit(effective, message)
        self.move_head(sha, base, message.split("\n", 1)[0])
        self.sync_index(effective, sha)
        return sha

    def commit_paths(self, paths: Iterable[str], message: str) -> str | None:
        """Commit the on-disk state of ``paths`` (missing files are deletions)."""
        changes: dict[str, bytes | None] = {}
        for rel in paths:
            full = self.workspace / rel
            changes[rel] = full.read_bytes() if full.is_file() and not full.is_symlink() else None
        return self.commit(changes, message)

    def write_files(self, contents: dict[str, bytes | None]) -> None:
        """Write (or delete) workspace files durably; used after a commit lands."""
        for rel, data in contents.items():
            full = self.workspace / rel
            if data is None:
                fsutil.remove(full, site="memory.remove")
                _prune_empty_dirs(full.parent, self.workspace)
            else:
                fsutil.atomic_write(full, data, site="memory.write")

    def checkout_branch(self, name: str) -> bool:
        """Make ``name`` the checked-out branch; create it from HEAD when missing (True if created).

        Switching to an existing branch that points elsewhere rewrites the versioned memory files
        to that branch's content (only those), after checking that none of them has unsaved edits.
        """
        if not _valid_branch_name(name):
            raise VersionStoreError(f"{name!r} is not a valid branch name")
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


def _is_executable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & 0o100)
    except FileNotFoundError:
        return False


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


def _prune_empty_dirs(folder: Path, stop: Path) -> None:
    """Remove folders a deletion left empty, up to but not including the workspace's own
    top-level folders (skills/, memory/ stay even when empty)."""
    current = folder
    while current.parent != stop and stop in current.parents:
        try:
            current.rmdir()
        except OSError:
            return
        current = current.parent


def _valid_branch_name(name: str) -> bool:
    if not name or name.startswith(("-", "/")) or name.endswith(("/", ".lock", ".")):
        return False
    if ".." in name or "//" in name or "@{" in name:
        return False
    return not any(c in name for c in " ~^:?*[\\\x7f") and all(ord(c) >= 32 for c in name)
