"""Docs that are generated from the code stay in step with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_commands_reference_matches_the_cli_help() -> None:
    """docs/commands.md is exactly what scripts/gen_commands_doc.py renders from --help."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_commands_doc.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_readme_starts_with_the_two_fresh_machine_commands() -> None:
    """The README opens with the command that installs and runs the demo, then the test command."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert block[0].endswith("dream demo") and "pip install" in block[0]
    assert block[1] == "scripts/test"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test" in ci
