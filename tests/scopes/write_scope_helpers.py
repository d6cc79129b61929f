"""Helpers for the write-side scope tests: `dream` driven in-process with an isolated HOME and a
config holding scope rules, a history of two private Telegram users and a group with a canary
each, and the questions the tests ask of the workspace and its git history."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import ScriptedLLMServer

RULES = {"telegram:-100*": "shared", "telegram:*": "user:{id}"}
ALICE, BOB, GROUP = "telegram:alice", "telegram:bob", "telegram:-100123"
ALICE_DIR, BOB_DIR = "scopes/user/alice/", "scopes/user/bob/"

# Distinct, unguessable-looking tokens: one per person, found by a plain substring search.
ALICE_TEA = "Kestrelmoor-oolong"
ALICE_LAPTOP = "Vantablue-7 laptop"
BOB_COFFEE = "Quillfeather roast"
GROUP_DAY = "Larkspur Fridays"


def interleaved_history() -> list[HistoryEntry]:
    """Alice, Bob and the group taking turns, as a bot serving all three writes its history."""
    return [
        HistoryEntry(1, "2026-04-03 09:00", f"- [durable] User prefers {ALICE_TEA} tea in the morning", ALICE),
        HistoryEntry(2, "2026-04-03 09:05", f"- [durable] User prefers the {BOB_COFFEE} coffee", BOB),
        HistoryEntry(3, "2026-04-03 09:10", f"- [durable] Decision: the group meets on {GROUP_DAY}", GROUP),
        HistoryEntry(4, "2026-04-03 09:15", f"- [durable] Decision: use the {ALICE_LAPTOP} for travel", ALICE),
        HistoryEntry(5, "2026-04-03 09:20", "- [durable] User prefers dark mode everywhere", ALICE),
    ]


@dataclass
class ScopedCli:
    """`dream` with its own HOME and config file; ``rules`` go to agents.defaults.scopes."""

    home: Path
    workspace: Path
    env: dict[str, str] = field(default_factory=dict)

    def configure(
        self,
        *,
        rules: Mapping[str, str] | None = RULES,
        server: ScriptedLLMServer | None = None,
        protocol: str = "tools",
        dream: Mapping[str, Any] | None = None,
    ) -> None:
        defaults: dict[str, Any] = {"dream": dict(dream)} if dream else {}
        config: dict[str, Any] = {"agents": {"defaults": defaults}}
        if rules is not None:
            defaults["scopes"] = dict(rules)
        if server is not None:
            defaults["model"] = "scripted"
            config["modelPresets"] = {
                "scripted": {
                    "model": "openai/scripted-model",
                    "apiBase": server.base_url,
                    "apiKeyEnv": "SCRIPTED_API_KEY",
                    "maxRetries": 0,
                    "timeout": 5,
                    "editProtocol": protocol,
                }
            }
        path = self.home / "dream.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        self.env["DREAM_CONFIG"] = str(path)

    def run(self, *args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)

    def run_json(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = self.run(*args)
        return result.exit_code, json.loads(result.stdout)


def scoped_cli(tmp_path: Path, history: list[HistoryEntry] | None = None, **files: str) -> ScopedCli:
    home = tmp_path / "home"
    home.mkdir(parents=True)
    workspace = tmp_path / "ws"
    build_workspace(workspace, history=interleaved_history() if history is None else history, files=files or None)
    env = {
        "HOME": str(home),
        "DREAM_WORKSPACE": str(workspace),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DREAM_MODEL": "",
        "DREAM_API_BASE": "",
        "DREAM_API_KEY": "",
        "SCRIPTED_API_KEY": "test-key-not-secret",
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
    }
    return ScopedCli(home, workspace, env)


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(workspace), *args], capture_output=True, text=True, check=True).stdout


def memory_files_holding(workspace: Path, text: str) -> list[str]:
    """The memory files (tracked content, on disk) whose text holds ``text``, workspace-relative."""
    found = []
    for path in sorted(workspace.rglob("*")):
        rel = path.relative_to(workspace).as_posix()
        if rel.startswith(".git/") or not path.is_file() or not layout.is_content(rel):
            continue
        if text in path.read_text(encoding="utf-8", errors="replace"):
            found.append(rel)
    return found


def commits_with_shared_changes_holding(workspace: Path, text: str) -> list[str]:
    """Commits that change a shared memory file and hold ``text`` in their message or patch."""
    hits = []
    for sha in git(workspace, "rev-list", "--all").split():
        changed = git(workspace, "show", "--format=", "--name-only", sha).split()
        shared = [p for p in changed if layout.is_content(p) and not p.startswith(layout.SCOPES_DIR + "/")]
        if shared and text in git(workspace, "show", "--format=%B", "-p", sha):
            hits.append(sha)
    return hits


def trailers(workspace: Path, name: str) -> list[str]:
    """The values of a trailer over the branch's commits, newest first."""
    out = git(workspace, "log", f"--format=%(trailers:key={name},valueonly)")
    return [line.strip() for line in out.splitlines() if line.strip()]
