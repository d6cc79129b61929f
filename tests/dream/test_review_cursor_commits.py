"""The cursor Dream trusts is the one its own commits set: a commit someone else made that moved
the committed memory/.dream_cursor ahead (a person's `git commit -a` after a nanobot gateway
start moved the file, nanobot's /dream-restore) is not followed; one that moved it back is."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _git(ws: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=Someone", "-c", "user.email=someone@example.com", "-C", str(ws), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _status(dream: Dream, ws: Path) -> dict[str, object]:
    shown = dream("status", "--json", "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _dreamt_to_5_then_9_appended(dream: Dream, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    for i in range(1, 10):
        assert dream("append", f"- [durable] User prefers tool {i}", "--workspace", str(ws)).returncode == 0
        if i == 5:
            run = dream("run", "--model", "offline", "--workspace", str(ws))
            assert run.returncode == 0, run.stderr
    assert _git(ws, "show", "HEAD:memory/.dream_cursor") == "5"
    return ws


def test_a_persons_commit_of_a_cursor_moved_ahead_is_not_followed_by_status_doctor_or_run(
    dream: Dream, tmp_path: Path
) -> None:
    """The file moved to 9 (as a gateway start does) and a person commits everything: HEAD holds
    9, but no Dream commit set it. Status, doctor and the run all use 5, name the commit, and the
    run dreams 6..9."""
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    (ws / "memory/.dream_cursor").write_text("9\n", encoding="utf-8")
    _git(ws, "commit", "-qam", "my weekly notes")
    sha = _git(ws, "rev-parse", "--short=10", "HEAD")

    shown = _status(dream, ws)
    check = shown["cursor_check"]
    assert isinstance(check, dict)
    assert (shown["dream_cursor"], shown["pending"]) == (5, 4)
    assert (check["state"], check["committed"], check["head"], check["followed"]) == ("ahead", 5, 9, False)
    assert check["moved_by"] == f"{sha} (my weekly notes)"
    assert f"by commit {sha} (my weekly notes)" in check["reason"] and "6..9" in check["reason"]

    doctor = dream("doctor", "--workspace", str(ws))
    assert sha in doctor.stdout and "not followed" in doctor.stdout

    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["cursor_before"], report["entries_processed"], report["cursor_after"]) == (5, 4, 9)
    assert any(sha in note for note in report["notes"])
    assert "tool 9" in (ws / "USER.md").read_text(encoding="utf-8")
    assert _status(dream, ws)["cursor_check"] == {
        "value": 9,
        "on_disk": 9,
        "committed": 9,
        "state": "ok",
        "followed": False,
        "reason": "the cursor file matches the committed one",
        "head": 9,
        "moved_by": None,
    }


def test_follow_external_cursor_follows_a_commit_that_moved_it_ahead(dream: Dream, tmp_path: Path) -> None:
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    (ws / "dream.json").write_text(
        json.dumps({"agents": {"defaults": {"dream": {"followExternalCursor": True}}}}), encoding="utf-8"
    )
    (ws / "memory/.dream_cursor").write_text("9\n", encoding="utf-8")
    _git(ws, "commit", "-qm", "cursor by hand", "memory/.dream_cursor")
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"]) == (9, 0)
    assert shown["cursor_check"]["followed"] is True  # type: ignore[index]


def test_a_commit_that_moved_the_cursor_back_is_followed_and_said(dream: Dream, tmp_path: Path) -> None:
    """Moving it back only makes entries be dreamt again: followed, with the commit named."""
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    (ws / "memory/.dream_cursor").write_text("2\n", encoding="utf-8")
    _git(ws, "commit", "-qm", "dream again from 3", "memory/.dream_cursor")
    shown = _status(dream, ws)
    check = shown["cursor_check"]
    assert isinstance(check, dict)
    assert (shown["dream_cursor"], shown["pending"], check["state"]) == (2, 7, "ok")
    assert "moved back from 5 to 2" in check["reason"] and "dream again from 3" in check["reason"]


def test_our_restore_without_replay_does_not_launder_a_foreign_move(dream: Dream, tmp_path: Path) -> None:
    """`dream restore` without --replay carries its parent's cursor: the value a person's commit
    moved ahead is still not Dream's after it."""
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    batch = _git(ws, "log", "--format=%H", "-1", "--grep=^dream: 1..5")
    (ws / "memory/.dream_cursor").write_text("9\n", encoding="utf-8")
    _git(ws, "commit", "-qam", "everything")
    restore = dream("restore", batch, "--workspace", str(ws))
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert _git(ws, "log", "-1", "--format=%s").startswith("dream: revert")
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"]) == (5, 4)
    assert "(everything)" in shown["cursor_check"]["reason"]  # type: ignore[index]


