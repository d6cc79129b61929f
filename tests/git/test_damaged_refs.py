"""A repository damaged around its refs, its format or its packs (found by a sweep of 58 kinds of
damage): every command that reads it exits 1 with one `dream: error:` line naming the damage,
never a traceback, and `dream run` writes nothing. Before, lost or emptied refs read as "no
versions yet" and a run started a new root commit beside the old history (exit 0); a
`core.worktree` naming another folder made runs commit trees with `..` entries; the rest were
tracebacks (an unknown repository format, a garbage .git/shallow, a ref loop, a pack index cut
short, garbage in packed-refs) or exit 2, as if the user had typed a bad revision."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dream_memory.testing.hostile import cli


def _git(ws: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.parent / "home")}
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, env=env, check=True).stdout


def _refs_gone(ws: Path) -> None:
    shutil.rmtree(ws / ".git" / "refs")


def _head_empty(ws: Path) -> None:
    (ws / ".git" / "HEAD").write_bytes(b"")


def _branch_empty(ws: Path) -> None:
    (ws / ".git" / "refs" / "heads" / "main").write_bytes(b"")


def _branch_garbage(ws: Path) -> None:
    (ws / ".git" / "refs" / "heads" / "main").write_bytes(b"\x8b\x00 not hex at all \xff" * 4)


def _branch_first_line_empty(ws: Path) -> None:
    # Git stops reading at the first newline: such a ref holds nothing.
    (ws / ".git" / "refs" / "heads" / "main").write_bytes(b"\n" + b"\x17garbage" * 8)


def _branch_missing_commit(ws: Path) -> None:
    (ws / ".git" / "refs" / "heads" / "main").write_text("0123456789abcdef0123456789abcdef01234567\n")


def _ref_loop(ws: Path) -> None:
    (ws / ".git" / "refs" / "heads" / "main").write_text("ref: refs/heads/main\n")


def _packed_refs_garbage(ws: Path) -> None:
    _git(ws, "pack-refs", "--all")
    with (ws / ".git" / "packed-refs").open("a") as refs:
        refs.write("this is garbage\n")


def _format_unknown(ws: Path) -> None:
    _git(ws, "config", "core.repositoryformatversion", "2")


def _shallow_garbage(ws: Path) -> None:
    (ws / ".git" / "shallow").write_text("not a sha at all\n")


def _pack_index_cut(ws: Path) -> None:
    for index in (ws / ".git" / "objects" / "pack").glob("*.idx"):
        index.chmod(0o644)
        index.write_bytes(index.read_bytes()[:500])


def _worktree_elsewhere(ws: Path) -> None:
    (ws.parent / "elsewhere").mkdir()
    _git(ws, "config", "core.worktree", str(ws.parent / "elsewhere"))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "refs folder gone": (_refs_gone, "no refs folder"),
    "HEAD empty": (_head_empty, "HEAD is empty"),
    "branch file empty": (_branch_empty, "holds no commit id (it is empty)"),
    "branch file garbage": (_branch_garbage, "not a commit id"),
    "branch file's first line empty": (_branch_first_line_empty, "its first line is empty"),
    "branch names a missing commit": (_branch_missing_commit, "which the repository lacks"),
    "ref loop": (_ref_loop, "a ref cannot be read"),
    "packed-refs garbage": (_packed_refs_garbage, "a ref cannot be read"),
    "unknown repository format": (_format_unknown, "UnsupportedVersion"),
    "shallow file garbage": (_shallow_garbage, "cannot be opened"),
    "pack index cut short": (_pack_index_cut, "is damaged"),
    "core.worktree elsewhere": (_worktree_elsewhere, "core.worktree"),
}


def _tree_listing(ws: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(ws)): path.read_bytes()
        for path in sorted(ws.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _new_workspace(tmp_path: Path) -> tuple[Path, Callable[..., Any]]:
    """A workspace made by `dream init`, and how to run a command on it (in-process)."""
    ws = tmp_path / "ws"
    env = {"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    (tmp_path / "home").mkdir()

    def run(*args: str) -> Any:
        return cli(*args, "--workspace", str(ws), env=env)

    assert run("init").code == 0
    return ws, run


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_repository_is_one_error_line_and_a_run_writes_nothing(tmp_path: Path, case: str) -> None:
    damage, named = DAMAGE[case]
    ws, run = _new_workspace(tmp_path)
    assert run("append", "- [durable] user likes tea").code == 0
    assert run("run", "--model", "offline").code == 0
    assert run("append", "- [durable] user lives in Paris").code == 0
    damage(ws)
    before = _tree_listing(ws)
    for command in (("status",), ("log",), ("restore",)):
        outcome = run(*command)
        assert outcome.refused(1), (command, outcome)
        assert named in outcome.err, (command, outcome)
    outcome = run("run", "--model", "offline", "--json")
    assert outcome.code == 1 and outcome.crash is None, outcome
    assert named in json.loads(outcome.out)["errors"][0], outcome.out
    assert _tree_listing(ws) == before  # no commit, no cursor moved, nothing rewritten


def test_a_missing_parent_commit_is_damage_not_a_mistyped_revision(tmp_path: Path) -> None:
    """A parent commit gone from the object store: `dream log` and `dream restore` walk to it and
    exit 1 naming what the repository lacks (before: exit 2, "no commit ...", as if the user had
    typed a bad revision)."""
    from dream_memory.testing.hostile import loose_object

    ws = tmp_path / "ws"
    env = {"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    (tmp_path / "home").mkdir()
    assert cli("init", "--workspace", str(ws), env=env).code == 0
    assert cli("append", "- [durable] user likes tea", "--workspace", str(ws), env=env).code == 0
    assert cli("run", "--model", "offline", "--workspace", str(ws), env=env).code == 0
    parent = _git(ws, "rev-parse", "HEAD~1").strip()
    loose_object(ws, parent).unlink()
    for command in ("log", "restore"):
        outcome = cli(command, "--workspace", str(ws), env=env)
        assert outcome.refused(1), (command, outcome)
        assert f"lacks the commit {parent}" in outcome.err, outcome


def test_a_linked_worktree_of_a_submodule_is_its_own_work_tree(tmp_path: Path) -> None:
    """A submodule's shared config always holds a core.worktree (its main checkout); a linked
    worktree made from it (`git worktree add`) is still its own work tree, as git reads it: Dream
    works there, and its commit holds the workspace's files at their own paths."""
    env = {"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    (tmp_path / "home").mkdir()
    source = tmp_path / "source"
    assert cli("init", "--workspace", str(source), env=env).code == 0
    sup = tmp_path / "sup"
    sup.mkdir()
    _git(sup, "init", "-q", "-b", "main")
    _git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "sub")
    _git(sup / "sub", "worktree", "add", "-q", str(tmp_path / "linked"), "-b", "linked")
    ws = tmp_path / "linked"
    assert cli("append", "- [durable] user likes tea", "--workspace", str(ws), env=env).code == 0
    outcome = cli("run", "--model", "offline", "--workspace", str(ws), env=env)
    assert outcome.code == 0, outcome
    assert "USER.md" in _git(ws, "ls-tree", "--name-only", "HEAD").split()
    assert _git(ws, "status", "--porcelain") == ""


