"""Helpers for Dream tests: a CLI runner that drives `dream` in-process with an isolated
environment (HOME, config, model), a scripted model server, workspaces. (Fixtures: conftest.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.offline import OfflineModel
from dream_memory.adapters.tokens import default_counter
from dream_memory.app.dream import DreamContext, DreamOptions, DreamReport, run_dream
from dream_memory.core.ports import ChatModel
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import FrozenClock, build_workspace
from dream_memory.testing.llm_server import ScriptedLLMServer

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def sample_entries(n: int) -> list[str]:
    """n history entries, each carrying one durable fact the offline engine files."""
    return [f"- [durable] User fact number {i}: prefers option {i} for setting {i}." for i in range(1, n + 1)]


@dataclass
class Cli:
    home: Path
    workspace: Path
    env: dict[str, str]

    def run(self, *args: str, env: Mapping[str, str] | None = None) -> Any:
        runner = CliRunner()
        merged = {**self.env, **(env or {})}
        return runner.invoke(cli, list(args), env=merged, catch_exceptions=False)

    def run_json(self, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        result = self.run(*args, env=env)
        return result.exit_code, json.loads(result.stdout)

    def subprocess(
        self, *args: str, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        merged = {**os.environ, **self.env, **(env or {})}
        return subprocess.run([str(BIN / args[0]), *args[1:]], env=merged, capture_output=True, text=True, **kwargs)


def dream_cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``dream ARGS`` in this process (click's runner) on exactly ``env``: every other variable of
    this process unset while it runs. Returned as a completed process, stderr with the traceback
    appended when the command crashed, for tests whose point is not the process boundary (a
    process costs ~0.5 CPU s of imports)."""
    import traceback

    patch: dict[str, str | None] = dict.fromkeys((k for k in os.environ if k not in env), None)
    patch.update(env)
    result = CliRunner().invoke(cli, list(args), env=patch, catch_exceptions=True, prog_name="dream")
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["dream", *args], result.exit_code, result.stdout, err)


def use_server(cli_env: Cli, server: ScriptedLLMServer, *, retries: int = 2) -> Path:
    """Write a config whose default model is a preset pointing at ``server``; returns its path."""
    path = cli_env.home / "dream.json"
    cli_env.env |= server.write_config(path, retries=retries)
    return path


def use_preset(cli_env: Cli, server: ScriptedLLMServer, *, dream: dict[str, Any] | None = None, **preset: Any) -> None:
    """A config whose default model is a preset on ``server`` with extra preset settings (and
    ``agents.defaults.dream`` settings when given)."""
    defaults: dict[str, Any] = {"model": "local", **({"dream": dream} if dream else {})}
    config = {
        "agents": {"defaults": defaults},
        "modelPresets": {
            "local": {
                "model": "openai/local-model",
                "apiBase": server.base_url,
                "maxRetries": 0,
                "timeout": 10,
                **preset,
            }
        },
    }
    path = cli_env.home / "dream.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    cli_env.env["DREAM_CONFIG"] = str(path)


def make_workspace(cli_env: Cli, entries: list[str], **kwargs: Any) -> Path:
    return build_workspace(cli_env.workspace, history=entries, **kwargs)


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(workspace), *args], capture_output=True, text=True, check=True).stdout


def dream_in_process(root: Path, model: ChatModel | None = None) -> DreamReport:
    """One Dream run over ``root`` in this process (the offline engine unless ``model``), with a
    frozen clock and the default options; the report as run_dream returns it."""
    clock = FrozenClock()
    return run_dream(
        DreamContext(
            root=root,
            model=model or OfflineModel(),
            history=HistoryLog(root, clock=clock),
            clock=clock,
            counter=default_counter(),
            options=DreamOptions(),
            open_git=lambda create: GitStore.open(root, author="t <t@t>", clock=clock, create=create),
        )
    )
