"""Dream as real processes: concurrent runs, SIGKILL at random moments, the demo on a fresh HOME."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dream_helpers import BIN, Cli, git, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Hang, ScriptedLLMServer, from_chat_model

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

TRIALS = 20


def _env(cli: Cli, workspace: Path) -> dict[str, str]:
    return {**os.environ, **cli.env, "DREAM_WORKSPACE": str(workspace)}


def test_two_runs_started_together_one_works_one_exits_75(isolated: Cli) -> None:
    """Two dream-run processes on one workspace: one processes it, the other exits 75 at once."""
    offline = from_chat_model(OfflineModel())
    with ScriptedLLMServer(responder=lambda request: Hang(0.3, then=offline(request))) as server:
        use_server(isolated, server)
        build_workspace(isolated.workspace, history=sample_entries(4))
        env = _env(isolated, isolated.workspace)
        procs = [
            subprocess.Popen(
                [str(BIN / "dream-run")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outcomes = [(p.wait(timeout=120), p.stdout.read() if p.stdout else "") for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 75], outcomes
    statuses = sorted(json.loads(out)["status"] for _, out in outcomes)
    assert statuses == ["locked", "ok"]
    assert (isolated.workspace / "memory" / ".dream_cursor").read_text().strip() == "4"


def _committed_cursor(workspace: Path) -> int:
    try:
        return int(git(workspace, "show", "HEAD:memory/.dream_cursor").strip())
    except subprocess.CalledProcessError:
        return 0


def _disk_cursor(workspace: Path) -> int:
    path = workspace / "memory" / ".dream_cursor"
    return int(path.read_text().strip() or 0) if path.exists() else 0


def test_sigkill_at_random_moments_never_loses_or_duplicates_work(isolated: Cli, tmp_path: Path) -> None:
    """Killing dream-run anywhere never leaves the cursor ahead of committed memory, never turns an
    interrupted batch into "memory: manual edits", and the next run ends with exactly the memory an
    uninterrupted run produces."""
    entries = sample_entries(24)
    entries[5] = "(nothing)"
    entries[11] = "- [correction] User fact number 3: prefers option 33 for setting 3 (was option 3 for setting 3)."
    template = build_workspace(tmp_path / "template", history=entries)
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    args = [str(BIN / "dream-run"), "--model", "offline", "--batch-size", "2"]
    started = time.monotonic()
    done = subprocess.run(args, env=_env(isolated, reference), capture_output=True, text=True, timeout=120)
    duration = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    expected = {name: (reference / name).read_text() for name in ("USER.md", "SOUL.md", "memory/MEMORY.md")}

    rng = random.Random(20261129)
    killed_mid_run = 0
    for trial in range(TRIALS):
        workspace = tmp_path / f"trial-{trial}"
        shutil.copytree(template, workspace)
        env = _env(isolated, workspace)
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delay = rng.uniform(0.05, duration)
        time.sleep(delay)
        if proc.poll() is not None:
            # It ended before the kill: runs go faster now than the reference did (the machine's
            # load fell). Later kills come within what this one took, so most still land mid-run.
            duration = max(0.1, 0.8 * delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.returncode == -signal.SIGKILL:
            killed_mid_run += 1
        if (workspace / ".git").exists() and (workspace / ".git" / "HEAD").exists():
            assert _disk_cursor(workspace) <= _committed_cursor(workspace), f"trial {trial}: cursor ahead of commits"
        rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, f"trial {trial}: {rerun.stderr}"
        assert _disk_cursor(workspace) == 24
        for name, text in expected.items():
            assert (workspace / name).read_text() == text, f"trial {trial}: {name} differs from an uninterrupted run"
        log = git(workspace, "log", "--format=%s")
        assert "memory: manual edits" not in log, f"trial {trial}: an interrupted batch became a manual edit"
        git(workspace, "fsck", "--strict")
        assert git(workspace, "status", "--porcelain") == ""
    assert killed_mid_run >= TRIALS // 2, "most kills should land while the run is still working"


def test_demo_works_on_a_fresh_home_without_any_key(tmp_path: Path) -> None:
    """`dream demo` runs end to end with no config and no API key, and shows the change it made."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAM_", "OPENAI", "ANTHROPIC"))}
    env.update({"HOME": str(home), "TMPDIR": str(tmp_path)})
    done = subprocess.run([str(BIN / "dream"), "demo"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    report_text, _, log_text = done.stdout.partition("$ dream log")
    report = json.loads(report_text)
    assert report["status"] == "ok" and report["model"] == "offline" and report["cursor_after"] == 45
    assert len(report["commits"]) == 3 and report["changed"]
    assert "commit  " + report["commits"][-1] in log_text
