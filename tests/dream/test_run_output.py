"""What `dream run` prints where (issue 17): the JSON report for scripts, schedulers and pipes
(no change for them), `--json` to ask for it anywhere, and a short summary for a person when
stdout is a terminal (before, a one-entry run printed 66 lines of JSON there). `--version` on
every console script, so the container (entry point `dream-run`) can be asked what it is."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from dream_memory import __version__
from dream_memory.testing import build_workspace

REPO_ROOT = Path(__file__).resolve().parents[2]
# `dream` as a real process, whether or not the console scripts are on PATH (tests/conftest.py's).
DREAM = [sys.executable, "-c", "import sys; from dream_memory.entrypoints.cli import main; main()"]


def run_on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    """Run ``dream ARGS`` with stdout on a pseudo-terminal (stderr a pipe); its exit code, the
    terminal's text and stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*DREAM, *args], stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other side closed: the process has ended
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    code = proc.wait(timeout=timeout)
    return code, seen.decode("utf-8", "replace").replace("\r\n", "\n"), err


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea"])


@pytest.mark.slow  # a real process on a real pseudo-terminal
def test_on_a_terminal_run_prints_a_short_summary(ws: Path, clean_env: dict[str, str]) -> None:
    """stdout a terminal, no --json: a few lines saying what happened (status, cursors, commits,
    the files changed) and how to get the full report; no JSON there, and the summary is not
    repeated on stderr."""
    code, shown, err = run_on_a_terminal(["run", "--model", "offline", "--workspace", str(ws)], clean_env)
    assert code == 0, err
    assert shown.startswith("dream: ok, cursor 0 -> 1, 1 entry in 1 batch, 1 commit(s)"), shown
    assert "USER.md: +" in shown and "dream run --json" in shown
    assert len(shown.splitlines()) <= 6 and "{" not in shown
    assert "cursor 0 -> 1" not in err


@pytest.mark.slow  # a real process on a real pseudo-terminal
def test_on_a_terminal_json_still_prints_the_report(ws: Path, clean_env: dict[str, str]) -> None:
    """`dream run --json` on a terminal prints the JSON report there, as on a pipe."""
    code, shown, err = run_on_a_terminal(["run", "--json", "--model", "offline", "--workspace", str(ws)], clean_env)
    assert code == 0, err
    report = json.loads(shown)
    assert report["status"] == "ok" and report["cursor_after"] == 1


def test_on_a_pipe_run_prints_the_json_report_as_before(ws: Path, dream) -> None:
    """stdout a pipe (a script, a scheduler): the JSON report with or without --json, the same
    document; the summary goes to stderr."""
    plain = dream("run", "--model", "offline", "--workspace", str(ws))
    assert plain.returncode == 0, plain.stderr
    report = json.loads(plain.stdout)
    assert report["status"] == "ok" and "dream: ok, cursor 0 -> 1" in plain.stderr
    again = dream("run", "--json", "--model", "offline", "--workspace", str(ws))
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "nothing_to_do"


def console_scripts() -> list[str]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as handle:
        return sorted(tomllib.load(handle)["project"]["scripts"])


@pytest.mark.slow  # each script as a process of its own
@pytest.mark.parametrize("name", console_scripts())
def test_every_console_script_answers_version(name: str, clean_env: dict[str, str]) -> None:
    """`dream --version`, `dream-run --version` and every other script of pyproject's
    [project.scripts]: the package version, exit 0."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as handle:
        target = tomllib.load(handle)["project"]["scripts"][name]
    module, func = target.split(":")
    code = f"import sys; sys.argv[0] = {name!r}; from {module} import {func}; {func}()"
    done = subprocess.run(
        [sys.executable, "-c", code, "--version"], capture_output=True, text=True, env=clean_env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dream-memory, version {__version__}"


def test_demo_takes_json_too(dream) -> None:
    """`dream demo --json`: one JSON document holding the run's report and the change it made
    (before, --json was "No such option" and stdout mixed JSON with the log's text)."""
    done = dream("demo", "--json", "--no-keep")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["report"]["status"] == "ok" and data["workspace"] is None
    assert data["latest"]["commit"] == data["report"]["commits"][-1]
