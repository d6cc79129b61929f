"""The issue's acceptance, end to end with real processes: entries from telegram:alice,
telegram:bob and the group, `dream run` (offline engine), then every read door. Alice's canary
is in no file Bob's scope can read, and Bob's context, search and MCP server never return it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from scope_helpers import RULES

from dream_memory.core import scopes

ALICE = "ALICE-RUN-CANARY-6610"
BOB = "BOB-RUN-CANARY-7720"
DREAM = str(Path(sys.executable).with_name("dream"))


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DREAM, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # a Dream run, then every read door, each as a real process
def test_after_a_run_alices_canary_reaches_none_of_bobs_doors(tmp_path: Path) -> None:
    """Dream files each private fact in its own scope; then Bob's `dream context`, `dream search`
    (text, --json, --history), `dream section`, and an MCP server started for Bob never hold
    Alice's canary, while Alice's own reader and files do."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    assert run(env, "init", "-w", str(ws)).returncode == 0
    (ws / "dream.json").write_text(json.dumps({"agents": {"defaults": {"scopes": RULES}}}), encoding="utf-8")
    for key, text in (
        ("telegram:alice", f"- [durable] Alice's locker code is {ALICE}"),
        ("telegram:bob", f"- [durable] Bob's bike lock is {BOB}"),
        ("telegram:-1001", "- [durable] The team standup is at 9:15 by the lockers"),
    ):
        assert run(env, "append", "-w", str(ws), "--session-key", key, text).returncode == 0
    done = run(env, "run", "-w", str(ws), "--model", "offline")
    assert done.returncode == 0, done.stderr

    holding = {
        p.relative_to(ws).as_posix()
        for p in ws.rglob("*.md")
        if ".git" not in p.parts and ALICE in p.read_text(encoding="utf-8")
    }
    assert holding and all(not scopes.can_see("user:bob", rel) for rel in holding), holding
    assert "scopes/user/alice/MEMORY.md" in holding or "scopes/user/alice/USER.md" in holding

    bob = ("-w", str(ws), "--session-key", "telegram:bob")
    outputs = [
        run(env, "context", *bob),
        run(env, "context", *bob, "--json"),
        run(env, "search", "locker lock code", *bob),
        run(env, "search", "locker", *bob, "--json", "--history"),
        run(env, "search", ALICE.split("-")[2], *bob, "--history"),
        run(env, "section", "private-memory", *bob),
        run(env, "section", "memory", *bob),
    ]
    for result in outputs:
        assert result.returncode == 0, (result.args, result.stderr)
        assert ALICE not in result.stdout + result.stderr, result.args
    assert BOB in outputs[0].stdout and BOB in outputs[2].stdout
    mine = run(env, "search", "locker", "-w", str(ws), "--session-key", "telegram:alice", "--history")
    assert ALICE in mine.stdout and BOB not in mine.stdout

    params = StdioServerParameters(command=DREAM, args=["mcp", *bob], env=env)

    async def go() -> None:
        with anyio.fail_after(90):
            async with Client(params) as client:
                answers = [
                    await client.call_tool("dream_search", {"query": "lock code", "maxResults": 50}),
                    await client.call_tool("dream_section", {"name": "private-memory"}),
                    await client.call_tool("dream_section", {"name": "memory"}),
                ]
                texts = ["".join(getattr(b, "text", "") for b in a.content) for a in answers]
                context = (await client.read_resource("memory://context")).contents[0]
                texts.append(getattr(context, "text", ""))
                assert not [t for t in texts if ALICE in t]
                assert BOB in texts[0] and BOB in texts[-1]

    anyio.run(go)
