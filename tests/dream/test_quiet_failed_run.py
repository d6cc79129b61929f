"""`dream run -q` silences progress, never a failure: a run whose batch failed still says why on
stderr (the error and its hint, then the summary), in plain lines and with --log-format json; a
run that went well stays silent. Real workspaces, a model server that is not there."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from dream_helpers import dream_cli

from dream_memory.testing import clean_env, write_session


def dream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return dream_cli(env, *args)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def workspace(tmp_path: Path) -> dict[str, str]:
    """A workspace with two entries and a model preset whose server is not there (no retries)."""
    ws = tmp_path / "ws"
    config = tmp_path / "dream.json"
    preset = {
        "model": "openai/gone-model",
        "apiBase": f"http://127.0.0.1:{closed_port()}/v1",
        "apiKeyEnv": "GONE_API_KEY",
        "maxRetries": 0,
        "timeout": 10,
    }
    config.write_text(
        json.dumps({"agents": {"defaults": {"model": "gone"}}, "modelPresets": {"gone": preset}}), encoding="utf-8"
    )
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws), DREAM_CONFIG=str(config), GONE_API_KEY="not-secret")
    assert dream(env, "init").returncode == 0
    for fact in ("- [durable] User prefers dark mode.", "- Decided to use PostgreSQL."):
        assert dream(env, "append", fact).returncode == 0
    return env


def test_a_quiet_run_that_failed_still_shows_the_error_and_its_hint(tmp_path: Path) -> None:
    env = workspace(tmp_path)
    done = dream(env, "run", "-q", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "failed" and report["errors"]
    assert "could not reach" in done.stderr, done.stderr
    assert "hint: check the api base address" in done.stderr, done.stderr
    assert "dream: failed, cursor 0 -> 0" in done.stderr and "  error: batch 1..2" in done.stderr, done.stderr


def test_a_quiet_failed_run_with_json_logs_shows_the_failure_as_json(tmp_path: Path) -> None:
    env = workspace(tmp_path)
    done = dream(env, "run", "-q", "--json", "--log-format", "json")
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    failed = [x for x in lines if x["event"] == "batch_ended"]
    assert len(failed) == 1 and failed[0]["outcome"] == "failed" and "hint:" in failed[0]["error"], lines
    assert any(x["event"] == "summary" and "error:" in x["text"] for x in lines), lines
    assert not any(x["event"] == "retry" or x["event"].startswith("run_") for x in lines), lines


def test_a_quiet_run_that_went_well_stays_silent(tmp_path: Path) -> None:
    env = workspace(tmp_path)
    done = dream(env, "run", "-q", "--json", "--model", "offline")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    assert done.stderr == ""


def test_a_quiet_consolidation_whose_model_failed_still_says_so(tmp_path: Path) -> None:
    """`dream consolidate -q` with the model server gone archives the slice raw (nothing is lost)
    and its report carries the error: stderr still says so, with the session and the cause; the
    same command that went well prints nothing."""
    env = workspace(tmp_path)
    ws = Path(env["DREAM_WORKSPACE"])
    messages = [
        {"role": ("user", "assistant")[i % 2], "content": f"message {i} about the event store"} for i in range(12)
    ]
    write_session(ws, "cli:direct", messages)
    done = dream(env, "consolidate", "--all", "--force", "-q")
    report = json.loads(done.stdout)
    assert report["errors"] and report["sessions"][0]["raw_fallback"], report
    assert "archived raw" in done.stderr and "could not reach" in done.stderr, done.stderr
    assert "sessions/cli_direct.jsonl" in done.stderr, done.stderr
    write_session(ws, "cli:other", messages)
    quiet = dream(
        env, "consolidate", "--session", str(ws / "sessions" / "cli_other.jsonl"), "--force", "-q", "--model", "offline"
    )
    assert quiet.returncode == 0 and not json.loads(quiet.stdout)["errors"], quiet.stderr
    assert quiet.stderr == ""
