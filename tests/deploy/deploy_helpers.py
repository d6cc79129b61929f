"""Shared by the deployment tests: the repository's own files, git on temp repositories, and
dream-memory's console scripts from the running interpreter's venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def git(cwd: Path, *args: str, check: bool = True) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@localhost",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@localhost",
    }
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout.strip()


def fact(i: int) -> str:
    """A history entry the offline engine files as one durable fact."""
    return f"- [durable] User fact number {i}: prefers option {i} for setting {i}."


def fact_text(i: int) -> str:
    return f"User fact number {i}: prefers option {i} for setting {i}."


MEMORY_FILES = ("SOUL.md", "USER.md", "memory/MEMORY.md")


def fact_counts(tree: Path, numbers: range) -> dict[int, int]:
    """How often each fact appears across the memory files (entities and sections included)."""
    texts = [(tree / rel).read_text(encoding="utf-8") for rel in MEMORY_FILES if (tree / rel).exists()]
    for folder in ("entities", "sections", "skills"):
        texts += (
            [p.read_text(encoding="utf-8") for p in sorted((tree / folder).rglob("*.md"))]
            if (tree / folder).is_dir()
            else []
        )
    joined = "\n".join(texts)
    return {i: joined.count(fact_text(i)) for i in numbers}


def dream_cmd(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "dream"), *args], env=env, cwd=cwd, capture_output=True, text=True, check=False)


def make_remote(tmp: Path, env: dict[str, str], entries: range) -> Path:
    """A bare repository whose main holds a workspace at its root, with history the agent committed."""
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(remote), str(seed))
    assert dream_cmd(env, "init", "--workspace", str(seed)).returncode == 0
    (seed / "prompts").mkdir(exist_ok=True)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "agent: workspace")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    agent_append(tmp, remote, env, entries)
    return remote


def agent_append(tmp: Path, remote: Path, env: dict[str, str], entries: range) -> None:
    """The agent appends history and pushes it to main (what reaches the default branch)."""
    clone = tmp / f"agent-{entries.start}-{entries.stop}"
    git(tmp, "clone", "-q", "-b", "main", str(remote), str(clone))
    for i in entries:
        assert dream_cmd(env, "append", "--workspace", str(clone), fact(i)).returncode == 0
    git(clone, "add", "memory/history.jsonl", "memory/.cursor")
    git(clone, "commit", "-q", "-m", f"agent: history {entries.start}..{entries.stop - 1}")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/main")


def checkout(tmp: Path, remote: Path, ref: str, name: str) -> Path:
    """A fresh working tree of REF (what a CI checkout or a reviewer sees)."""
    tree = tmp / name
    git(tmp, "clone", "-q", str(remote), str(tree))
    git(tree, "checkout", "-q", ref)
    return tree
