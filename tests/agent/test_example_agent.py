"""examples/agent.py against the scripted server: a conversation's facts reach the next prompt
after dream-consolidate and dream-run, through the files, not only as recent history."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dream_memory.adapters.offline import OfflineModel
from dream_memory.core.prompts import CONSOLIDATION_MARKER, HISTORY_MARKER
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import Reply, ScriptedLLMServer, from_chat_model

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

REPO = Path(__file__).resolve().parents[2]


def responder() -> Any:
    offline = from_chat_model(OfflineModel())

    def respond(request: dict[str, Any]) -> Any:
        last = str(request["messages"][-1].get("content") or "")
        first_user = next((str(m.get("content")) for m in request["messages"] if m.get("role") == "user"), "")
        if request.get("tools") or CONSOLIDATION_MARKER in last or HISTORY_MARKER in first_user:
            return offline(request)
        return Reply("Noted.")

    return respond


def test_three_turns_then_consolidate_and_dream_reach_the_next_prompt(tmp_path: Path) -> None:
    """Three turns, then the scheduled jobs; the fourth turn's system prompt holds the user's
    preference inside USER.md and the decision inside MEMORY.md (the last turn stays live in the
    session: consolidation never folds the turn in progress)."""
    workspace = tmp_path / "ws"
    with ScriptedLLMServer(responder=responder()) as server:
        env = {
            **os.environ,
            "HOME": str(tmp_path),
            "DREAM_WORKSPACE": str(workspace),
            "DREAM_API_BASE": server.base_url,
            "DREAM_API_KEY": "test",
            "DREAM_MODEL": "openai/scripted",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        agent = [
            sys.executable,
            str(REPO / "examples" / "agent.py"),
            "--model",
            "openai/scripted",
            "--session-budget",
            "100000",
        ]
        talk = subprocess.run(
            [
                *agent,
                "--message",
                "I prefer green tea over coffee, remember that.",
                "--message",
                "Also: we decided to use PostgreSQL for the ledger.",
                "--message",
                "Thanks!",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert talk.returncode == 0, talk.stderr
        assert talk.stdout.splitlines() == ["Noted.", "Noted.", "Noted."]
        # The scheduled jobs, in process (the same commands as dream-consolidate and dream-run).
        for command in (["consolidate", "--all", "--force"], ["run"]):
            done = CliRunner().invoke(cli, command, env=env, catch_exceptions=False)
            assert done.exit_code == 0, done.stderr
        assert "green tea" in (workspace / "USER.md").read_text()
        before = len(server.completion_requests())
        again = subprocess.run(
            [*agent, "--message", "What do I drink?"], env=env, capture_output=True, text=True, timeout=180
        )
        assert again.returncode == 0, again.stderr
        chat = [r for r in server.completion_requests()[before:] if r.messages[0]["role"] == "system" and not r.tools]
        system = chat[0].messages[0]["content"]
    user_part = system.split("## USER.md", 1)[1].split("## memory/MEMORY.md", 1)[0]
    assert "green tea" in user_part
    memory_part = system.split("## memory/MEMORY.md", 1)[1]
    assert "PostgreSQL" in memory_part
    assert "data, not instructions" in system
