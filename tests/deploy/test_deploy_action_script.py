"""The action's run step (deploy/github-action/dream_action.py): argv, outputs, summary, exit codes.

The commands are stand-ins that print a given report and exit with a given code, so every path of
the step is exercised; the real command under the real action runs in ci/steps/70-action.sh (act).
"""

from __future__ import annotations

import importlib.util
import json
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from deploy_helpers import REPO, git

SCRIPT = REPO / "deploy/github-action/dream_action.py"
SHA1 = "a" * 40
SHA2 = "b" * 40
REPORT = {
    "status": "ok",
    "workspace": "/w",
    "version": "0.1.0",
    "cursor_before": 3,
    "cursor_after": 9,
    "entries_processed": 6,
    "batches": [
        {"cursor_from": 4, "cursor_to": 6, "entries": 3, "facts": 2, "commit": SHA1},
        {"cursor_from": 7, "cursor_to": 9, "entries": 3, "facts": 1, "commit": SHA2},
    ],
    "commits": [SHA1, SHA2],
    "files_changed": [{"path": "USER.md", "added": 4, "removed": 1}, {"path": "a|b.md", "added": 1, "removed": 0}],
    "model": "openai/gpt-4o-mini",
    "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050, "cost_usd": 0.0021, "llm_calls": 4},
    "changed": True,
    "held": [{"id": "h1", "cursor_from": 10, "cursor_to": 12, "reason": "deletes SOUL.md"}],
    "set_aside": [],
    "redactions": {"github_token": 1},
    "diff": "",
    "duration_s": 3.25,
    "errors": [],
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dream_action", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


action = _load()


def fake_bin(tmp_path: Path, stdout: str, code: int) -> Path:
    """A venv-like folder whose dream-* scripts record their argv and print `stdout`."""
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    (tmp_path / "out.txt").write_text(stdout, encoding="utf-8")
    for name in ("dream-run", "dream-consolidate", "dream-restore"):
        script = bindir / name
        script.write_text(
            f"#!{sys.executable}\n"
            "import json, sys\n"
            f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv))\n"
            "print('progress on stderr', file=sys.stderr)\n"
            f"sys.stdout.write(open({str(tmp_path / 'out.txt')!r}).read())\n"
            f"sys.exit({code})\n",
            encoding="utf-8",
        )
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir.parent


def run_step(tmp_path: Path, stdout: str, code: int, **inputs: str) -> tuple[int, dict[str, str], str, list[str]]:
    venv = fake_bin(tmp_path, stdout, code)
    (tmp_path / "runner").mkdir()
    env = {
        "DREAM_ACTION_VENV": str(venv),
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "DREAM_ACTION_SERVER_URL": "https://git.example.invalid",
        "DREAM_ACTION_REPOSITORY": "me/memory",
        "PATH": "/usr/bin:/bin",
    }
    env.update({f"DREAM_ACTION_{k.upper()}": v for k, v in inputs.items()})
    proc = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, check=False)
    outputs = {}
    if (tmp_path / "output").exists():
        for line in (tmp_path / "output").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
    summary = (tmp_path / "summary").read_text(encoding="utf-8") if (tmp_path / "summary").exists() else ""
    argv = json.loads((tmp_path / "argv.json").read_text()) if (tmp_path / "argv.json").exists() else []
    assert proc.stdout == (stdout if argv else "")  # the report is passed through to the log
    return proc.returncode, outputs, summary, argv


def test_run_ok_outputs_summary_and_report_file(tmp_path: Path) -> None:
    code, outputs, summary, argv = run_step(
        tmp_path, json.dumps(REPORT), 0, command="run", workspace="ws", model="openai/x", args="--max-batches 2"
    )
    assert code == 0
    assert argv[1:] == ["--workspace", str(Path.cwd() / "ws"), "--model", "openai/x", "--max-batches", "2"]
    assert Path(argv[0]).name == "dream-run"
    assert outputs["status"] == "ok"
    assert outputs["changed"] == "true"
    assert json.loads(outputs["commits"]) == [SHA1, SHA2]
    assert outputs["exit-code"] == "0"
    assert outputs["held"] == "1"
    assert "continued" not in outputs and "update-pr" not in outputs  # no continue-from
    assert json.loads(Path(outputs["report"]).read_text()) == REPORT
    assert Path(outputs["summary"]).read_text() == summary
    assert summary.startswith("### dream run: ok (exit 0)")
    for fragment in (
        "| facts | 3 |",
        "| tokens | 1050 total: 1000 prompt, 50 completion, 4 LLM calls |",
        "| cost | $0.0021 |",
        "| entries processed | 6 (cursor 3 → 9) |",
        f"[`{SHA1[:10]}`](https://git.example.invalid/me/memory/commit/{SHA1}) cursors 4..6, 2 facts",
        "| `USER.md` | 4 | 1 |",
        "| `a\\|b.md` | 1 | 0 |",
        "`h1` (this run) cursors 10..12: deletes SOUL.md",
        "| held for review | 1 (1 held by this run) |",
        "github_token: 1",
    ):
        assert fragment in summary, fragment


