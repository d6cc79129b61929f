"""Fixtures for the deployment tests (helpers live in deploy_helpers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deploy_helpers import BIN


@pytest.fixture
def run_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for subprocesses: empty HOME, the venv's scripts first on PATH."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
