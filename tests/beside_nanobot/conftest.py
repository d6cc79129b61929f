"""Tests beside a real nanobot: nanobot-ai from the package index (``scripts/setup-nanobot-venv``
makes ``.venv-nanobot``), its own classes driven in a subprocess against the workspace
dream-memory works on. Skipped, with the reason, when that venv cannot be made."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import NEW, SETUP, VENV, Nanobot


@pytest.fixture(scope="session")
def nanobot_python() -> Path:
    """The venv's interpreter, made on first use (about 20-40 s; 2 s once it exists)."""
    try:
        proc = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"nanobot-ai could not be installed into .venv-nanobot: {exc}")
    if proc.returncode != 0:
        reason = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        pytest.skip(f"nanobot-ai could not be installed into .venv-nanobot ({reason[0]})")
    return VENV / "bin" / "python"


@pytest.fixture
def nanobot_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return home


@pytest.fixture
def nanobot(nanobot_python: Path, nanobot_home: Path) -> Nanobot:
    """nanobot-ai 0.3.5 (the release whose session store lives outside the workspace)."""
    return Nanobot(nanobot_python, NEW, nanobot_home)


@pytest.fixture
def nanobot_of(nanobot_python: Path, nanobot_home: Path) -> Callable[[str], Nanobot]:
    """Either release by version string, sharing one HOME."""
    return lambda version: Nanobot(nanobot_python, version, nanobot_home)
