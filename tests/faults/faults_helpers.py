"""Helpers for the fault tests: `dream` as a real process on a clean machine, optionally with a
fault placed at one write site (a SIGKILL or ENOSPC just before the N-th write at that site)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "reliability.md"

# argv: ACTION (kill | enospc | -) SITE N dream-arguments...
# SITE is an fsutil site name or one of git's lock sites (git.lock.object, git.lock.ref,
# git.lock.index): the moment dulwich holds that lock file, written but not yet renamed.
RUNNER = r"""
import errno, os, signal, sys
from dream_memory.testing.faults import fault_hook
action, site, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = [0]
def inject(name, path):
    if action == "-" or name != site:
        return
    seen[0] += 1
    if seen[0] == nth:
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
with fault_hook(inject):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[4:]]
    main()
"""


def dream(
    env: dict[str, str], *args: str, fault: tuple[str, str, int] = ("-", "-", 0), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `dream ARGS...` as a process; ``fault`` = (kill | enospc, site, n)."""
    action, site, nth = fault
    return subprocess.run(
        [sys.executable, "-c", RUNNER, action, site, str(nth), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any] | None:
    """The JSON report on stdout, or None when there is none."""
    try:
        value = json.loads(done.stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def history_contents(workspace: Path) -> list[str]:
    path = workspace / "memory" / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["content"] for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
