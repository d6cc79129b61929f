"""`dream run` stopped by SIGTERM / SIGINT, and its progress lines: real processes, real signals,
a scripted model on 127.0.0.1 taking about a second per call (issue 17)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import BIN, Cli, git, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Hang, ScriptedLLMServer, from_chat_model

pytestmark = pytest.mark.slow  # real processes, seconds of model time each

ENTRIES = 60
BATCH = 20


@contextmanager
def slow_model(cli: Cli, seconds: float) -> Iterator[ScriptedLLMServer]:
    """The offline engine behind HTTP, each answer after ``seconds``."""
    offline = from_chat_model(OfflineModel())
    with ScriptedLLMServer(responder=lambda request: Hang(seconds, then=offline(request))) as server:
        use_server(cli, server)
        yield server


class Running:
    """A `dream run` process whose stderr lines are read as they arrive, each with its time."""

    def __init__(self, cli: Cli, *args: str) -> None:
        env = {**os.environ, **cli.env}
        self.proc = subprocess.Popen(
            [str(BIN / "dream"), "run", "--batch-size", str(BATCH), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put((time.monotonic(), line.rstrip("\n")))

    def wait_line(self, wanted: Callable[[str], bool], timeout: float = 60) -> float:
        """When the first stderr line ``wanted`` accepts arrived."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line on stderr within {timeout} s; saw {self.seen}") from None
            self.seen.append(line)
            if wanted(line):
                return at

    def finish(self, timeout: float = 60) -> tuple[int, dict[str, Any], float]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        ended = time.monotonic()
        self.reader.join(timeout=5)
        while not self.lines.empty():  # every line, for the assertion messages
            self.seen.append(self.lines.get()[1])
        return self.proc.returncode, json.loads(out), ended


def _batch_one_ended(line: str) -> bool:
    return line.startswith(f"dream: batch 1..{BATCH} ")


def _cursor(workspace: Path) -> int:
    return int((workspace / "memory" / ".dream_cursor").read_text().strip())


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_after_the_first_batch_prints_a_partial_report_and_the_next_run_continues(
    isolated: Cli, tmp_path: Path, signum: int, code: int
) -> None:
    """A signal once batch 1 has committed: the run stops after the model call in flight, batch 2
    is rolled back, stdout and --report hold the `interrupted` report listing batch 1's commit,
    the cursor is batch 1's end, git fsck is clean, the exit code is 128 + the signal, and the
    next run continues from there to the end."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    report_file = tmp_path / "report.json"
    with slow_model(isolated, 1.0):
        run = Running(isolated, "--report", str(report_file))
        run.wait_line(_batch_one_ended)
        run.proc.send_signal(signum)
        exit_code, report, _ = run.finish()
        assert exit_code == code, run.seen
        assert report["status"] == "interrupted"
        assert json.loads(report_file.read_text()) == report
        committed = [b for b in report["batches"] if b["outcome"] == "committed"]
        assert [(b["cursor_from"], b["cursor_to"]) for b in committed] == [(1, BATCH)]
        assert report["commits"] == [committed[0]["commit"]]
        assert report["cursor_after"] == BATCH
        assert [b["outcome"] for b in report["batches"][1:]] in ([], ["interrupted"])
        assert _cursor(isolated.workspace) == BATCH
        assert git(isolated.workspace, "rev-parse", "HEAD").strip() == committed[0]["commit"]
        fsck = subprocess.run(
            ["git", "-C", str(isolated.workspace), "fsck", "--strict"], capture_output=True, text=True
        )
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
        assert git(isolated.workspace, "status", "--porcelain", "--untracked-files=no") == ""

    with slow_model(isolated, 0.0):
        done = isolated.subprocess("dream", "run", "--batch-size", str(BATCH), "--quiet", timeout=120)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    assert again["cursor_before"] == BATCH
    assert again["cursor_after"] == ENTRIES
    assert [b["cursor_from"] for b in again["batches"]] == [BATCH + 1, 2 * BATCH + 1]


def test_a_second_signal_stops_at_once_and_the_next_run_recovers(isolated: Cli) -> None:
    """A second SIGTERM while a slow model call is in flight ends the process at once (exit 143,
    long before the call would have answered); the next run finishes the work from the committed
    cursor and git fsck is clean."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    with slow_model(isolated, 4.0):
        run = Running(isolated)
        run.wait_line(lambda line: line.startswith("dream: batch "), timeout=90)
        run.proc.send_signal(signal.SIGTERM)
        run.wait_line(lambda line: "SIGTERM received" in line)
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        run.proc.wait(timeout=30)
        assert time.monotonic() - sent < 2.0
        assert run.proc.returncode == 143
    assert _cursor(isolated.workspace) == BATCH
    with slow_model(isolated, 0.0):
        done = isolated.subprocess("dream", "run", "--batch-size", str(BATCH), "--quiet", timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cursor_after"] == ENTRIES
    fsck = subprocess.run(["git", "-C", str(isolated.workspace), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def _json_batch_one_ended(line: str) -> bool:
    event = json.loads(line)  # with --log-format json every stderr line is one JSON object
    return bool(event["event"] == "batch_ended" and event["cursor_from"] == 1)


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_progress_lines_arrive_while_the_run_goes(isolated: Cli, tmp_path: Path, log_format: str) -> None:
    """With a model taking a second per call, the line for batch 1 (range, outcome, tokens,
    seconds) is on stderr at least a second before the process ends, as a plain line or as a JSON
    object with --log-format json; --quiet leaves them out."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    wanted = _batch_one_ended if log_format == "plain" else _json_batch_one_ended
    with slow_model(isolated, 1.0):
        run = Running(isolated, "--log-format", log_format)
        arrived = run.wait_line(wanted)
        exit_code, report, ended = run.finish()
    assert exit_code == 0, run.seen
    assert ended - arrived >= 1.0
    line = next(line for line in run.seen if wanted(line))
    tokens = report["batches"][0]["usage"]["total_tokens"]
    if log_format == "plain":
        assert line.startswith(f"dream: batch 1..{BATCH} ({BATCH} entries): committed, {tokens} tokens, ")
        assert line.endswith(" s")
    else:
        event = json.loads(line)
        assert (event["cursor_to"], event["entries"], event["outcome"], event["tokens"]) == (
            BATCH,
            BATCH,
            "committed",
            tokens,
        )
        assert event["seconds"] >= 1.0

    other = build_workspace(tmp_path / "other", history=sample_entries(5))
    with slow_model(isolated, 0.0):
        quiet = isolated.subprocess("dream", "run", "--quiet", env={"DREAM_WORKSPACE": str(other)}, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "dream: batch" not in quiet.stderr


def test_a_model_call_that_does_not_answer_is_abandoned_soon_after_the_signal(isolated: Cli) -> None:
    """Behind a model taking 60 s per call, SIGTERM ends the run within the stop wait (2 s) and a
    few seconds of start-up, not after the call: the report says interrupted, the batch in flight
    is rolled back (no commit, no cursor), exit 143."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    with slow_model(isolated, 60.0) as server:
        run = Running(isolated)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "the run made no model call"
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        exit_code, report, ended = run.finish(timeout=30)
    assert exit_code == 143, run.seen
    assert ended - sent < 20.0  # the 2 s wait, then the report (a loaded machine is slow); the call: 60 s
    assert report["status"] == "interrupted"
    assert report["commits"] == []
    assert [b["outcome"] for b in report["batches"]] == ["interrupted"]
    assert not (isolated.workspace / "memory" / ".dream_cursor").exists() or _cursor(isolated.workspace) == 0
