"""A process committing memory killed with SIGKILL at an arbitrary moment (objects, ref, files,
the index written by our own writer, the journal): the next Dream run finishes or rolls the
change back, and the repository is one `git fsck` accepts, with nothing staged by accident."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a few dozen real processes

COMMITTER = r"""
import sys
from pathlib import Path
from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock

ws = Path(sys.argv[1])
with GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=1)) as store:
    print("ready", flush=True)
    n = 0
    while True:  # commits until killed
        n += 1
        user = (ws / "USER.md").read_bytes() + f"- killed-run fact {sys.argv[2]}.{n}\n".encode()
        memory = (ws / "memory/MEMORY.md").read_bytes() + f"- note {n}\n".encode()
        apply_commit(store, {"USER.md": user, "memory/MEMORY.md": memory}, f"dream: kill test {n}")
        print("committed", flush=True)
"""


def test_a_commit_killed_at_any_moment_leaves_a_repository_git_accepts(tmp_path: Path, dream, git) -> None:
    """Twelve kills at moments spread over a commit's life: after each, a Dream run succeeds,
    `git fsck` reports no error, and `git status` shows no staged or modified memory file.

    Even trials kill during the first commit, odd ones during a later commit: the clock starts
    when the committer says it has landed one. So kills land in commits that follow a finished one
    however slow the machine is (CI once killed all twelve before any commit finished)."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for trial in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", COMMITTER, str(ws), str(trial)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        if trial % 2:
            assert proc.stdout.readline().strip() == "committed"
        time.sleep(0.003 + trial * 0.0071)  # lands in a different part of a commit each time
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()

        assert dream("append", "--workspace", str(ws), f"- [durable] fact after kill {trial}").returncode == 0
        done = dream("run", "--model", "offline", "--workspace", str(ws))
        assert done.returncode == 0, done.stderr
        fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=ws, capture_output=True, text=True)
        assert fsck.returncode == 0 and "error" not in fsck.stderr, fsck.stderr
        assert git(ws, "status", "--porcelain", "--", "USER.md", "memory/MEMORY.md", "SOUL.md") == ""
    assert git(ws, "log", "--oneline").count("dream: kill test") > 0
