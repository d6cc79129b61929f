"""Only a repository object that cannot be read is "damaged": the same plain Python error from
our own code inside a git method is a bug, and surfaces as one (never "run git fsck").

Before, ``git_errors`` turned every ValueError, KeyError or EOFError raised anywhere inside a
GitStore method into "the git repository ... is damaged", sending the user to repair a healthy
repository. Now those count as damage only when dulwich raised them while reading an object.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from dream_memory.adapters.clock import SystemClock
from dream_memory.adapters.git.base import git_errors
from dream_memory.adapters.git.store import GitStore
from dream_memory.errors import VersionStoreError
from dream_memory.testing.hostile import cli, loose_object


class Probe(GitStore):
    """A store with two git methods: one reads a commit, one holds a bug of ours."""

    @git_errors
    def read_commit(self, sha: str) -> bytes:
        return self.repo[sha.encode("ascii")].as_raw_string()

    @git_errors
    def buggy(self, kind: type[Exception]) -> None:
        raise kind("a bug in dream-memory, not in the repository")


def _store(tmp_path: Path) -> Probe:
    ws = tmp_path / "ws"
    env = {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}
    assert cli("init", "--workspace", str(ws), env=env).code == 0  # the first commit, `memory: init`
    store = GitStore.open(ws, author="t <t@example.com>", clock=SystemClock())
    assert store is not None
    store.__class__ = Probe
    return store  # type: ignore[return-value]


@pytest.mark.parametrize("kind", [ValueError, KeyError, EOFError])
def test_our_own_error_inside_a_git_method_is_not_called_damage(tmp_path: Path, kind: type[Exception]) -> None:
    store = _store(tmp_path)
    with pytest.raises(kind, match="a bug in dream-memory"):
        store.buggy(kind)


@pytest.mark.parametrize("damage", ["truncated", "not zlib"])
def test_an_object_dulwich_cannot_read_is_still_damage(tmp_path: Path, damage: str) -> None:
    store = _store(tmp_path)
    head = store.repo.head().decode("ascii")
    path = loose_object(tmp_path / "ws", head)
    raw = zlib.decompress(path.read_bytes())
    path.chmod(0o644)
    path.write_bytes(zlib.compress(raw[:40]) if damage == "truncated" else b"\x00not a zlib stream")
    with pytest.raises(VersionStoreError, match="is damaged: an object cannot be read"):
        store.read_commit(head)
