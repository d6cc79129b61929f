"""SIGTERM (docker stop, a scheduler) or Ctrl-C during `dream forget`: it says it stopped part
way and to run the same forget again, which finishes the purge. It used to end with 143 and
nothing on stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from forget_helpers import CANARY, Env, dreamt_workspace, holders

# argv: SITE dream-arguments...: the process sends itself SIGTERM just before the first write at SITE
RUNNER = r"""
import os, signal, sys
from dream_memory.testing.faults import fault_hook
site = sys.argv[1]
def inject(name, path):
    if name == site:
        os.kill(os.getpid(), signal.SIGTERM)
with fault_hook(inject):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[2:]]
    main()
"""


def _forget_stopped_at(env: Env, site: str) -> subprocess.CompletedProcess[str]:
    """`dream forget --purge CANARY` as a process that sends itself SIGTERM at ``site``."""
    return subprocess.run(
        [sys.executable, "-c", RUNNER, site, "forget", "--purge", CANARY],
        env={**os.environ, **env.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("site", ["history.rewrite", "forget.ref"])
def test_sigterm_says_the_purge_is_unfinished_and_the_same_forget_finishes_it(tmp_path: Path, site: str) -> None:
    env = Env(tmp_path)
    dreamt_workspace(env, batches=2)

    stopped = _forget_stopped_at(env, site)

    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert "SIGTERM received" in stopped.stderr
    assert "run the same dream forget again" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert env.process("forget", "--purge", CANARY).returncode == 0
    assert holders(env) == {}


def test_sigterm_before_the_journal_says_nothing_was_changed(tmp_path: Path) -> None:
    """Stopped before its journal is written, forget has changed nothing and says so: it does not
    send the user to finish a purge that never started, and `dream run` is not refused."""
    env = Env(tmp_path)
    dreamt_workspace(env, batches=1)
    stopped = _forget_stopped_at(env, "forget.journal")
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert "the purge had not started: nothing was changed" in stopped.stderr
    assert "run the same dream forget again" not in stopped.stderr
    assert env.process("run", "--model", "offline").returncode == 0
