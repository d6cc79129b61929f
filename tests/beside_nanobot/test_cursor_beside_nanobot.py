"""A nanobot gateway started with its own Dream disabled moves ``memory/.dream_cursor`` to the
latest entry on every start. Dream trusts its committed cursor instead, so nothing is skipped."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

pytestmark = pytest.mark.nanobot

# nanobot's own code: its MemoryStore appends (as its Consolidator does), then what the gateway
# runs at start-up when agents.defaults.dream.enabled is false.
APPEND_THEN_GATEWAY_START = """
import json, sys
from pathlib import Path
from nanobot.agent.memory import MemoryStore
from nanobot.cli.gateway_runtime import _advance_dream_cursor_if_behind
store = MemoryStore(Path(sys.argv[1]))
for text in sys.argv[2:]:
    store.append_history(text, session_key="telegram:42")
_advance_dream_cursor_if_behind(store)
print(json.dumps({"dream_cursor": store.get_last_dream_cursor(), "latest": store.get_latest_cursor()}))
"""

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _committed_cursor(ws: Path) -> int:
    out = subprocess.run(["git", "-C", str(ws), "show", "HEAD:memory/.dream_cursor"], capture_output=True, text=True)
    return int(out.stdout.strip())


def _dreamt_once(dream: Dream, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    for i in range(1, 6):
        assert dream("append", f"- User fact {i}: prefers tea number {i}", "--workspace", str(ws)).returncode == 0
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert _committed_cursor(ws) == 5
    return ws


def test_a_gateway_start_cursor_jump_does_not_skip_pending_entries(
    nanobot: Nanobot, dream: Dream, tmp_path: Path
) -> None:
    """Dream has committed cursor 5; nanobot 0.3.5's MemoryStore appends entries 6..9 and its
    gateway start (own Dream disabled) moves .dream_cursor to 9. `dream status` still counts 4
    pending and says why (the file was moved outside a Dream commit and is not followed);
    `dream run` dreams exactly 6..9 and commits cursor 9, which the file then holds again."""
    ws = _dreamt_once(dream, tmp_path)
    facts = [f"- User fact {i}: lives in town {i}" for i in range(6, 10)]
    moved = nanobot.run(APPEND_THEN_GATEWAY_START, str(ws), *facts)
    assert moved == {"dream_cursor": 9, "latest": 9}

    status = dream("status", "--json", "--workspace", str(ws))
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert (shown["dream_cursor"], shown["pending"]) == (5, 4)
    check = shown["cursor_check"]
    assert (check["state"], check["on_disk"], check["committed"], check["followed"]) == ("ahead", 9, 5, False)
    assert "outside a Dream commit" in check["reason"] and "6..9" in check["reason"]
    human = dream("status", "--workspace", str(ws))
    assert "moved from 5 to 9 outside a Dream commit" in human.stdout

    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["cursor_before"], report["entries_processed"], report["cursor_after"]) == (5, 4, 9)
    assert [(b["cursor_from"], b["cursor_to"]) for b in report["batches"]] == [(6, 9)]
    assert any("not followed" in note for note in report["notes"])
    assert _committed_cursor(ws) == 9
    assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8").strip() == "9"
    assert "lives in town 9" in (ws / "USER.md").read_text(encoding="utf-8")


def test_follow_external_cursor_follows_the_jump_when_asked(nanobot: Nanobot, dream: Dream, tmp_path: Path) -> None:
    """With agents.defaults.dream.followExternalCursor the user says the other program's cursor
    is right: status shows it as followed and `dream run` has nothing to do."""
    ws = _dreamt_once(dream, tmp_path)
    (ws / "dream.json").write_text(
        json.dumps({"agents": {"defaults": {"dream": {"followExternalCursor": True}}}}), encoding="utf-8"
    )
    nanobot.run(APPEND_THEN_GATEWAY_START, str(ws), "- User fact 6: plays chess")
    shown = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (shown["dream_cursor"], shown["pending"], shown["cursor_check"]["followed"]) == (6, 0, True)
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "nothing_to_do"
