"""Drives a real nanobot-ai release in a subprocess (see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV = REPO_ROOT / ".venv-nanobot"
SETUP = REPO_ROOT / "scripts" / "setup-nanobot-venv"
NEW, OLD = "0.3.5", "0.3.0"


@dataclass
class Nanobot:
    """One nanobot release, run as its own process with HOME at ``home`` (so ``~/.nanobot`` with
    its session store is a temp folder too)."""

    python: Path
    version: str
    home: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAM_", "NANOBOT_", "PYTHON"))}
        env["HOME"] = str(self.home)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.version == OLD:
            env["PYTHONPATH"] = str(VENV / f"v{OLD}")
        return env

    def start(self, code: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(self.python), "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
        )

    def run(self, code: str, *args: str, timeout: float = 120) -> Any:
        """Run ``code`` and return what it printed last, read as JSON (None when nothing)."""
        proc = subprocess.run(
            [str(self.python), "-c", code, *args], capture_output=True, text=True, env=self.env(), timeout=timeout
        )
        assert proc.returncode == 0, f"nanobot {self.version} failed:\n{proc.stderr[-4000:]}"
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else None
