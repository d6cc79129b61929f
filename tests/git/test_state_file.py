"""memory/.dream_state.json, Dream's own bookkeeping (issue 17's findings): it is versioned with
the memory it describes, but a change Dream made to it without a commit (a failed batch's count)
is no one's unsaved edit; and a state file that is not JSON is an error naming it and how to
fix it, never read as empty (it holds the held batches, which an empty state written back would
forget without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace

STATE = "memory/.dream_state.json"
HELD = {
    "version": 1,
    "failure": None,
    "set_aside": [],
    "held": [{"id": "1-1", "cursor_from": 1, "cursor_to": 1, "reason": "would remove 18 lines", "created": "x"}],
}


@pytest.fixture
def ws(tmp_path: Path, dream) -> Path:
    """A workspace after one Dream run (versioned, its state committed), with one more entry."""
    root = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea"])
    assert dream("run", "--model", "offline", "-w", str(root)).returncode == 0
    assert dream("append", "- [durable] User lives in Oslo", "-w", str(root)).returncode == 0
    return root


def test_dreams_own_state_is_not_an_unsaved_edit(ws: Path, dream) -> None:
    """The state as a failed batch leaves it (a failure count, written without a commit): `dream
    status` lists no unsaved edit and `dream doctor` raises no git finding; a real edit of USER.md
    is still listed by both."""
    failed = {"version": 1, "failure": {"cursor_from": 2, "cursor_to": 2, "count": 1, "last_error": "x"}}
    (ws / STATE).write_text(json.dumps({**failed, "set_aside": [], "held": []}), encoding="utf-8")
    status = json.loads(dream("status", "--json", "-w", str(ws)).stdout)
    assert status["dirty"] == []
    doctor = json.loads(dream("doctor", "--json", "-w", str(ws), env={"DREAM_MODEL": "offline"}).stdout)
    git_check = next(c for c in doctor["checks"] if c["name"] == "git")
    assert STATE not in git_check["summary"]
    with (ws / "USER.md").open("a", encoding="utf-8") as handle:
        handle.write("- edited by hand\n")
    status = json.loads(dream("status", "--json", "-w", str(ws)).stdout)
    assert status["dirty"] == ["USER.md"]


@pytest.mark.parametrize("garbage", ["{not json", "[]", '{"held": [{"id": 3}]}'])
def test_an_unreadable_state_file_is_exit_2_and_nothing_is_lost(ws: Path, dream, garbage: str) -> None:
    """A state file that is not Dream's state (not JSON, or the wrong shape): `dream run` and
    `dream status` exit 2 naming the file and the way out (restore it from git, or delete it);
    the run consumes nothing, commits nothing and leaves the file as it was, so the held batches
    in it can still be recovered. `dream doctor` reports it as a problem (exit 1)."""
    (ws / STATE).write_text(garbage, encoding="utf-8")
    head = (ws / ".git" / "refs" / "heads" / "main").read_text()
    cursor = (ws / "memory" / ".dream_cursor").read_text()
    run = dream("run", "--model", "offline", "-w", str(ws))
    assert run.returncode == 2, run.stderr
    assert STATE in run.stderr and f"git checkout -- {STATE}" in run.stderr and "delete it" in run.stderr
    assert (ws / STATE).read_text() == garbage
    assert (ws / ".git" / "refs" / "heads" / "main").read_text() == head
    assert (ws / "memory" / ".dream_cursor").read_text() == cursor
    status = dream("status", "-w", str(ws))
    assert status.returncode == 2 and STATE in status.stderr and "Traceback" not in status.stderr
    doctor = dream("doctor", "-w", str(ws), env={"DREAM_MODEL": "offline"})
    assert doctor.returncode == 1 and STATE in doctor.stdout


def test_held_batches_survive_a_broken_state_file_restored_from_git(ws: Path, dream, git) -> None:
    """The way out the message gives works: with the held batch committed, a garbled state file
    restored with `git checkout` shows the held batch again."""
    (ws / STATE).write_text(json.dumps(HELD), encoding="utf-8")
    git(ws, "add", STATE)
    git(ws, "commit", "-q", "-m", "memory: hold", identity=True)
    (ws / STATE).write_text("{garbled", encoding="utf-8")
    assert dream("status", "-w", str(ws)).returncode == 2
    git(ws, "checkout", "--", STATE)
    status = json.loads(dream("status", "--json", "-w", str(ws)).stdout)
    assert status["held"] == ["1-1"]
