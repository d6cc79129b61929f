"""Every CLI command on each broken repository of issue 14 ends with exit 0, 1 or 2 and, when it
fails, one line saying why; never a traceback.

What a user would notice if this failed: some command they did not think of (`dream context`,
`dream entity --at HEAD`, `dream init` again) crashing with a Python traceback in a damaged,
crafted, shallow, conflicted or detached repository, where another command gave a clear answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.core.state import DreamState, HeldBatch, HeldChange
from dream_memory.testing.hostile import cli, loose_object, raw_commit


def _git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    who = ["-c", "user.name=Someone", "-c", "user.email=someone@example.com"]
    proc = subprocess.run(["git", *who, *args], cwd=cwd, capture_output=True, text=True, env=env)
    return proc.stdout


def _damaged(ws: Path) -> Path:
    head = _git(ws, "rev-parse", "HEAD").strip()
    path = loose_object(ws, head)
    raw = zlib.decompress(path.read_bytes())
    path.chmod(0o644)
    path.write_bytes(zlib.compress(raw[:40]))
    return ws


def _crafted_head(ws: Path) -> Path:
    raw_commit(ws, {(b"skills", b"..", b"..", b"outside.md"): b"x\n"}, move="refs/heads/main")
    return ws


def _held_not_json(ws: Path) -> Path:
    state = DreamState().add_held(HeldBatch("1-2", 1, 2, "r", "t", ()))
    files = {
        (b"memory", b".dream_state.json"): state.to_json().encode(),
        (b"memory", b".dream_held", b"1-2", b"held.json"): b"{not json",
    }
    raw_commit(ws, files, move="refs/heads/main")
    _git(ws, "reset", "-q", "--hard")
    return ws


def _held_change_hostile(ws: Path) -> Path:
    """A held change whose record sends its text into .git/hooks (and one whose id leaves the folder)."""
    state = DreamState().add_changes(
        (
            HeldChange("1-2.1", ".git/hooks/post-commit", 1, 2, "r", "t", 1, 1),
            HeldChange("../../x", "USER.md", 1, 2, "r", "t"),
        )
    )
    record = {"id": "1-2.1", "path": ".git/hooks/post-commit", "base": None, "theirs": "#!/bin/sh\necho owned\n"}
    files = {
        (b"memory", b".dream_state.json"): state.to_json().encode(),
        (b"memory", b".dream_held", b"1-2.1", b"change.json"): json.dumps(record).encode(),
    }
    raw_commit(ws, files, move="refs/heads/main")
    _git(ws, "reset", "-q", "--hard")
    return ws


def _merging(ws: Path) -> Path:
    _git(ws, "checkout", "-q", "-b", "other")
    (ws / "USER.md").write_text("# User\n- other\n")
    _git(ws, "commit", "-qam", "other")
    _git(ws, "checkout", "-q", "main")
    (ws / "USER.md").write_text("# User\n- main\n")
    _git(ws, "commit", "-qam", "main")
    _git(ws, "merge", "other")
    return ws


def _detached(ws: Path) -> Path:
    _git(ws, "checkout", "-q", "--detach")
    return ws


def _shallow(ws: Path) -> Path:
    clone = ws.parent / "clone"
    _git(ws.parent, "clone", "-q", "--depth", "1", ws.as_uri(), str(clone))
    return clone


BROKEN: dict[str, Callable[[Path], Path]] = {
    "damaged commit object": _damaged,
    "crafted tree at HEAD": _crafted_head,
    "held record not JSON": _held_not_json,
    "held change record names .git/hooks": _held_change_hostile,
    "merge in progress": _merging,
    "detached HEAD of its own repository": _detached,
    "shallow clone": _shallow,
}

COMMANDS: list[tuple[str, ...]] = [
    ("init",),
    ("status",),
    ("status", "--json"),
    ("append", "the user likes tea"),
    ("run", "--model", "offline"),
    ("run", "--model", "offline", "--dry-run"),
    ("run", "--model", "offline", "--branch", "HEAD"),
    ("log",),
    ("log", "HEAD"),
    ("log", "HEAD~1..HEAD"),
    ("restore",),
    ("restore", "HEAD"),
    ("restore", "--apply-held", "1-2"),
    ("restore", "--discard-held", "1-2"),
    ("restore", "--apply-held", "1-2.1"),
    ("review",),
    ("review", "--json"),
    ("review", "show", "1-2"),
    ("review", "show", "1-2.1"),
    ("review", "accept", "1-2.1"),
    ("review", "accept", "--all"),
    ("review", "reject", "1-2"),
    ("review", "reject", "--all"),
    ("context",),
    ("entity", "x"),
    ("section", "memory"),
    ("search", "tea"),
    ("resolve", "/srv/x"),
    ("search", "tea", "--at", "HEAD"),
    ("section", "memory", "--at", "HEAD"),
    ("consolidate", "--all", "--model", "offline"),
    ("prompt",),
]


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_every_command_on_a_broken_repository_answers_without_a_traceback(tmp_path: Path, broken: str) -> None:
    """For each broken repository, every command exits 0, 1 or 2; a failing one prints a
    `dream: error:` line (or, for `dream run` and `dream consolidate`, a JSON report naming the
    error), and none ends in a traceback."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    template = tmp_path / "template"
    assert cli("init", "--workspace", str(template), env=env).code == 0
    assert cli("append", "a fact", "--workspace", str(template), env=env).code == 0
    assert cli("run", "--model", "offline", "--workspace", str(template), env=env).code == 0
    failures = []
    for args in COMMANDS:
        shutil.rmtree(tmp_path / "ws", ignore_errors=True)
        shutil.rmtree(tmp_path / "clone", ignore_errors=True)
        shutil.copytree(template, tmp_path / "ws", symlinks=True)
        ws = BROKEN[broken](tmp_path / "ws")
        outcome = cli(*args, "--workspace", str(ws), env={**env, "DREAM_MEMORY_STORE": str(ws)})
        if outcome.crash is not None or outcome.code not in (0, 1, 2):
            failures.append(f"dream {' '.join(args)}: exit {outcome.code}\n{outcome.crash or outcome.err}")
            continue
        if outcome.code == 0:
            continue
        if args[0] in ("run", "consolidate") and outcome.out.strip().startswith("{"):
            if not json.loads(outcome.out).get("errors"):
                failures.append(f"dream {' '.join(args)}: exit {outcome.code} with a report naming no error")
        elif not outcome.refused():
            failures.append(
                f"dream {' '.join(args)}: exit {outcome.code} without a `dream: error:` line: {outcome.err}"
            )
    assert failures == [], "\n\n".join(failures)
