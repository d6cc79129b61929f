"""A revision or path argument holding bytes that are not UTF-8 is looked up as the bytes it is,
and not finding it says so (exit 2). Before, the look-up's own encoding failed inside the git
adapter, which took it for a damaged object: "the git repository ... is damaged ... run git fsck",
sending a user to repair a healthy repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.testing import clean_env

CLI = "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()"


def dream(env: dict[str, str], *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", CLI, *args], env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("command", ["log", "restore"])
def test_a_revision_that_is_not_utf8_is_not_found_rather_than_damage(tmp_path: Path, command: str) -> None:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0

    done = dream(env, command, b"caf\xff.md")

    stderr = done.stderr.decode("utf-8")
    assert done.returncode == 2, stderr
    assert "no branch or commit named 'caf\\udcff.md'" in stderr
    assert "damaged" not in stderr and "Traceback" not in stderr
    assert subprocess.run(["git", "-C", str(ws), "fsck", "--no-progress"], capture_output=True).returncode == 0
