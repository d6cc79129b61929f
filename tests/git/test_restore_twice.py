"""Restoring the same commit twice (by hand, or after a restore killed once its commit had landed)
changes nothing the second time, as docs/versioning.md promises. It used to merge the same undo
again: a conflict on the lines a person wrote since, whose suggested --force deleted them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _head(ws: Path) -> str:
    return subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_restoring_a_commit_already_undone_writes_nothing(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers dark mode"])
    assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    batch = _head(ws)
    user = ws / "USER.md"
    user.write_text(
        user.read_text().replace("- User prefers dark mode\n", "- User prefers dark mode\n- Hand: allergic to nuts\n")
    )
    first = dream("restore", "-w", str(ws), batch)
    assert first.returncode == 0, first.stderr
    undone = _head(ws)

    again = dream("restore", "-w", str(ws), batch)
    assert again.returncode == 0, again.stderr
    assert f"is already undone by {undone[:10]}" in again.stdout
    assert _head(ws) == undone
    assert "- Hand: allergic to nuts" in user.read_text()
    assert "dark mode" not in user.read_text()

    back = dream("restore", "-w", str(ws), undone)  # a restore of the restore still brings it back
    assert back.returncode == 0, back.stderr
    assert "dark mode" in user.read_text() and "allergic to nuts" in user.read_text()


def test_replaying_a_commit_already_undone_says_how_instead_of_moving_nothing(dream: Dream, tmp_path: Path) -> None:
    """`restore X --replay` after `restore X` said "the Dream cursor moved from 2 to 2", exit 0, and
    moved nothing (found by an independent review): the undo had happened without --replay. It is
    refused (exit 2) with the way that works, which then re-reads the batch's entries; the output
    names the commit, not a range."""
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers dark mode", "- [durable] User likes jazz"])
    assert dream("run", "-w", str(ws), "--model", "offline", "--batch-size", "1").returncode == 0
    first = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD~1"], capture_output=True, text=True).stdout.strip()
    assert dream("restore", "-w", str(ws), first).returncode == 0
    undone = _head(ws)
    cursor = (ws / "memory" / ".dream_cursor").read_text()

    again = dream("restore", "-w", str(ws), first)
    assert again.returncode == 0 and again.stdout.startswith(f"restored {first[:10]}:"), again.stdout

    replay = dream("restore", "-w", str(ws), first, "--replay")
    assert replay.returncode == 2, replay.stdout + replay.stderr
    assert f"already undone by {undone[:10]}" in replay.stderr
    assert f"restore {undone[:10]} first" in replay.stderr
    assert (ws / "memory" / ".dream_cursor").read_text() == cursor and _head(ws) == undone

    assert dream("restore", "-w", str(ws), undone).returncode == 0  # the hint, followed
    replayed = dream("restore", "-w", str(ws), first, "--replay")
    assert replayed.returncode == 0, replayed.stderr
    assert (ws / "memory" / ".dream_cursor").read_text().strip() == "0"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("log", ""), "an empty revision names no commit"),  # it showed HEAD's change
        (("log", "HEAD~1...HEAD"), "takes two dots"),  # "no branch or commit named '.HEAD'"
        (("restore", "HEAD...HEAD~1"), "hint: give HEAD..HEAD~1"),
        (("log", "HEAD~1....HEAD"), "hint: give HEAD~1..HEAD"),  # it offered three dots again
        (("restore", "...HEAD"), "hint: give A..B"),  # it offered ..HEAD, which restore refuses
    ],
)
def test_a_revision_that_names_nothing_is_refused_saying_why(
    dream: Dream, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers dark mode", "- [durable] User likes jazz"])
    assert dream("run", "-w", str(ws), "--model", "offline", "--batch-size", "1").returncode == 0
    before = _head(ws)
    done = dream(*args, "-w", str(ws))
    assert done.returncode == 2 and said in done.stderr, done.stdout + done.stderr
    assert done.stdout == "" and _head(ws) == before


def test_a_second_replay_of_a_commit_undone_with_replay_says_so(dream: Dream, tmp_path: Path) -> None:
    """`restore X --replay` twice: the second was refused as undone "without --replay", and its hint
    made two needless commits (found by a review). It is a no-op that says how X was undone."""
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers dark mode", "- [durable] User likes jazz"])
    assert dream("run", "-w", str(ws), "--model", "offline", "--batch-size", "1").returncode == 0
    first = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD~1"], capture_output=True, text=True).stdout.strip()
    assert dream("restore", "-w", str(ws), first, "--replay").returncode == 0
    undone = _head(ws)
    again = dream("restore", "-w", str(ws), first, "--replay")
    assert again.returncode == 0, again.stderr
    assert f"is already undone by {undone[:10]}, with --replay" in again.stdout
    assert "--replay: the Dream cursor stays at 0" in again.stdout
    assert _head(ws) == undone
