"""``adapters.git.blame`` agrees with ``git blame --porcelain`` line for line: template lines,
Dream batches that add, replace and remove lines, hand edits committed by git itself, and a
merge of a branch, in a real temporary repository."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.git.blame import blame, line_map, split_lines
from dream_memory.app.versioning import ensure_versioned
from dream_memory.errors import NotFound, UnknownRevision
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock, build_workspace

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the git CLI is not installed")


def open_store(ws: Path) -> GitStore:
    store = GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=60))
    assert store is not None
    return store


def _git_blame(git, ws: Path, path: str, rev: str = "HEAD") -> list[str]:
    """The commit of each line, as git's own blame reports it."""
    owners: list[str] = []
    for line in git(ws, "blame", "--porcelain", rev, "--", path).splitlines():
        head = line.split(" ")
        if len(head) >= 3 and len(head[0]) == 40 and all(c in "0123456789abcdef" for c in head[0]):
            final = int(head[2])
            while len(owners) < final:
                owners.append("")
            owners[final - 1] = head[0]
    return owners


def _ours(ws: Path, path: str, rev: str = "HEAD") -> list[str]:
    with open_store(ws) as store:
        return [o.commit for o in blame(store, path, rev)]


def _write(ws: Path, rel: str, text: str) -> None:
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text(text, encoding="utf-8")


def test_blame_matches_git_through_batches_hand_edits_and_a_merge(tmp_path: Path, git, dream_commit) -> None:
    """Lines from the template, from three Dream batches (an addition, a rewrite of an earlier
    fact, a removal), from a person's own `git commit` and from a merged branch are each
    attributed to the commit git blame names, with its kind."""
    ws = build_workspace(tmp_path / "ws")
    with open_store(ws) as store:
        init = ensure_versioned(store)
    assert init is not None
    user = (ws / "USER.md").read_text(encoding="utf-8")
    first = user.rstrip("\n") + "\n\n## Facts\n\n- Lives in Lyon\n- Drinks tea\n- Has a cat named Io\n"
    b1 = dream_commit(ws, {"USER.md": first}, "1..3: USER.md +5 -0", (1, 3))
    second = first.replace("- Drinks tea\n", "- Drinks coffee (was tea)\n") + "- Runs on Sundays\n"
    b2 = dream_commit(ws, {"USER.md": second}, "4..6: USER.md +2 -1", (4, 6))
    _write(ws, "USER.md", second.replace("- Lives in Lyon\n", "- Lives in Lyon\n- Written by hand\n"))
    git(ws, "commit", "-q", "-am", "my own note", identity=True)
    hand = git(ws, "rev-parse", "HEAD").strip()
    third = (ws / "USER.md").read_text(encoding="utf-8").replace("- Has a cat named Io\n", "")
    b3 = dream_commit(ws, {"USER.md": third}, "7..9: USER.md +0 -1", (7, 9))

    git(ws, "checkout", "-q", "-b", "side", b2)
    _write(ws, "USER.md", second + "- From the side branch\n")
    git(ws, "commit", "-q", "-am", "side work", identity=True)
    git(ws, "checkout", "-q", "main")
    git(ws, "merge", "-q", "--no-edit", "side", identity=True)
    merged = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- From the side branch" in merged and "- Written by hand" in merged

    ours = _ours(ws, "USER.md")
    assert ours == _git_blame(git, ws, "USER.md")
    assert {init, b1, b2, hand}.issubset(ours)
    assert b3 not in ours  # it only removed a line
    with open_store(ws) as store:
        every = blame(store, "USER.md")
        origins = {o.text: o for o in every}
        older = [o.commit for o in blame(store, "USER.md", b2)]
    assert older == _git_blame(git, ws, "USER.md", b2)
    assert origins["- Drinks coffee (was tea)"].kind == "dream"
    assert origins["- Drinks coffee (was tea)"].commit == b2
    assert origins["- Lives in Lyon"].kind == "dream"
    assert origins["- Written by hand"].kind == "manual"
    assert origins["- Written by hand"].author == "Someone <someone@example.com>"
    assert origins["- From the side branch"].subject == "side work"
    assert origins[user.splitlines()[0]].kind == "init"
    assert [o.line for o in every] == list(range(1, len(merged.splitlines()) + 1))
    assert [o.text for o in every] == merged.splitlines()


@pytest.mark.parametrize("seed", [19, 7, 2026])
def test_blame_matches_git_on_random_edits(tmp_path: Path, git, seed: int) -> None:
    """Forty commits of random insertions, deletions and replacements, with the repeated blank
    lines memory files have: every line with text is attributed as git attributes it. (A blank
    line among several may be matched to another blank of the same move: git's own diff
    algorithms disagree there too, and no fact lives on a blank line.)"""
    ws = build_workspace(tmp_path / "ws")
    with open_store(ws) as store:
        ensure_versioned(store)
    rng = random.Random(seed)
    lines = ["# Notes", ""] + [f"- fact {i}" for i in range(12)]
    counter = 100
    revisions: list[str] = []
    for step in range(40):
        for _ in range(rng.randint(1, 3)):
            action = rng.choice(["insert", "insert", "delete", "replace", "blank"])
            at = rng.randrange(len(lines) + 1)
            if action == "insert":
                lines.insert(at, f"- fact {counter}")
            elif action == "blank":
                lines[at:at] = ["", f"## Part {counter}", ""]
            elif lines and action == "delete":
                del lines[min(at, len(lines) - 1)]
            elif lines:
                lines[min(at, len(lines) - 1)] = f"- fact {counter} (was replaced)"
            counter += 1
        _write(ws, "memory/MEMORY.md", "\n".join(lines) + "\n")
        git(ws, "commit", "-q", "-am", f"edit {step}", identity=True)
        revisions.append(git(ws, "rev-parse", "HEAD").strip())
    for rev in [*revisions[::7], revisions[-1]]:
        ours, theirs = _ours(ws, "memory/MEMORY.md", rev), _git_blame(git, ws, "memory/MEMORY.md", rev)
        text = git(ws, "show", f"{rev}:memory/MEMORY.md").splitlines()
        differ = [(i + 1, text[i]) for i in range(len(text)) if ours[i] != theirs[i] and text[i].strip()]
        assert not differ, (rev, differ)


def test_blame_refuses_a_missing_file_and_an_unknown_revision(tmp_path: Path) -> None:
    """A path that is not a file in the commit, or a revision that is not a commit, is a clear
    error (NotFound, UnknownRevision), never a traceback."""
    ws = build_workspace(tmp_path / "ws")
    with open_store(ws) as store:
        ensure_versioned(store)
        with pytest.raises(NotFound, match=r"nope\.md is not a file"):
            blame(store, "nope.md")
        with pytest.raises(UnknownRevision):
            blame(store, "USER.md", "zzzz")


def test_line_splitting_and_mapping_follow_git() -> None:
    """Lines split at newlines only (a last line without one counts, a carriage return stays in
    its line), and the line map keeps the unchanged head and tail of a file."""
    assert split_lines(b"a\nb") == [b"a", b"b"]
    assert split_lines(b"a\r\nb\n") == [b"a\r", b"b"]
    assert split_lines(b"") == []
    assert line_map([b"a", b"b", b"c"], [b"a", b"x", b"b", b"c"]) == [0, -1, 1, 2]
    assert line_map([b"a", b"b"], [b"b"]) == [1]
