"""nanobot 0.3.5's own code moves memory/.dream_cursor and a commit not of dream-memory's records
the move: Dream still dreams every entry in between (the trial's f1 and f5)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

pytestmark = pytest.mark.nanobot

Dream = Callable[..., subprocess.CompletedProcess[str]]

# What nanobot's Consolidator and its gateway start (own Dream disabled) do; then, when asked,
# the user's /dream-restore of the oldest "dream:" commit, through nanobot's GitStore.revert.
NANOBOT = """
import json, sys
from pathlib import Path
from nanobot.agent.memory import MemoryStore
from nanobot.cli.gateway_runtime import _advance_dream_cursor_if_behind
ws, restore, texts = Path(sys.argv[1]), sys.argv[2] == "restore", sys.argv[3:]
store = MemoryStore(ws)
for text in texts:
    store.append_history(text, session_key="telegram:42")
_advance_dream_cursor_if_behind(store)
reverted = None
if restore:
    sha = [c for c in store.git.log(message_prefix="dream:")][-1].sha
    reverted = store.git.revert(sha, message_prefix="dream:")
print(json.dumps({"dream_cursor": store.get_last_dream_cursor(), "reverted": reverted}))
"""


def _git(ws: Path, *args: str) -> str:
    who = ["-c", "user.name=Someone", "-c", "user.email=someone@example.com"]
    return subprocess.run(
        ["git", *who, "-C", str(ws), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _status(dream: Dream, ws: Path) -> dict:
    shown = dream("status", "--json", "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _dreamt_once(dream: Dream, ws: Path) -> None:
    for i in range(1, 6):
        assert dream("append", f"- [durable] User prefers tool {i}", "--workspace", str(ws)).returncode == 0
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert _git(ws, "show", "HEAD:memory/.dream_cursor") == "5"


def _town_facts() -> list[str]:
    return [f"- [durable] User lives in town {i}" for i in range(6, 10)]


def _run_dreams_6_to_9(dream: Dream, ws: Path, mover: str) -> None:
    shown = _status(dream, ws)
    check = shown["cursor_check"]
    assert (shown["dream_cursor"], shown["pending"], check["state"]) == (5, 4, "ahead")
    assert check["head"] == 9
    assert mover in check["moved_by"] and mover in check["reason"]
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["cursor_before"], report["entries_processed"], report["cursor_after"]) == (5, 4, 9)
    assert (ws / "USER.md").read_text(encoding="utf-8").count("town") == 4


def test_a_persons_commit_after_a_gateway_start_does_not_skip_entries(
    nanobot: Nanobot, dream: Dream, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    _dreamt_once(dream, ws)
    assert nanobot.run(NANOBOT, str(ws), "-", *_town_facts())["dream_cursor"] == 9
    _git(ws, "commit", "-qam", "sync my memory")
    assert _git(ws, "show", "HEAD:memory/.dream_cursor") == "9"
    _run_dreams_6_to_9(dream, ws, "sync my memory")


def test_nanobots_dream_restore_committing_the_gateways_cursor_does_not_skip_entries(
    nanobot: Nanobot, dream: Dream, tmp_path: Path
) -> None:
    """The trial's workspace: a `memory: init` without a cursor (made before init recorded one),
    then nanobot's /dream-restore of Dream's batch writes back what was there before it, which
    for the cursor is the file the gateway just moved, and commits it as `revert: undo <sha>`."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    _git(ws, "rm", "-q", "--cached", "--ignore-unmatch", "memory/.dream_cursor")
    _git(ws, "commit", "-q", "--amend", "-m", "memory: init")
    (ws / "memory/.dream_cursor").unlink(missing_ok=True)
    _dreamt_once(dream, ws)
    done = nanobot.run(NANOBOT, str(ws), "restore", *_town_facts())
    assert done["reverted"]
    assert _git(ws, "log", "-1", "--format=%s").startswith("revert: undo")
    assert _git(ws, "show", "HEAD:memory/.dream_cursor") == "9"
    _run_dreams_6_to_9(dream, ws, "revert: undo")


def test_a_gateway_restart_before_the_first_dream_run_skips_nothing(
    nanobot: Nanobot, dream: Dream, tmp_path: Path
) -> None:
    """A fresh `dream init` records cursor 0: the gateway's move of the file to the end of history
    before Dream's first commit is reported, not followed."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    facts = ["- [durable] User is allergic to peanuts", "- [durable] User's daughter is named Mia"]
    assert nanobot.run(NANOBOT, str(ws), "-", *facts)["dream_cursor"] == 2
    assert nanobot.run(NANOBOT, str(ws), "-")["dream_cursor"] == 2  # the restart
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"], shown["cursor_check"]["state"]) == (0, 2, "ahead")
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["entries_processed"] == 2
    memory = (ws / "USER.md").read_text(encoding="utf-8") + (ws / "memory/MEMORY.md").read_text(encoding="utf-8")
    assert "peanuts" in memory and "Mia" in memory
