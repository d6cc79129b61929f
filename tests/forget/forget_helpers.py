"""Helpers for the purge tests: a workspace Dream has run over (offline engine, several batches),
git's own CLI as the judge, and `dream` as a real process that can be killed at a write site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dream_memory.entrypoints.cli import cli

CANARY = "CANARY-7f3q9"

# argv: SITE N dream-arguments...: SIGKILL just before the N-th write at SITE ("-": no kill)
RUNNER = r"""
import os, signal, sys
from dream_memory.testing.faults import fault_hook
site, nth = sys.argv[1], int(sys.argv[2])
seen = [0]
def inject(name, path):
    if name != site:
        return
    seen[0] += 1
    if seen[0] == nth:
        os.kill(os.getpid(), signal.SIGKILL)
with fault_hook(inject):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[3:]]
    main()
"""


class Env:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        self.ws = tmp / "ws"
        (self.home / "gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
        self.env = {
            "HOME": str(self.home),
            "DREAM_WORKSPACE": str(self.ws),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DREAM_MODEL": "",
            "DREAM_CONFIG": "",
            "DREAM_API_BASE": "",
            "DREAM_API_KEY": "",
            "GIT_CONFIG_GLOBAL": str(self.home / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "XDG_CACHE_HOME": str(tmp / "cache"),
        }

    def dream(self, *args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)

    def dream_json(self, *args: str) -> tuple[int, Any]:
        result = self.dream(*args, "--json")
        return result.exit_code, json.loads(result.stdout)

    def process(self, *args: str, kill: tuple[str, int] = ("-", 0)) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        return subprocess.run(
            [sys.executable, "-c", RUNNER, kill[0], str(kill[1]), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def git(self, *args: str, check: bool = True) -> str:
        env = {**os.environ, **self.env}
        done = subprocess.run(["git", "-C", str(self.ws), *args], env=env, capture_output=True, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
        return done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")


def dreamt_workspace(env: Env, *, batches: int = 3, compact: bool = False) -> None:
    """Several Dream batches over entries that hold the canary, with the offline engine; with
    ``compact`` the history is compacted so part of it sits in memory/archive/."""
    assert env.dream("init").exit_code == 0
    if compact:
        (env.ws / "dream.json").write_text(
            json.dumps({"agents": {"defaults": {"dream": {"maxHistoryEntries": 10}}}}), encoding="utf-8"
        )
    cursor = 0
    for _batch in range(batches):
        for i in range(6):
            cursor += 1
            text = f"- [durable] User's locker {cursor} code is {CANARY} and they like tea number {cursor}"
            if i % 2:
                text = f"- [durable] User prefers green tea variety {cursor}"
            assert env.dream("append", text, "--session-key", "cli:direct").exit_code == 0
        result = env.dream("run", "--model", "offline", "--batch-size", "6")
        assert result.exit_code == 0, result.output
    env.git("add", "-A", check=False)


def holders(env: Env) -> dict[str, int]:
    """Where the canary still is, as git's own CLI and the file system see it."""
    found = {
        "log -p --all": env.git("log", "-p", "--all").count(CANARY),
        "all objects": env.git("cat-file", "--batch-all-objects", "--batch").count(CANARY),
        "reflog": env.git("log", "-g", "-p", "--all", check=False).count(CANARY),
    }
    for path in env.ws.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(env.ws).parts:
            n = path.read_bytes().count(CANARY.encode())
            if n:
                found[str(path.relative_to(env.ws))] = n
    return {k: v for k, v in found.items() if v}


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (.git included) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def indexed_store(env: Env, cache: Path) -> list[Path]:
    """A store large enough for `dream search` to keep an index, built by a search; its files."""
    dreamt_workspace(env, batches=1)
    entities = env.ws / "entities"
    entities.mkdir(exist_ok=True)
    for i in range(520):
        entities.joinpath(f"thing{i}.md").write_text(f"# thing{i}\n\nPlain note {i}.\n")
    entities.joinpath("locker.md").write_text(f"# locker\n\nThe code is {CANARY}.\n")
    env.git("add", "-A")
    env.git("commit", "-qm", "many entities")
    assert CANARY in env.dream("search", "locker").output
    indexes = list(cache.rglob("*.sqlite"))
    assert indexes and any(b"7f3q9" in p.read_bytes() for p in indexes)  # words, folded
    return indexes