def test_a_sha256_repository_is_refused_as_unsupported_not_damaged(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "home").mkdir()
    _git(ws, "init", "-q", "--object-format=sha256", "-b", "main")
    (ws / "notes.md").write_text("x\n")
    _git(ws, "add", "notes.md")
    _git(ws, "-c", "user.name=u", "-c", "user.email=u@localhost", "commit", "-q", "-m", "first")
    env = {"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    outcome = cli("init", "--workspace", str(ws), env=env)
    assert outcome.refused(1), outcome
    assert "sha256 object ids" in outcome.err and "damaged" not in outcome.err, outcome


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "purge"])
def test_a_garbage_notes_ref_stops_a_purge_with_one_error_line(tmp_path: Path, dry_run: bool) -> None:
    """`dream forget` walks every ref, notes included: one holding garbage was a dulwich
    AssertionError traceback. It is damage named with its ref, exit 1, and nothing is purged."""
    ws, run = _new_workspace(tmp_path)
    assert run("append", "- [durable] user likes green tea").code == 0
    assert run("run", "--model", "offline").code == 0
    (ws / ".git" / "refs" / "notes" / "dream").write_text("garbage\n")
    before = _tree_listing(ws)
    outcome = run("forget", "--purge", "green tea", *(["--dry-run"] if dry_run else []))
    assert outcome.refused(1), outcome
    assert "the ref refs/notes/dream holds b'garbage', not an object id; nothing was changed" in outcome.err, outcome
    after = _tree_listing(ws)
    # The purge key may be made on the way (memory/.forgotten.json, naming no purge); nothing else.
    record = after.pop("memory/.forgotten.json", None)
    assert record is None or json.loads(record)["purges"] == []
    assert after == before
