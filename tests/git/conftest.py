"""Helpers for the git tests: the real `git` CLI (to check GitStore against), and Dream-like
commits made the way Dream makes them (versioning.apply_commit, a "dream: " subject and a
`Dream-Range: a..b` trailer)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock

GitRunner = Callable[..., str]


@pytest.fixture
def git(clean_env: dict[str, str]) -> GitRunner:
    """``git(cwd, *args)``: stdout of the real git CLI on the clean machine; fails the test on a
    non-zero exit unless ``check=False`` (then returns stdout + stderr)."""

    def run(cwd: Path, *args: str, check: bool = True, identity: bool = False) -> str:
        who = ["-c", "user.name=Someone", "-c", "user.email=someone@example.com"] if identity else []
        proc = subprocess.run(["git", *who, *args], cwd=cwd, capture_output=True, text=True, env=clean_env)
        if check:
            assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
            return proc.stdout
        return proc.stdout + proc.stderr

    return run


def open_store(workspace: Path) -> GitStore:
    store = GitStore.open(workspace, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=60))
    assert store is not None
    return store


@pytest.fixture
def dream_commit() -> Callable[..., str]:
    """``dream_commit(ws, {path: text or None}, "what", (a, b))``: a Dream-like commit, written
    through apply_commit like Dream's own; the cursor file moves to ``b`` in the same commit."""

    def make(workspace: Path, files: Mapping[str, str | None], what: str, span: tuple[int, int] | None = None) -> str:
        changes = {rel: None if text is None else text.encode("utf-8") for rel, text in files.items()}
        message = f"dream: {what}"
        if span is not None:
            changes["memory/.dream_cursor"] = f"{span[1]}\n".encode()
            message += f"\n\nDream-Range: {span[0]}..{span[1]}"
        with open_store(workspace) as store:
            sha = apply_commit(store, changes, message)
        assert sha is not None
        return sha

    return make


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes]]:
    """``snapshot(root)``: every file under ``root`` (the .git folder included) with its bytes."""
    return _snapshot


@pytest.fixture
def store() -> Callable[[Path], GitStore]:
    """``store(workspace)``: the GitStore versioning that workspace (close it, or use ``with``)."""
    return open_store
