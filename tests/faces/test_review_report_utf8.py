"""Every JSON face is valid UTF-8, whatever bytes `dream append` was given.

An argument that is not UTF-8 (b"\\xff" from a Latin-1 terminal, a script passing raw bytes)
reaches Python as a lone surrogate (surrogateescape). history.jsonl keeps it, escaped, so it reads
back exactly. Before, `dream run` printed it raw in ``provenance.facts[].text``: stdout was not
UTF-8 and a strict JSON reader refused the whole report. With the byte in the session key the
batch committed and then failed writing its provenance note (cursor left behind the commit), and
the MCP server's `dream_why` could not send its reply at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dream_memory.testing import clean_env
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]


def dream_bytes(env: dict[str, str], *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """`dream ARGS...` as a real process, arguments and output as raw bytes."""
    argv = [a if isinstance(a, bytes) else a.encode() for a in [*DREAM, *args]]
    return subprocess.run(argv, env=env, capture_output=True, timeout=120)


def report(done: subprocess.CompletedProcess[bytes]) -> Any:
    """stdout as a strict UTF-8 JSON reader sees it: UnicodeDecodeError when it is not UTF-8."""
    return json.loads(done.stdout.decode("utf-8", errors="strict"))


def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream_bytes(env, "init").returncode == 0
    return ws, env


@pytest.mark.slow
def test_a_non_utf8_argument_is_kept_exact_in_the_history(tmp_path: Path) -> None:
    ws, env = workspace(tmp_path)
    appended = dream_bytes(env, "append", "--session-key", "cli:direct", b"- [durable] User prefers caf\xff mode")
    assert appended.returncode == 0, appended.stderr
    line = (ws / "memory" / "history.jsonl").read_bytes().decode("utf-8", errors="strict")
    assert json.loads(line)["content"] == "- [durable] User prefers caf\udcff mode"
    for face in (("status", "--json"), ("log", "--json"), ("run", "--model", "offline")):
        report(dream_bytes(env, *face))


@pytest.mark.slow
def test_a_fact_holding_half_an_emoji_leaves_the_run_report_valid_utf8(tmp_path: Path) -> None:
    """A model's fact cut in half by a UTF-16 client ("\\ud83d" in its JSON reply) is listed in
    the report's provenance as that same text, on stdout and in --report FILE, as valid UTF-8."""
    _ws, env = workspace(tmp_path)
    assert dream_bytes(env, "append", "- [durable] User likes the rocket emoji").returncode == 0
    with ScriptedLLMServer([Reply("[USER] User likes the rocket emoji \ud83d"), Reply("done")]) as server:
        env |= server.write_config(tmp_path / "dream.json")
        out = tmp_path / "report.json"
        done = dream_bytes(env, "run", "--report", str(out))
    run = report(done)
    facts = [f["text"] for b in run["batches"] for f in b["provenance"]["facts"]]
    assert facts == ["User likes the rocket emoji \ud83d"]  # the JSON escape reads back as the same text
    assert out.read_bytes().decode("utf-8") == done.stdout.decode("utf-8")  # --report FILE: the same text


@pytest.mark.slow
def test_a_non_utf8_session_key_commits_its_batch_and_every_face_stays_utf8(tmp_path: Path) -> None:
    ws, env = workspace(tmp_path)
    appended = dream_bytes(env, "append", "--session-key", b"cli:\xff", "- [durable] User prefers dark mode")
    assert appended.returncode == 0, appended.stderr

    done = dream_bytes(env, "run", "--model", "offline")
    run = report(done)
    assert (done.returncode, run["status"], run["cursor_after"], run["errors"]) == (0, "ok", 1, [])
    line = next(n for n, text in enumerate((ws / "USER.md").read_text().splitlines(), 1) if "dark mode" in text)

    why = report(dream_bytes(env, "why", f"USER.md:{line}", "--json"))
    assert [s["session_key"] for s in why["sources"]] == ["cli:\udcff"]

    async def ask_mcp() -> Any:
        params = StdioServerParameters(command=DREAM[0], args=[*DREAM[1:], "mcp"], env=env)
        with anyio.fail_after(60):
            async with Client(params) as client:
                return await client.call_tool("dream_why", {"path": "USER.md", "line": line})

    answer = anyio.run(ask_mcp)
    assert not answer.is_error
    assert "session cli:\\udcff" in answer.content[0].text  # the visible escape the CLI's text shows
    assert answer.structured_content["sources"][0]["session_key"] == "cli:\\udcff"


def test_a_session_key_with_a_lone_surrogate_leaves_the_consolidate_report_valid_utf8(tmp_path: Path) -> None:
    """A session file's metadata may carry JSON's own escape of half an emoji ("\\ud83d"):
    whatever becomes of the session, the consolidate report naming it is valid UTF-8."""
    ws, env = workspace(tmp_path)
    (ws / "sessions").mkdir()
    rows = ['{"_type": "metadata", "key": "cli:\\ud83d", "last_consolidated": 0}']
    for i in range(6):
        rows.append(json.dumps({"role": "user", "content": f"I prefer tea {i}", "timestamp": f"2026-04-03T10:0{i}:00"}))
        rows.append(json.dumps({"role": "assistant", "content": "ok", "timestamp": f"2026-04-03T10:0{i}:30"}))
    (ws / "sessions" / "a.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    done = dream_bytes(env, "consolidate", "--all", "--force", "--model", "offline")
    assert report(done)["sessions"], done.stderr
