"""A commit's new objects are written as one pack (adapters.git.packing): real git and a fresh
dulwich read every commit, `git gc` keeps them, the small packs do not pile up, and what a killed
pack write leaves is cleared by the next recovery with `git fsck` silent."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters.git import GitStore, packing
from dream_memory.app.versioning import apply_commit, recover
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock
from dream_memory.testing.hostile import loose_object

CLOCK = FrozenClock(step=60)


def open_store(ws: Path) -> GitStore:
    store = GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=CLOCK)
    assert store is not None
    return store


def _commit(ws: Path, n: int) -> str:
    with open_store(ws) as store:
        sha = apply_commit(
            store,
            {"USER.md": f"# User\n- fact {n}\n".encode(), "memory/MEMORY.md": f"# Memory\n- note {n}\n".encode()},
            f"dream: batch {n}",
        )
    assert sha is not None
    return sha


def test_commits_in_packs_are_read_by_git_dulwich_and_after_gc(tmp_path: Path, dream, git) -> None:
    """Three commits, each one pack and no loose object: `git fsck --full --strict` is silent,
    `git log` and `git show` read them, and after `git gc` a new store still shows each file."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    shas = [_commit(ws, n) for n in range(3)]
    assert not [p for p in (ws / ".git/objects").glob("[0-9a-f][0-9a-f]/*") if p.name in {s[2:] for s in shas}]
    assert git(ws, "fsck", "--full", "--strict", "--no-progress", check=False) == ""
    assert git(ws, "log", "--format=%H", "-3").split() == shas[::-1]
    assert git(ws, "show", f"{shas[1]}:USER.md") == "# User\n- fact 1\n"
    assert git(ws, "status", "--porcelain") == ""
    git(ws, "gc", "-q")
    assert git(ws, "fsck", "--full", "--strict", "--no-progress", check=False) == ""
    with open_store(ws) as store:
        assert store.head() == shas[-1]
        assert store.read_at(shas[0], "USER.md") == b"# User\n- fact 0\n"


def test_small_packs_are_merged_once_many_have_accumulated(tmp_path: Path, dream, git) -> None:
    """After more commits than the merge threshold, fewer small packs than the threshold remain,
    every commit is still readable, and git accepts the repository."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    shas = [_commit(ws, n) for n in range(packing.MERGE_AT + 5)]
    with open_store(ws) as store:
        small = packing.small_packs(store.repo.object_store)
        assert len(small) < packing.MERGE_AT
        for n, sha in enumerate(shas):
            assert store.read_at(sha, "memory/MEMORY.md") == f"# Memory\n- note {n}\n".encode()
    assert git(ws, "fsck", "--full", "--strict", "--no-progress", check=False) == ""
    assert len(git(ws, "log", "--format=%H").split()) == len(shas) + 1  # and `memory: init`


def test_a_killed_pack_write_is_cleared_by_recovery(tmp_path: Path, dream, git) -> None:
    """A pack lock file and a pack without its index (a writer killed between the two renames)
    make nothing unreadable; recovery removes both and `git fsck --strict` is silent."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    _commit(ws, 1)
    pack_dir = ws / ".git/objects/pack"
    half, unindexed = "pack-" + "1" * 40, "pack-" + "2" * 40
    (pack_dir / (half + ".pack.lock")).write_bytes(b"PACK half")
    (pack_dir / (unindexed + ".pack")).write_bytes(b"PACK without its index")
    sha = _commit(ws, 2)  # neither blocks a commit
    with open_store(ws) as store:
        assert recover(store) is None
        assert store.read_at(sha, "USER.md") == b"# User\n- fact 2\n"
    # By the whole planted names: a real pack's name holds "2222" about once in 900 (a CI failure).
    assert sorted(p.name for p in pack_dir.iterdir() if p.name.startswith((half + ".", unindexed + "."))) == []
    assert git(ws, "fsck", "--full", "--strict", "--no-progress", check=False) == ""


def test_loose_object_unpacks_what_a_test_damages(tmp_path: Path, dream) -> None:
    """The test helper that damages an object finds its loose file even when the object was
    packed, and every other object of that pack stays readable."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    first, second = _commit(ws, 1), _commit(ws, 2)
    path = loose_object(ws, second)
    assert path.is_file()
    with open_store(ws) as store:
        assert store.read_at(first, "USER.md") == b"# User\n- fact 1\n"
        assert store.read_at(second, "USER.md") == b"# User\n- fact 2\n"