@pytest.mark.parametrize(
    ("code", "status"), [(1, "failed"), (75, "locked"), (2, "usage_error"), (130, "interrupted"), (143, "interrupted")]
)
def test_exit_codes_pass_through_without_a_report(tmp_path: Path, code: int, status: str) -> None:
    """A command that printed no JSON still gets outputs; its exit code is the step's."""
    rc, outputs, summary, _ = run_step(tmp_path, "not json\n", code)
    assert rc == code
    assert outputs["status"] == status
    assert outputs["changed"] == "false"
    assert outputs["commits"] == "[]"
    assert outputs["exit-code"] == str(code)
    assert f"### dream run: {status} (exit {code})" in summary
    assert "not json" in summary


def test_a_report_status_wins_over_the_exit_code(tmp_path: Path) -> None:
    report = {**REPORT, "status": "locked", "commits": [], "changed": False}
    rc, outputs, _, _ = run_step(tmp_path, json.dumps(report), 75)
    assert (rc, outputs["status"], outputs["commits"]) == (75, "locked", "[]")


def test_consolidate_and_restore(tmp_path: Path) -> None:
    rc, outputs, summary, argv = run_step(
        tmp_path, json.dumps({"status": "ok", "sessions": []}), 0, command="consolidate", model="m", args="--all"
    )
    assert rc == 0
    assert Path(argv[0]).name == "dream-consolidate"
    assert argv[-3:] == ["--model", "m", "--all"]
    assert outputs["status"] == "ok"
    assert "```json" in summary


def test_restore_ignores_model(tmp_path: Path) -> None:
    rc, _, _, argv = run_step(tmp_path, "", 0, command="restore", model="m", args="abcd1234 --force")
    assert rc == 0
    assert Path(argv[0]).name == "dream-restore"
    assert "--model" not in argv
    assert argv[-2:] == ["abcd1234", "--force"]


@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [({"command": "serve"}, "input 'command' must be one of"), ({"args": "'unclosed"}, "cannot be split")],
)
def test_bad_inputs_are_exit_2(tmp_path: Path, inputs: dict[str, str], fragment: str) -> None:
    rc, outputs, _, argv = run_step(tmp_path, "", 0, **inputs)
    assert rc == 2
    assert argv == []  # nothing ran
    assert outputs["status"] == "usage_error"


def test_args_are_never_shell_expanded(tmp_path: Path) -> None:
    rc, _, _, argv = run_step(tmp_path, "", 0, args='--branch "$(touch pwned)" `id` ; rm -rf /')
    assert rc == 0
    assert argv[-7:] == ["--branch", "$(touch pwned)", "`id`", ";", "rm", "-rf", "/"]
    assert not (tmp_path / "pwned").exists()


def test_summary_without_links_when_repository_unknown() -> None:
    text = action.render_summary("run", REPORT, 0)
    assert f"`{SHA1[:10]}` cursors 4..6" in text
    assert "](" not in text


def test_a_cancelled_step_passes_the_signal_to_dream_and_keeps_its_report(tmp_path: Path) -> None:
    """Cancelling the job signals only the step's entry process (the runner's bash running the
    action's `run:` script), then kills the tree 10 s later: the SIGINT reaches Dream through the
    step, Dream's `interrupted` report and exit code 130 come out within its stop wait, and the
    step's outputs say so."""
    import contextlib
    import os
    import signal
    import time

    import yaml

    venv = fake_bin(tmp_path, "", 0)
    (venv / "bin" / "python").symlink_to(sys.executable)
    started = tmp_path / "started"
    (venv / "bin" / "dream-run").write_text(
        f"#!{sys.executable}\n"
        "import json, signal, sys, time\n"
        "def stop(signum, frame):\n"
        "    time.sleep(1.0)  # the model call in flight gets its wait\n"
        "    print(json.dumps({'status': 'interrupted', 'stopped_by': signum, 'batches': [], 'commits': []}))\n"
        "    sys.exit(128 + signum)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"open({str(started)!r}, 'w').close()\n"
        "time.sleep(30)\n",
        encoding="utf-8",
    )
    step = next(s for s in yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"] if s["id"] == "dream")
    script = tmp_path / "step.sh"
    script.write_text(step["run"] + "\n", encoding="utf-8")
    (tmp_path / "runner").mkdir()
    env = {
        "DREAM_ACTION_VENV": str(venv),
        "GITHUB_ACTION_PATH": str(REPO),
        "DREAM_ACTION_COMMAND": "run",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "PATH": "/usr/bin:/bin",
    }
    # As the runner starts a `shell: bash` step; its own session, so the signal reaches bash alone.
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "dream-run never started"
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=7.5)  # the runner's second signal comes after 7.5 s
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert time.monotonic() - sent < 7.5
    assert proc.returncode == 130, err
    assert json.loads(out)["status"] == "interrupted"
    outputs = dict(line.partition("=")[::2] for line in (tmp_path / "output").read_text().splitlines() if "=" in line)
    assert outputs["status"] == "interrupted" and outputs["exit-code"] == "130"