def test_a_merge_carries_the_cursor_of_the_side_it_took_it_from(dream: Dream, tmp_path: Path) -> None:
    """A merge commit is nobody's move: merging Dream's branch (its pull request) keeps the
    cursor Dream's own; merging a branch where a person committed a moved cursor is still that
    person's move, named, and not followed."""
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    _git(ws, "checkout", "-q", "-b", "dream/memory")
    assert dream("run", "--model", "offline", "--workspace", str(ws)).returncode == 0
    _git(ws, "checkout", "-q", "main")
    (ws / "notes.txt").write_text("mine\n", encoding="utf-8")
    _git(ws, "add", "-f", "notes.txt")
    _git(ws, "commit", "-qm", "my notes")
    _git(ws, "merge", "-q", "--no-ff", "-m", "Merge pull request #1", "dream/memory")
    assert _git(ws, "show", "HEAD:memory/.dream_cursor") == "9"
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"], shown["cursor_check"]["state"]) == (9, 0, "ok")  # type: ignore[index]

    for i in range(10, 13):
        assert dream("append", f"- [durable] User prefers tool {i}", "--workspace", str(ws)).returncode == 0
    _git(ws, "checkout", "-q", "-b", "side")
    (ws / "memory/.dream_cursor").write_text("12\n", encoding="utf-8")
    _git(ws, "commit", "-qam", "my weekly notes")
    mover = _git(ws, "rev-parse", "--short=10", "HEAD")
    _git(ws, "checkout", "-q", "main")
    (ws / "notes.txt").write_text("mine, more\n", encoding="utf-8")
    _git(ws, "commit", "-qam", "more notes")
    _git(ws, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    shown = _status(dream, ws)
    check = shown["cursor_check"]
    assert (shown["dream_cursor"], shown["pending"], check["state"]) == (9, 3, "ahead")  # type: ignore[index]
    assert check["moved_by"] == f"{mover} (my weekly notes)"  # type: ignore[index]


def test_without_a_commit_of_ours_holding_the_cursor_head_stays_the_truth(dream: Dream, tmp_path: Path) -> None:
    """A `memory: init` of an older version holds no cursor and no batch ran yet: HEAD's value,
    whoever committed it, is used as before."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    _git(ws, "rm", "-q", "--cached", "--ignore-unmatch", "memory/.dream_cursor")
    _git(ws, "commit", "-q", "--amend", "-m", "memory: init")
    for i in range(1, 4):
        assert dream("append", f"- fact {i}", "--workspace", str(ws)).returncode == 0
    (ws / "memory/.dream_cursor").write_text("3\n", encoding="utf-8")
    _git(ws, "add", "memory/.dream_cursor")
    _git(ws, "commit", "-qm", "cursor")
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"], shown["cursor_check"]["state"]) == (3, 0, "ok")  # type: ignore[index]


def test_which_commits_set_the_cursor_as_dreams() -> None:
    """nanobot's own Dream commits start with "dream:" too, without a Dream-Range: not ours."""
    from dream_memory.core.cursor_truth import cursor_commit

    assert cursor_commit("dream: 1..5: USER.md +6 -0\n\nDream-Range: 1..5\nDream-Model: offline\n") == "sets"
    assert cursor_commit("dream: nothing new in 6..9\n\nDream-Range: 6..9\n") == "sets"
    assert cursor_commit("memory: init\n\nFiles: memory/.dream_cursor") == "sets"
    assert cursor_commit("memory: dream cursor\n") == "sets"
    assert cursor_commit(f"dream: revert abc (x)\n\nReverts: {'a' * 40}\n") == "reverts"
    for foreign in (
        "dream: periodic memory consolidation\n\nsome diff",
        "dream: manual run",
        "revert: undo 1234abcd",
        "memory: manual edits\n\nEdited outside Dream",
        "my notes\n\nDream-Range: 1..5",
    ):
        assert cursor_commit(foreign) == "other", foreign


def test_moves_after_ours_back_are_followed_ahead_are_not() -> None:
    """Ours set 5; then 9 (ahead: not followed), 3 (back: followed), 8 (ahead of 3: not)."""
    from dream_memory.core.cursor_truth import ForeignMove, judge_cursor

    since = (ForeignMove(9, "a (x)"), ForeignMove(3, "b (y)"), ForeignMove(8, "c (z)"))
    check = judge_cursor(8, 8, versioned=True, own=5, since=since)
    assert (check.value, check.state, check.committed, check.moved_by) == (3, "ahead", 3, "c (z)")
    assert "4..8" in check.reason
    followed = judge_cursor(8, 8, versioned=True, own=5, since=since, follow_external=True)
    assert (followed.value, followed.followed) == (8, True)
    # the file moved back below all of them: followed
    assert judge_cursor(1, 8, versioned=True, own=5, since=since).value == 1
    # the file missing: Dream's value, never HEAD's
    assert judge_cursor(None, 8, versioned=True, own=5, since=since).value == 3


def test_restore_reports_the_cursor_dream_trusts_not_the_moved_file(dream: Dream, tmp_path: Path) -> None:
    """After a gateway start moved the file to 9, Dream's cursor is still 5: a restore says 5
    before and after (it does not replay), as status does, and leaves the file alone."""
    ws = _dreamt_to_5_then_9_appended(dream, tmp_path)
    batch = _git(ws, "log", "--format=%H", "-1", "--grep=^dream: 1..5")
    (ws / "memory/.dream_cursor").write_text("9\n", encoding="utf-8")
    restore = dream("restore", batch, "--workspace", str(ws), "--json")
    assert restore.returncode == 0, restore.stdout + restore.stderr
    result = json.loads(restore.stdout)
    assert (result["cursor_before"], result["cursor_after"]) == (5, 5)
    assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8") == "9\n"
    assert _status(dream, ws)["dream_cursor"] == 5
