"""A reader that closes the pipe early (`dream blame USER.md | head -1`) ends the command quietly
with 141, as git does, instead of a "cannot use the workspace: Broken pipe" error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DREAM = [sys.executable, "-c", "from dream_memory.entrypoints.cli import main; main()"]


@pytest.fixture
def big_workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
    env = {
        **os.environ,
        "HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "DREAM_WORKSPACE": "",
        "DREAM_CONFIG": "",
        "DREAM_MODEL": "",
    }
    ws = tmp_path / "ws"
    subprocess.run([*DREAM, "init", "-w", str(ws)], env=env, check=True, capture_output=True)
    # Far more than a pipe's buffer, so the writer meets the closed end.
    lines = "".join(f"- fact number {i} about the user's projects and habits\n" for i in range(20000))
    (ws / "USER.md").write_text("# User\n\n" + lines)
    subprocess.run(["git", "-C", str(ws), "commit", "-qam", "many facts"], env=env, check=True)
    return ws, env


@pytest.mark.parametrize("args", [["blame", "USER.md"]])
def test_a_reader_that_closes_the_pipe_early_gets_a_quiet_exit_141(
    big_workspace: tuple[Path, dict[str, str]], args: list[str]
) -> None:
    """The first line reaches the reader; the command prints nothing on stderr and exits 141."""
    ws, env = big_workspace
    proc = subprocess.Popen([*DREAM, *args, "-w", str(ws)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    code = proc.wait(timeout=120)
    assert first
    assert err == ""
    assert code == 141
