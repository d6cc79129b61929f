"""Helpers for the fault tests: `dream` as a real process on a clean machine, optionally with a
fault placed at one write site (a SIGKILL or ENOSPC just before the N-th write at that site), or
many commands as processes forked from one warmed interpreter (``dream_each``)."""

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


# Runs `dream` commands each in its own process: one interpreter imports everything a command may
# load lazily (while still root, when the commands run as another user: the interpreter itself
# may live where that user cannot read), then forks a child per command, which runs it as `dream`
# would, exit code and all. Forking from one warmed interpreter, rather than starting one per
# command, spares an import of the whole CLI per command (about 0.5 CPU s each; the tests that
# run every command against one broken workspace ran 14 of them).
EACH = r"""
import importlib, json, os, sys, tempfile
for name in '''dream_memory.entrypoints.cli dream_memory.app.runtime dream_memory.settings
dream_memory.settings.loading dream_memory.app.dream dream_memory.app.consolidate dream_memory.app.versioning
dream_memory.app.held dream_memory.app.read dream_memory.app.context dream_memory.app.history
dream_memory.app.deletion_window dream_memory.adapters.git dream_memory.adapters.history_log
dream_memory.adapters.locks dream_memory.adapters.staging dream_memory.adapters.offline
dream_memory.adapters.tokens dream_memory.adapters.secrets dream_memory.adapters.sessions
dream_memory.adapters.workspace dream_memory.adapters.clock dream_memory.adapters.search_index
dream_memory.core.schedule dream_memory.entrypoints.cli.dream_cmds dream_memory.entrypoints.cli.history_cmds
dream_memory.entrypoints.cli.version_cmds dream_memory.entrypoints.cli.read_cmds
dream_memory.entrypoints.cli.consolidate_cmd dream_memory.entrypoints.cli.agent_cmds
dream_memory.entrypoints.cli.deploy_cmds detect_secrets.filters.heuristic sqlite3 tempfile email.message
importlib.metadata uuid shutil difflib'''.split():
    importlib.import_module(name)
from dream_memory.adapters.secrets import SecretScanner
from dream_memory.adapters.tokens import default_counter
SecretScanner().redact("warm the detectors: password = hunter22")
default_counter().count("warm the tokenizer")
from dream_memory.entrypoints.cli import main
uid = int(sys.argv[1])
results = []
for args in json.loads(sys.argv[2]):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # The child ends as a `dream` process does: SystemExit or a traceback, then exit.
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            if uid >= 0:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            sys.argv = ["dream", *args]
            main()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        texts = []
        for stream in (out, err):
            stream.seek(0)
            texts.append(stream.read().decode("utf-8", "replace"))
        results.append({"returncode": os.waitstatus_to_exitcode(status), "stdout": texts[0], "stderr": texts[1]})
print(json.dumps(results))
"""


def dream_each(
    env: dict[str, str], commands: list[list[str]], *, uid: int = -1
) -> list[subprocess.CompletedProcess[str]]:
    """Each of ``commands`` run in turn as its own `dream` process (of user ``uid`` when given),
    with its outcome."""
    done = subprocess.run(
        [sys.executable, "-c", EACH, str(uid), json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120 * len(commands),
        cwd="/",
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-2000:]
    return [
        subprocess.CompletedProcess(["dream", *args], r["returncode"], r["stdout"], r["stderr"])
        for args, r in zip(commands, json.loads(done.stdout), strict=True)
    ]
