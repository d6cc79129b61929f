"""examples/agent.py can be tried without a key: with ``--model offline``, and against the shipped
scripted server run as its own process; a model that fails is one line, never a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dream_memory.testing import clean_env

REPO = Path(__file__).resolve().parents[2]
AGENT = [sys.executable, str(REPO / "examples" / "agent.py")]
DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]
SERVER = [sys.executable, "-m", "dream_memory.testing.llm_server"]
TURNS = [
    "I prefer green tea over coffee, remember that.",
    "Also: we decided to use PostgreSQL for the ledger.",
    "Thanks!",
]


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


def messages(*texts: str) -> list[str]:
    return [arg for text in texts for arg in ("--message", text)]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``python -m dream_memory.testing.llm_server`` as a real process on 127.0.0.1: three chat
    replies from a script, then the offline engine; yields its base URL."""
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"reply": "Noted."}] * 3), encoding="utf-8")
    port_file = tmp_path / "llm.port"
    proc = subprocess.Popen(
        [*SERVER, "--script", str(script), "--offline-engine", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(tmp_path / "server-home"),
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert port_file.is_file(), "the scripted server did not start"
        yield f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_the_whole_loop_runs_with_the_offline_model(tmp_path: Path) -> None:
    """``--model offline``: three turns consolidate into history, ``dream run --model offline``
    dreams them, and the next turn's system prompt holds the preference in USER.md and the
    decision in MEMORY.md; no key, no server, exit 0 throughout."""
    env = clean_env(tmp_path / "home")
    ws = tmp_path / "ws"
    base = [*AGENT, "--workspace", str(ws), "--model", "offline"]
    talk = run([*base, "--session-budget", "40", *messages(*TURNS)], env)
    assert talk.returncode == 0, talk.stderr
    assert len(talk.stdout.splitlines()) == 3
    assert "consolidated" in talk.stderr
    dreamt = run([*DREAM, "run", "--workspace", str(ws), "--model", "offline"], env)
    assert dreamt.returncode == 0, dreamt.stderr
    again = run([*base, "--show-prompt", "--message", "What do I drink?"], env)
    assert again.returncode == 0, again.stderr
    prompt = again.stderr.split("--- system prompt", 1)[1]
    user_part = prompt.split("## USER.md", 1)[1].split("## memory/MEMORY.md", 1)[0]
    assert "green tea" in user_part
    assert "PostgreSQL" in prompt.split("## memory/MEMORY.md", 1)[1]
    assert "Traceback" not in talk.stderr + dreamt.stderr + again.stderr


@pytest.mark.slow  # the example agent as a real process against a real server
def test_the_loop_runs_against_the_shipped_scripted_server_without_a_key(tmp_path: Path, server: str) -> None:
    """The agent talks to the scripted server (its replies are the script's), then
    ``dream consolidate`` and ``dream run`` go through the same server's offline engine: the
    user's preference reaches USER.md; no API key anywhere."""
    env = clean_env(tmp_path / "home")
    ws = tmp_path / "ws"
    talk = run(
        [*AGENT, "--workspace", str(ws), "--model", "openai/scripted", "--api-base", server, *messages(*TURNS)], env
    )
    assert talk.returncode == 0, talk.stderr
    assert talk.stdout.splitlines() == ["Noted."] * 3
    jobs = {**env, "DREAM_API_BASE": server, "DREAM_MODEL": "openai/scripted"}
    assert not [name for name in jobs if name.endswith("_API_KEY")]
    for command in (["consolidate", "--all", "--force"], ["run"]):
        done = run([*DREAM, *command, "--workspace", str(ws)], jobs)
        assert done.returncode == 0, done.stderr
    assert "green tea" in (ws / "USER.md").read_text(encoding="utf-8")


@pytest.mark.slow  # the example agent as a real process against a real server
def test_a_model_that_refuses_is_one_line_and_exit_1(tmp_path: Path, server: str) -> None:
    """When the model fails (here the scripted server's offline engine refuses a chat prompt once
    the script is used up), the agent prints one ``agent: error:`` line naming the model and
    exits 1: no traceback."""
    env = clean_env(tmp_path / "home")
    base = [*AGENT, "--workspace", str(tmp_path / "ws"), "--model", "openai/x", "--api-base", server]
    assert run([*base, *messages(*TURNS)], env).returncode == 0  # the three scripted replies
    failed = run([*base, "--message", "And now?"], env)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent: error: model openai/x failed:"), failed.stderr


@pytest.mark.slow  # the example agent as a real process against a real server
def test_a_local_server_is_talked_to_without_litellm(tmp_path: Path, server: str) -> None:
    """``openai/NAME`` with ``--api-base`` (llama.cpp, vLLM, Ollama, the scripted server) is one
    HTTP request from the standard library, as dream-memory's own model calls are: the turn is
    answered in a process where litellm cannot even be imported (its import costs seconds)."""
    without_litellm = (
        "import runpy, sys; sys.modules['litellm'] = None; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    argv = [sys.executable, "-c", without_litellm, *AGENT[1:], "--workspace", str(tmp_path / "ws")]
    talk = run([*argv, "--model", "openai/scripted", "--api-base", server, "--message", TURNS[0]], clean_env(tmp_path))
    assert talk.returncode == 0, talk.stderr
    assert talk.stdout.splitlines() == ["Noted."]
