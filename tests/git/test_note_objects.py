"""A provenance note's objects (its blob, the notes trees, the notes commit) are written together
as one durable write before refs/notes/dream names them: git's own CLI reads every note, across
the switch to a fanned-out notes tree at 256 notes, and `git fsck --full --strict` is silent."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.git.notes import NOTES_REF, read_note, write_note
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock


def _side_commits(ws: Path, n: int, env: dict[str, str]) -> list[str]:
    """``n`` commits on a side branch (one fast-import), reachable so fsck calls none dangling."""
    stream = "".join(
        f"commit refs/heads/side\nmark :{i + 1}\ncommitter A <a@example.com> {1_700_000_000 + i} +0000\n"
        f"data {len(f'side {i}')}\nside {i}\n\n"
        for i in range(n)
    )
    done = subprocess.run(
        ["git", "fast-import", "--quiet", "--export-marks=marks"],
        cwd=ws,
        input=stream,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.returncode == 0
    marks = dict(line.split() for line in (ws / "marks").read_text().splitlines())
    (ws / "marks").unlink()
    return [marks[f":{i + 1}"] for i in range(n)]


def test_notes_written_together_are_read_by_git_past_the_fanout(tmp_path: Path, dream, git, clean_env) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    head = git(ws, "rev-parse", "HEAD").strip()
    ids = _side_commits(ws, 300, clean_env)
    store = GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=60))
    assert store is not None
    with store:
        write_note(store, head, b'{"first": true}\n', "dream: provenance of head")
        for n, sha in enumerate(ids):
            write_note(store, sha, f"note {n}\n".encode(), f"note {n}")
        write_note(store, head, b'{"first": false}\n', "dream: provenance of head, again")
        assert read_note(store, ids[7]) == b"note 7\n"
    assert git(ws, "notes", "--ref", "dream", "show", "HEAD") == '{"first": false}\n'
    for n in (0, 255, 256, 299):
        assert git(ws, "notes", "--ref", "dream", "show", ids[n]) == f"note {n}\n"
    listed = git(ws, "notes", "--ref", "dream", "list").split()
    assert len(listed) == 2 * (len(ids) + 1)
    # the tree fanned out once past 256 notes (git's own layout: xx/<38 hex>)
    top = git(ws, "ls-tree", NOTES_REF).splitlines()
    assert top and all(line.split("\t")[1].__len__() == 2 for line in top)
    assert git(ws, "log", "--format=%s", "-1", NOTES_REF) == "dream: provenance of head, again\n"
    assert git(ws, "fsck", "--full", "--strict", "--no-progress", check=False) == ""
