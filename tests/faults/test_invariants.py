"""The invariant checks themselves: each one stays quiet on a healthy workspace and speaks up on
the damage it exists to find (a check that cannot fail proves nothing)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from soak.ops import Ops

from dream_memory.testing import build_workspace
from dream_memory.testing.canaries import CANARIES
from dream_memory.testing.hostile import loose_object
from dream_memory.testing.invariants import (
    check_cursor_not_ahead,
    check_failed_appends_absent,
    check_git_fsck,
    check_head_on_branch,
    check_history_exactly_once,
    check_memory_committed,
    check_no_manual_edits,
    check_no_secrets,
    check_workspace,
)

FACTS = ["- [durable] User prefers dark mode.", "- Decided to use PostgreSQL.", "- [durable] User works as a pilot."]


def git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def dreamt(tmp_path: Path) -> tuple[Path, Ops]:
    """A workspace whose three entries Dream has turned into memory (offline engine)."""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    ops = Ops(ws, {"HOME": str(tmp_path)})
    assert ops.dream(batch_size=2)["status"] == "ok"
    return ws, ops


def test_a_healthy_workspace_passes_every_check(dreamt: tuple[Path, Ops]) -> None:
    """After normal appends and Dream runs, no invariant reports anything."""
    ws, ops = dreamt
    ops.append("- one more entry")
    assert check_workspace(ws, appended=[*FACTS, "- one more entry"], secrets=[c.value for c in CANARIES]) == []


def test_a_duplicated_or_missing_entry_is_reported(dreamt: tuple[Path, Ops]) -> None:
    """An entry written twice, an entry gone, and two entries sharing a cursor are violations;
    an interrupted append present once is not."""
    ws, _ = dreamt
    path = ws / "memory" / "history.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    other = json.dumps({"cursor": 1, "timestamp": "2026-04-03 00:02", "content": "- a different entry"})
    path.write_text("\n".join([lines[0], lines[0], lines[2], other]) + "\n", encoding="utf-8")
    found = {str(v) for v in check_history_exactly_once(ws, appended=FACTS, maybe=["- a different entry"])}
    assert any("2 copies" in v for v in found)
    assert any("0 copies" in v for v in found)
    assert any("share cursor" in v for v in found)


def test_a_failed_append_that_left_its_entry_is_reported(dreamt: tuple[Path, Ops]) -> None:
    """An append reported as failed must not be in history."""
    ws, _ = dreamt
    assert check_failed_appends_absent(ws, [FACTS[0]])
    assert check_failed_appends_absent(ws, ["- never written"]) == []


def test_a_cursor_ahead_of_head_is_reported(dreamt: tuple[Path, Ops]) -> None:
    """.dream_cursor on disk beyond the committed one would skip history nobody dreamt."""
    ws, _ = dreamt
    (ws / "memory" / ".dream_cursor").write_text("9\n", encoding="utf-8")
    assert [v.invariant for v in check_cursor_not_ahead(ws)] == ["cursor_not_ahead"]


def test_memory_that_is_not_a_committed_state_is_reported(dreamt: tuple[Path, Ops]) -> None:
    """A memory file differing from HEAD is a violation, unless (unsettled) an interrupted change
    in the journal will write exactly that file's committed content next."""
    ws, _ = dreamt
    before = (ws / "USER.md").read_bytes()
    (ws / "USER.md").write_text("# User\n- changed behind Dream's back\n", encoding="utf-8")
    assert [v.invariant for v in check_memory_committed(ws)] == ["memory_committed"]
    head = git(ws, "rev-parse", "HEAD").strip()
    parent = git(ws, "rev-parse", "HEAD~1").strip()
    (ws / "USER.md").write_bytes(
        subprocess.run(["git", "-C", str(ws), "show", f"{parent}:USER.md"], capture_output=True, check=True).stdout
    )
    journal = {"commit": head, "base": parent, "paths": ["USER.md"], "subject": "dream: x"}
    (ws / "memory" / ".dream_journal.json").write_text(json.dumps(journal), encoding="utf-8")
    assert check_memory_committed(ws, settled=False) == []
    assert [v.invariant for v in check_memory_committed(ws, settled=True)] == ["memory_committed"] * 2
    (ws / "USER.md").write_bytes(before)


def test_a_manual_edits_commit_and_a_detached_head_are_reported(dreamt: tuple[Path, Ops]) -> None:
    """A `memory: manual edits` commit in a workspace nobody edited, and Dream committing on a
    detached HEAD, are both reported."""
    ws, ops = dreamt
    (ws / "USER.md").write_text("# User\n- edited by hand\n", encoding="utf-8")
    ops.append("- [durable] User prefers tea.")
    ops.dream()
    assert [v.invariant for v in check_no_manual_edits(ws)] == ["no_manual_edits"]
    assert check_head_on_branch(ws) == []
    git(ws, "checkout", "-q", "--detach", "HEAD")
    assert [v.invariant for v in check_head_on_branch(ws)] == ["head_on_branch"]


def test_a_secret_in_any_commit_is_reported(dreamt: tuple[Path, Ops]) -> None:
    """A secret value in an old commit is found even after the file no longer holds it."""
    ws, _ = dreamt
    secret = CANARIES[0]
    (ws / "USER.md").write_text(f"# User\n{secret.text}\n", encoding="utf-8")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "leak")
    (ws / "USER.md").write_text("# User\n", encoding="utf-8")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "clean up")
    found = check_no_secrets(ws, [secret.value])
    assert [v.invariant for v in found] == ["no_secrets"] and "git log" in found[0].detail


def test_a_corrupt_object_is_reported_by_fsck(dreamt: tuple[Path, Ops]) -> None:
    """A damaged object in the repository makes git fsck --strict fail."""
    ws, _ = dreamt
    assert check_git_fsck(ws) == []
    blob = git(ws, "rev-parse", "HEAD:USER.md").strip()
    path = loose_object(ws, blob)
    path.chmod(0o644)
    path.write_bytes(b"not a zlib stream")
    assert [v.invariant for v in check_git_fsck(ws)] == ["git_fsck"]