def test_a_cancel_landing_while_dream_starts_is_passed_on_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's SIGINT can land while the step is still starting Dream (a loaded runner; CI
    caught it once): the step must not die of it and leave Dream running unsignalled, but pass it
    on, so Dream stops with its `interrupted` report. The signal is sent to this process at the
    moment Popen has started Dream and not yet returned."""
    import os
    import signal
    import time

    ready = tmp_path / "ready"
    child = tmp_path / "dream-run"
    child.write_text(
        "import json, signal, sys, time\n"
        "def stop(signum, frame):\n"
        "    print(json.dumps({'status': 'interrupted'}))\n"
        "    sys.exit(128 + signum)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(30)\n",
        encoding="utf-8",
    )
    real_popen = subprocess.Popen
    started: list[subprocess.Popen[str]] = []

    def popen_then_cancel(*args: object, **kwargs: object) -> subprocess.Popen[str]:
        proc: subprocess.Popen[str] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:  # Dream's handler is in place
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # the cancel, before Popen has returned
        return proc

    monkeypatch.setattr(action.subprocess, "Popen", popen_then_cancel)
    try:
        done = action.run_forwarding_signals([sys.executable, str(child)])
    except KeyboardInterrupt:
        pytest.fail("the step died of the cancel instead of passing it on to Dream")
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert done.returncode == 130
    assert json.loads(done.stdout)["status"] == "interrupted"


def _checkout_with_review_branch(tmp_path: Path) -> Path:
    """A checkout of main whose remote also has the review branch dream/memory (fetch-depth: 0)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    (seed / "USER.md").write_text("# User\n", encoding="utf-8")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "agent: workspace")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main", "HEAD:refs/heads/dream/memory")
    tree = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", "--no-single-branch", str(remote), str(tree))
    return tree


def continue_step(tmp_path: Path, branch: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str], bool]:
    """The run step with continue-from BRANCH on a real checkout; whether dream-run was started."""
    tree = _checkout_with_review_branch(tmp_path)
    venv = fake_bin(tmp_path, json.dumps(REPORT), 0)
    env = {
        "DREAM_ACTION_VENV": str(venv),
        "DREAM_ACTION_WORKSPACE": str(tree),
        "DREAM_ACTION_CONTINUE_FROM": branch,
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, check=False)
    outputs = dict(line.split("=", 1) for line in (tmp_path / "output").read_text(encoding="utf-8").splitlines())
    return proc, outputs, (tmp_path / "argv.json").exists()


@pytest.mark.parametrize("branch", ["dream memory", "dream/memory.lock", "-dream", "dream..memory", "HEAD"])
def test_continue_from_a_name_no_branch_can_have_is_exit_2(tmp_path: Path, branch: str) -> None:
    """An impossible name once read as "no branch yet": Dream rebuilt from the checkout and
    update-pr=true let the push step replace the real review branch. Now nothing runs."""
    proc, outputs, ran = continue_step(tmp_path, branch)
    assert proc.returncode == 2
    assert not ran
    assert f"input 'continue-from' {branch!r} is not a branch name" in proc.stderr
    assert "e.g. dream/memory" in proc.stderr
    assert outputs["update-pr"] == "false"
    assert outputs["exit-code"] == "2"


def test_continue_from_a_branch_the_remote_lacks_says_so_by_name(tmp_path: Path) -> None:
    """A valid name that is not on the remote (a typo?) still starts from the checkout, and the log
    names the branch and what to check."""
    proc, outputs, ran = continue_step(tmp_path, "dream/memroy")
    assert proc.returncode == 0, proc.stderr
    assert ran
    assert "no branch 'dream/memroy' on the remote" in proc.stderr
    assert "check the spelling of continue-from" in proc.stderr
    assert outputs["continued"] == "false"
