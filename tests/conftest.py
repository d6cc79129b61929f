"""Fixtures every test folder may use: a real workspace on disk, the real-workspace corpus, and
the environment of a clean machine for subprocesses (an empty HOME, no DREAM_* variables)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace
from dream_memory.testing import clean_env as make_clean_env

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_ROOT = REPO_ROOT.parent / "shared" / "fixtures" / "real-workspaces"

# `dream` as a real process, whether or not the console scripts are on PATH.
DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh workspace with its templates (no history, no repository)."""
    return build_workspace(tmp_path / "ws")


@pytest.fixture
def fixtures_root() -> Path:
    """../shared/fixtures/real-workspaces (read only; never copied into the project)."""
    if not FIXTURES_ROOT.is_dir():
        pytest.skip(f"{FIXTURES_ROOT} is absent")
    return FIXTURES_ROOT


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """A machine with no configuration at all: HOME is an empty folder (so no git identity and
    no ~/.nanoinfra), no system git config, no DREAM_* variables."""
    return make_clean_env(tmp_path / "home")


@pytest.fixture
def dream(clean_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``dream ARGS...`` as a separate process on a clean machine; returns the completed process."""

    def run(
        *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*DREAM, *args],
            input=input.encode("utf-8") if isinstance(input, str) else input,
            capture_output=True,
            env={**clean_env, **(env or {})},
            timeout=timeout,
        )
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        )

    return run
