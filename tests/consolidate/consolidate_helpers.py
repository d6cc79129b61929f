"""Helpers for the Consolidator's tests: sessions on disk, a CLI runner with an isolated HOME, a
model preset pointing at a scripted server on 127.0.0.1, and readers for what the run left."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dream_memory.entrypoints.cli import cli
from dream_memory.testing import write_session
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, Step

REPO = Path(__file__).resolve().parents[2]
# The fixture root as tests/conftest.py finds it: $DREAM_FIXTURES, else shared/fixtures beside the checkout.
FIXTURES = Path(os.environ.get("DREAM_FIXTURES") or REPO.parent / "shared" / "fixtures") / "real-workspaces"
# `dream` as a real process, with a fault hook: argv[1] names an fsutil write site at which the
# process SIGKILLs itself ("-" for none); the rest are dream's arguments.
KILLER = (
    "import sys\n"
    "from dream_memory.adapters import fsutil\n"
    "from dream_memory.testing.faults import at_write, kill_self\n"
    "fsutil.set_fault_injector(at_write(kill_self, sys.argv[1]))\n"
    "from dream_memory.entrypoints.cli import main\n"
    "sys.argv = ['dream', *sys.argv[2:]]\n"
    "main()\n"
)


@dataclass
class Cli:
    home: Path
    workspace: Path
    env: dict[str, str]

    def run(self, *args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)

    def consolidate(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = self.run("consolidate", *args)
        return result.exit_code, json.loads(result.stdout)

    def process(self, *args: str, kill_at: str = "-", timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        return subprocess.run(
            [sys.executable, "-c", KILLER, kill_at, *args], env=env, capture_output=True, text=True, timeout=timeout
        )


def make_cli(tmp_path: Path) -> Cli:
    """A HOME with no config and DREAM_WORKSPACE at a workspace as nanobot leaves it (memory/,
    no templates, no repository): only `dream init` creates a workspace."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "ws" / "memory").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "DREAM_WORKSPACE": str(tmp_path / "ws"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DREAM_MODEL": "",
        "DREAM_CONFIG": "",
        "DREAM_API_BASE": "",
        "DREAM_API_KEY": "",
    }
    return Cli(home, tmp_path / "ws", env)


def use_server(
    cli_env: Cli,
    server: ScriptedLLMServer,
    *,
    retries: int = 1,
    context_window: int | None = None,
    max_tokens: int | None = None,
    budget: int | None = None,
) -> None:
    """Make a preset pointing at ``server`` the configured model (and optionally a budget)."""
    preset: dict[str, Any] = {
        "model": "openai/scripted-model",
        "apiBase": server.base_url,
        "apiKeyEnv": "SCRIPTED_API_KEY",
        "maxRetries": retries,
        "retryBaseSeconds": 0.01,
        "timeout": 10,
    }
    if context_window is not None:
        preset["contextWindow"] = context_window
    if max_tokens is not None:
        preset["maxTokens"] = max_tokens
    defaults: dict[str, Any] = {"model": "scripted"}
    if budget is not None:
        defaults["consolidate"] = {"budgetTokens": budget}
    path = cli_env.home / "dream.json"
    path.write_text(json.dumps({"agents": {"defaults": defaults}, "modelPresets": {"scripted": preset}}), "utf-8")
    cli_env.env["DREAM_CONFIG"] = str(path)
    cli_env.env["SCRIPTED_API_KEY"] = "test-key-not-secret"


def turn(
    i: int, *, tools: int = 0, size: int = 0, keep: bool = False, ts: str = "2026-04-03T10:00:00"
) -> list[dict[str, Any]]:
    """One user turn: a question, ``tools`` tool calls each with its result, and an answer.
    Every message carries a unique marker ``t<i>-...`` so tests can find it in history.
    ``keep``: every message also reads like a preference, which the offline engine keeps."""
    stamp = ts[:-2] + f"{i % 60:02d}"
    pad = " lorem ipsum" * size + (" - user prefers this" if keep else "")
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"t{i}-user question{pad}", "timestamp": stamp}]
    for k in range(tools):
        call_id = f"call-{i}-{k}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "exec", "arguments": f'{{"n": "t{i}-args{k}{pad}"}}'},
                    }
                ],
                "timestamp": stamp,
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": "exec",
                "content": f"t{i}-result{k}{pad}",
                "timestamp": stamp,
            }
        )
    messages.append({"role": "assistant", "content": f"t{i}-answer{pad}", "timestamp": stamp})
    return messages


def turns(n: int, **kwargs: Any) -> list[dict[str, Any]]:
    return [m for i in range(n) for m in turn(i, **kwargs)]


def session(cli_env: Cli, key: str, messages: Iterable[Mapping[str, object]], *, last_consolidated: int = 0) -> Path:
    return write_session(cli_env.workspace, key, messages, last_consolidated=last_consolidated)


def history(workspace: Path) -> list[dict[str, Any]]:
    path = workspace / "memory" / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def progress(workspace: Path) -> dict[str, Any]:
    path = workspace / "memory" / ".consolidation.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"sessions": {}, "pending": None}


def raw_text(entries: Iterable[Mapping[str, Any]]) -> str:
    """The transcript held by [RAW] entries: each body after its header line, joined."""
    bodies = [str(e["content"]).split("\n", 1)[1] for e in entries if str(e["content"]).startswith("[RAW]")]
    return "".join(bodies)


def memory_snapshot(workspace: Path) -> dict[str, bytes]:
    folder = workspace / "memory"
    return (
        {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.endswith(".lock")}
        if folder.is_dir()
        else {}
    )


_MARKER = re.compile(r"t\d+-[a-z]+\d*")


def markers(text: str) -> list[str]:
    return _MARKER.findall(text)


def spoken_markers(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """Markers of what the user and the assistant said, not of tool calls and tool results: the
    offline engine leaves machine output out of its summaries."""
    return [
        mk
        for m in messages
        if m.get("role") in ("user", "assistant") and m.get("content")
        for mk in markers(str(m["content"]))
    ]


def echo_responder(request: dict[str, Any]) -> Step:
    """A model that "summarizes" by repeating every transcript line as a bullet: what it was
    sent becomes visible in history."""
    body = str(request["messages"][-1]["content"]).split("\n", 1)[1]
    return Reply("\n".join(f"- {line}" for line in body.splitlines() if line.strip()) or "(nothing)")
