"""`dream eval`'s progress on stderr and its stop on SIGTERM (issue 17): one line per scenario
day and per scenario, JSON lines with --log-format json, and an `interrupted` report after a
signal, with the scenarios done keeping their scores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import Hang, ScriptedLLMServer, from_chat_model


def test_eval_progress_in_plain_and_json(dream) -> None:
    """Plain: a line per scenario day and one per scenario with its verdict and score; with
    --log-format json every stderr line is a JSON object: run_started (total 1), a scenario_step
    per day, scenario_ended with the score the report gives, run_ended; --quiet: none of them."""
    plain = dream("eval", "--scenario", "personal", timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "dream: eval: 1 scenario(s) with model offline, in " in plain.stderr
    assert any(line.startswith("dream: eval: personal: PASS, ") for line in plain.stderr.splitlines())

    logged = dream("eval", "--scenario", "personal", "--json", "--log-format", "json", timeout=120)
    assert logged.returncode == 0, logged.stderr
    report = json.loads(logged.stdout)
    assert report["status"] == "ok"
    events = [json.loads(line) for line in logged.stderr.splitlines() if line.strip()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and events[0]["total"] == 1 and events[0]["unit"] == "scenario"
    assert kinds.count("scenario_step") >= 2
    (ended,) = [e for e in events if e["event"] == "scenario_ended"]
    assert (ended["scenario"], ended["passed"], ended["score"]) == ("personal", True, report["score"]["passed"])
    assert "run_ended" in kinds

    quiet = dream("eval", "--scenario", "personal", "--quiet", timeout=120)
    assert quiet.returncode == 0
    assert "dream: eval: personal" not in quiet.stderr


@pytest.mark.slow
def test_sigterm_stops_the_evaluation_with_an_interrupted_report(clean_env: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM while a scenario runs behind a slow model: exit 143 soon after, the --json report
    says `interrupted`, names the scenario in flight (not scored) and the ones not run."""
    offline = from_chat_model(OfflineModel())
    with ScriptedLLMServer(responder=lambda request: Hang(0.5, then=offline(request))) as server:
        config = tmp_path / "dream.json"
        preset = {
            "model": "openai/scripted-model",
            "apiBase": server.base_url,
            "apiKeyEnv": "SCRIPTED_API_KEY",
            "maxRetries": 0,
            "timeout": 10,
        }
        config.write_text(json.dumps({"agents": {"defaults": {"model": "slow"}}, "modelPresets": {"slow": preset}}))
        env = {**clean_env, "DREAM_CONFIG": str(config), "SCRIPTED_API_KEY": "test-key-not-secret"}
        env = {**{k: v for k, v in os.environ.items() if k not in env}, **env}
        proc = subprocess.Popen(
            [sys.executable, "-c", "from dream_memory.entrypoints.cli import main; main()", "eval", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 90
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, lines
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        reader.join(timeout=5)
    assert proc.returncode == 143, "".join(lines)
    assert time.monotonic() - sent < 30
    report = json.loads(out)
    assert report["status"] == "interrupted" and report["stopped_by"] == signal.SIGTERM
    assert report["interrupted"] == "personal"  # the first bundled scenario, in flight
    assert report["not_run"] == ["project", "scopes"]
    assert report["scenarios"] == [] and report["passed"] is False
