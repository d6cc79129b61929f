"""GitStore: versioned memory over dulwich (no git binary needed).

Commits are built at the object level (blobs, trees, commit, compare-and-set of the ref), never
through ``porcelain.commit``: that path would run repository hooks, may call gpg, and would sweep
whatever else a user has staged into our commit. Only the paths we name are ever written to the
tree or the index, so a workspace inside a larger repository leaves every other file alone.

Paths given to and returned from this class are workspace-relative POSIX strings; the repository
may sit above the workspace (``prefix``).

``GitStore`` is assembled from one class per seam, each in its module: ``base`` (the shared
state and error wrapping), ``reading`` (commits, trees, the log, changes), ``checks`` (refusals
before a write), ``worktree`` (the files on disk and the index), ``writing`` (commits and stale
locks) and ``branches``. This module opens (or creates) the repository and keeps the ignore
blocks in step.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dulwich.errors import NotGitRepository, ObjectFormatException
from dulwich.file import FileLocked
from dulwich.repo import Repo, UnsupportedExtension, UnsupportedVersion

from dream_memory.adapters import fsutil
from dream_memory.adapters.git.branches import Branches
from dream_memory.core.ports import Clock
from dream_memory.core.versions import (
    EXCLUDE_BEGIN,
    GITIGNORE_BEGIN,
    GITIGNORE_END,
    RUNTIME_PATTERNS,
    merge_block,
    merge_gitignore,
)
from dream_memory.errors import VersionStoreError

if TYPE_CHECKING:
    from dream_memory.adapters.git.ignores import IgnoreRule


class GitStore(Branches):
    """The repository that versions one workspace's memory."""

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
                import shutil  # rarely needed: kept out of every command's start-up

                shutil.rmtree(root / ".git")
                root = None
            own_because: IgnoreRule | None = None
            if root is not None:
                repo = _open_repo(root)
                standalone = root == workspace.resolve() and _is_ours(workspace)
                store = cls(repo, workspace, author=author, clock=clock, created=standalone)
                own_because = store.ignored_workspace() if create else None
                if own_because is None:
                    return store
                # The project ignores the workspace folder and holds nothing of it: its memory
                # gets a repository of its own there, which the project's git never sees.
                store.close()
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
        made = cls(repo, workspace, author=author, clock=clock, created=True)
        made.own_because = own_because
        return made

    def close(self) -> None:
        try:
            self.repo.close()
        except BufferError:
            # A pack's memory map still viewed by a live read cannot be unmapped: the map goes
            # with the process instead. Called from ``finally`` blocks, so raising here would
            # hide the error that ended the work.
            pass

    def __enter__(self) -> GitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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


