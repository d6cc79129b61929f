"""Hostile input for tests: git commits whose trees hold names git's own tools refuse to make.

``git`` never writes a tree entry called ``..``, one holding a slash, or a ``.git`` folder, but
anyone can: these builders write such trees object by object (with dulwich), so the tests can
check that no door of dream-memory writes, deletes or serves a path such a commit names.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from dream_memory.core.bounded import split_lines

RawPath = tuple[bytes, ...]


def _tree_dict(repo: Repo, tree_id: bytes) -> dict[bytes, Any]:
    tree = repo[tree_id]
    assert isinstance(tree, Tree)
    out: dict[bytes, Any] = {}
    for item in tree.iteritems():
        assert item.path is not None and item.mode is not None and item.sha is not None
        out[item.path] = _tree_dict(repo, item.sha) if stat.S_ISDIR(item.mode) else (item.mode, item.sha)
    return out


def _write_tree(repo: Repo, node: dict[bytes, Any]) -> ObjectID:
    tree = Tree()
    for name, value in node.items():
        if isinstance(value, dict):
            tree.add(name, stat.S_IFDIR, _write_tree(repo, value))
        else:
            tree.add(name, value[0], value[1])
    repo.object_store.add_object(tree)
    return tree.id


def raw_commit(
    repo_root: Path,
    files: Mapping[RawPath, bytes | None],
    *,
    message: str = "dream: hostile",
    parent: str | None = "HEAD",
    move: str | None = None,
    mode: int = 0o100644,
) -> str:
    """A commit on top of ``parent`` (its tree kept) with ``files`` set at raw name paths (None
    removes); ``move``: also point this ref (e.g. ``refs/heads/main``) at it. Returns its sha."""
    with Repo(str(repo_root)) as repo:
        parents: list[ObjectID] = []
        root: dict[bytes, Any] = {}
        if parent is not None:
            sha = repo.head() if parent == "HEAD" else ObjectID(parent.encode("ascii"))
            commit = repo[sha]
            assert isinstance(commit, Commit)
            parents = [commit.id]
            root = _tree_dict(repo, commit.tree)
        for names, data in files.items():
            node = root
            for name in names[:-1]:
                child = node.get(name)
                if not isinstance(child, dict):
                    child = node[name] = {}
                node = child
            if data is None:
                node.pop(names[-1], None)
            else:
                blob = Blob.from_string(data)
                repo.object_store.add_object(blob)
                node[names[-1]] = (mode, blob.id)
        new = Commit()
        new.tree = _write_tree(repo, root)
        new.parents = parents
        new.author = new.committer = b"someone <someone@example.com>"
        new.author_time = new.commit_time = 1_775_000_000
        new.author_timezone = new.commit_timezone = 0
        new.message = (message.rstrip("\n") + "\n").encode("utf-8")
        repo.object_store.add_object(new)
        if move is not None:
            repo.refs[Ref(move.encode("utf-8"))] = new.id
        return new.id.decode("ascii")


class Outcome:
    """What one CLI command did: exit code, stdout, stderr, and the traceback if it crashed."""

    def __init__(self, code: int, out: str, err: str, crash: str | None) -> None:
        self.code = code
        self.out = out
        self.err = err
        self.crash = crash

    def __repr__(self) -> str:
        return f"Outcome(code={self.code}, err={self.err[-400:]!r}, crash={self.crash is not None})"

    def refused(self, *codes: int) -> bool:
        """Exit 1 or 2 (or one of ``codes``) with a ``dream: error:`` cause on stderr, no traceback."""
        wanted = codes or (1, 2)
        first = next((line for line in split_lines(self.err) if line.startswith("dream: error: ")), None)
        return (
            self.crash is None and self.code in wanted and first is not None and "Traceback" not in self.err + self.out
        )


def cli(*args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> Outcome:
    """Run ``dream ARGS`` in this process (click's runner): quick enough for property tests,
    and a crash is caught with its traceback instead of ending the test run."""
    import traceback

    from click.testing import CliRunner

    from dream_memory.entrypoints.cli import cli as group

    result = CliRunner().invoke(group, list(args), env=dict(env or {}), input=input, catch_exceptions=True)
    crash = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(result.exception))
    return Outcome(result.exit_code, result.stdout, result.stderr, crash)


def loose_object(workspace: Path, sha: str) -> Path:
    """The loose file of object ``sha`` in the repository at ``workspace``, for a test that
    damages it. dream-memory writes a commit's objects as one pack: a pack holding ``sha`` is
    first unpacked (every object in it written loose, the pack removed), so the damaged file is
    the only copy every reader finds."""
    objects = workspace / ".git" / "objects"
    path = objects / sha[:2] / sha[2:]
    if path.exists():
        return path
    with Repo(str(workspace)) as repo:
        store = repo.object_store
        for pack in list(store.packs):
            if ObjectID(sha.encode("ascii")) not in pack:
                continue
            for obj in list(pack.iterobjects()):
                store.add_object(obj)
            base = Path(pack._basename)
            pack.close()
            for suffix in (".idx", ".pack", ".rev", ".bitmap"):
                base.with_name(base.name + suffix).unlink(missing_ok=True)
    assert path.exists(), f"object {sha} is not in {objects}"
    return path
