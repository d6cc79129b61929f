"""The prune after a rewrite over a repository of several packs (a killed purge left one, `dream
restore` and git's own repacks add more): every pack holding an old object is written again, and
the purge never ends in a traceback, whatever order the packs are read in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dulwich.objects import Blob
from dulwich.repo import Repo

from dream_memory.adapters.git import rewrite
from dream_memory.errors import RepositoryChanged

# Fixed dates: the same commit and pack ids in every run, so each hash seed below reads the packs
# in the same order every time.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2026-04-03T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-04-03T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

PRUNE = "import sys\nfrom dream_memory.adapters.git.prune import prune\nprune(sys.argv[1])\n"


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _packed_repository(repo: Path) -> tuple[str, list[str]]:
    """One file kept by a commit, in four packs: one with the commit (nothing to prune there), three
    each with an object nothing reaches. The id of the kept file and of the old objects."""
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "USER.md").write_text("kept\n")
    _git(repo, "add", "USER.md")
    _git(repo, "commit", "-qm", "kept")
    kept = _git(repo, "rev-parse", "HEAD:USER.md")
    old = [_git(repo, "hash-object", "-w", "--stdin", stdin=f"old {i}\n") for i in range(3)]
    for sha in old:
        _git(repo, "pack-objects", "-q", ".git/objects/pack/pack", stdin=f"{kept}\n{sha}\n")
    _git(repo, "pack-objects", "-q", ".git/objects/pack/pack", stdin=f"{kept}\n{_git(repo, 'rev-parse', 'HEAD')}\n")
    _git(repo, "prune-packed")
    return kept, old


@pytest.mark.parametrize("seed", range(8))
def test_prune_over_several_packs_ends_without_a_traceback(tmp_path: Path, seed: int) -> None:
    repo = tmp_path / "repo"
    kept, old = _packed_repository(repo)

    done = subprocess.run(
        [sys.executable, "-c", PRUNE, str(repo)],
        env={**os.environ, **GIT_ENV, "PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert _git(repo, "fsck", "--strict") == ""
    assert _git(repo, "cat-file", "-p", kept) == "kept"
    objects = _git(repo, "cat-file", "--batch-all-objects", "--batch-check")
    assert not any(sha in objects for sha in old)


def test_a_pack_deleted_under_the_purge_is_a_repository_changed_error(tmp_path: Path) -> None:
    """git gc in another process deletes a pack the purge had read: exit 75 with "run it again",
    never dulwich's PackFileDisappeared."""
    repo_path = tmp_path / "repo"
    _packed_repository(repo_path)
    with Repo(str(repo_path)) as repo:
        packs = repo.object_store.packs
        assert len(packs) == 4
        for path in (repo_path / ".git/objects/pack").glob(f"{Path(packs[0]._basename).name}.*"):
            path.unlink()
        plan = rewrite.RewritePlan(new_objects=[Blob.from_string(b"new\n")])

        with pytest.raises(RepositoryChanged) as raised:
            rewrite.store_objects(repo, plan)

    assert raised.value.exit_code == 75
    assert "run the command again" in str(raised.value)