def _open_repo(root: Path) -> Repo:
    """The repository at ``root``, or a VersionStoreError naming what is broken in its ``.git``.

    A ``.git`` file must name (``gitdir: <path>``) a folder that holds a repository: one naming
    a folder that is gone would otherwise open as an empty repository ("no versions yet"), and a
    run would write its objects into nowhere. A ``.git/config`` that does not parse, or a ``.git``
    file without its ``gitdir:`` line, is dulwich's ValueError: the same error, never a traceback.
    """
    dot_git = root / ".git"
    git_dir = dot_git
    if dot_git.is_file():
        named = gitfile_target(dot_git)
        if named is None:
            raise VersionStoreError(
                f"{dot_git} is a file without the `gitdir: <path>` line naming the repository it stands for",
                hint=f"git refuses it too (`invalid gitfile format`): write that line into {dot_git}, "
                "or move the file away to start a new repository",
            )
        git_dir = named
        if not (git_dir / "HEAD").is_file():
            what = "does not exist" if not git_dir.exists() else "holds no repository (no HEAD)"
            raise VersionStoreError(
                f"{dot_git} names the repository {git_dir}, which {what}",
                hint=f"put the repository back there or correct the path in {dot_git}; "
                "or move the .git file away to start a new repository",
            )
    # A linked worktree (`git worktree add`) is its own work tree whatever core.worktree the
    # shared config holds (a submodule's always holds one), as git reads it.
    linked = (git_dir / "commondir").is_file()
    try:
        repo = Repo(str(root), worktree=str(root)) if linked else Repo(str(root))
    except (ValueError, KeyError, UnsupportedVersion, UnsupportedExtension, ObjectFormatException) as exc:
        # ValueError, KeyError: a config line dulwich cannot parse (`[core`); the others: a
        # repository format or extension it does not know, a .git/shallow line that is no id.
        detail = str(exc).strip().strip("'\"")[:200] or type(exc).__name__
        if isinstance(exc, (UnsupportedVersion, UnsupportedExtension)):
            detail = f"{type(exc).__name__}: {detail}"
        config = git_dir / "config"
        if _unparsable(config):
            raise VersionStoreError(
                f"the git repository at {root} cannot be opened: {config} does not parse ({detail})",
                hint=f"`git config --list --file {config}` names the bad line: fix it by hand, then run again",
            ) from exc
        raise VersionStoreError(
            f"the git repository at {root} cannot be opened ({detail})",
            hint=f"`git -C {root} fsck` shows what is wrong with it: repair it, then run again",
        ) from exc
    object_format = _config_value(repo, b"extensions", b"objectformat")
    if object_format is not None and object_format.lower() != b"sha1":
        repo.close()
        raise VersionStoreError(
            f"the git repository at {root} uses {object_format.decode('utf-8', 'replace')} object ids; "
            "dream-memory reads and writes SHA-1 repositories only",
            hint="give Dream a repository of its own (`dream init` in a folder outside this one makes one)",
        )
    worktree = None if linked else _configured_worktree(repo, git_dir)
    if worktree is not None and worktree != root.resolve():
        repo.close()
        # dulwich would write the workspace's files as paths relative to that other folder
        # (tree entries named `..`, which git fsck flags): refused before anything is read.
        raise VersionStoreError(
            f"the git repository at {root} has core.worktree = {worktree}: its work tree is not this folder",
            hint=f"Dream commits only where the workspace is the work tree: `git -C {root} config --unset "
            "core.worktree` if that setting is a mistake, or give Dream a repository of its own",
        )
    return repo


def _configured_worktree(repo: Repo, git_dir: Path) -> Path | None:
    """``core.worktree`` resolved (a relative one is relative to the git folder), or None."""
    value = _config_value(repo, b"core", b"worktree")
    return None if value is None else (git_dir / os.fsdecode(value)).resolve()


def _config_value(repo: Repo, section: bytes, name: bytes) -> bytes | None:
    try:
        return repo.get_config().get((section,), name)
    except KeyError:
        return None


def gitfile_target(dot_git: Path) -> Path | None:
    """The repository a ``.git`` file (a worktree's, a submodule's) names on its ``gitdir: <path>``
    line, relative to the file's folder; None when the file does not start with that line."""
    data = dot_git.read_bytes()
    if not data.startswith(b"gitdir: "):
        return None
    return dot_git.parent / os.fsdecode(data[len(b"gitdir: ") :].split(b"\n", 1)[0].rstrip(b"\r"))


def git_dirs(workspace: Path) -> list[Path]:
    """The git directories of the repository versioning ``workspace`` (found as ``GitStore.open``
    finds it), as written: its ``.git``, and when that is a file, the folder it names and that
    folder's common directory (a worktree's). Empty when no repository encloses it."""
    top = GitStore.find_enclosing(workspace)
    if top is None:
        return []
    dot_git = top / ".git"
    try:
        named = gitfile_target(dot_git) if dot_git.is_file() else None
    except OSError:
        named = None  # unreadable: the .git path itself is all that can be named
    if named is None:
        return [dot_git]
    common = (fsutil.read_text(named / "commondir") or "").strip()
    return [dot_git, named, *([named / common] if common else [])]


def _unparsable(config: Path) -> bool:
    from dulwich.config import ConfigFile

    try:
        ConfigFile.from_path(str(config))
    except (ValueError, KeyError):
        return True
    except OSError:
        return False
    return False


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
