"""`dream consolidate` stopped by SIGTERM / SIGINT while it works through several sessions, and
its progress lines: real processes, real signals, a scripted model on 127.0.0.1 that takes a
while per call (issue 17)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from consolidate_helpers import Cli, echo_responder, history, markers, progress, session, turns, use_server

from dream_memory.testing.llm_server import Hang, ScriptedLLMServer

pytestmark = pytest.mark.slow  # real processes, a second of model time per session

SESSIONS = 4
DREAM = [sys.executable, "-c", "from dream_memory.entrypoints.cli import main; main()"]


@contextmanager
def slow_echo(cli: Cli, seconds: float) -> Iterator[ScriptedLLMServer]:
    """A model repeating what it was sent as bullets, each answer after ``seconds``."""
    with ScriptedLLMServer(responder=lambda request: Hang(seconds, then=echo_responder(request))) as server:
        use_server(cli, server)
        yield server


def _sessions(cli: Cli) -> list[str]:
    """Four sessions of six turns; with --force each has one slice (all but its last turn)."""
    keys = [f"chat:{n}" for n in range(SESSIONS)]
    for n, key in enumerate(keys):
        session(cli, key, turns(6, size=n))
    return keys


class Running:
    """A `dream consolidate` process whose stderr lines are read as they arrive."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*DREAM, "consolidate", "--all", "--force", *args],
            env={**os.environ, **cli.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_line(self, wanted: Callable[[str], bool], timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line on stderr within {timeout} s; saw {self.seen}") from None
            self.seen.append(line)
            if wanted(line):
                return line

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.proc.returncode, out


def _consolidated(line: str) -> bool:
    return line.startswith("dream consolidate: sessions/") and ": consolidated, " in line


def _fsck(cli: Cli) -> None:
    fsck = subprocess.run(["git", "-C", str(cli.workspace), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def _history_markers(cli: Cli) -> Counter[tuple[str, str]]:
    """(session key, marker) -> how many history entries hold it."""
    return Counter(
        (str(entry.get("session_key")), mk)
        for entry in history(cli.workspace)
        for mk in set(markers(str(entry["content"])))
    )


def _every_slice_once(cli: Cli, keys: list[str]) -> None:
    counts = _history_markers(cli)
    assert counts and max(counts.values()) == 1, counts  # no slice twice
    for key in keys:  # every turn but the live tail of every session
        for n in range(5):
            assert counts[(key, f"t{n}-user")] == 1, (key, n, counts)


def _json_consolidated(line: str) -> bool:
    event = json.loads(line)  # with --log-format json every stderr line is one JSON object
    return bool(event["event"] == "session_ended" and event["outcome"] == "consolidated")


@pytest.mark.parametrize(
    ("signum", "code", "log_format"), [(signal.SIGTERM, 143, "plain"), (signal.SIGINT, 130, "json")]
)
def test_a_signal_mid_consolidation_prints_an_interrupted_report_and_the_next_run_goes_on(
    isolated: Cli, signum: int, code: int, log_format: str
) -> None:
    """A signal once the first session's slice has landed: the run stops before the next session
    (the one in flight lands whole or not at all), stdout holds the JSON report with status
    `interrupted` listing each landed session and its history entries, the exit code is 128 + the
    signal, git fsck is clean, and the next run consolidates the rest: every session's markers in
    history exactly once. With --log-format json the signal's notice is a JSON line too."""
    assert isolated.run("init").exit_code == 0
    keys = _sessions(isolated)
    with slow_echo(isolated, 1.0):
        run = Running(isolated, "--log-format", log_format)
        run.wait_line(_consolidated if log_format == "plain" else _json_consolidated)
        run.proc.send_signal(signum)
        exit_code, out = run.finish()
        assert exit_code == code, run.seen
        report = json.loads(out)
        assert report["status"] == "interrupted", report
        assert report["stopped_by"] == signum
        landed = [s for s in report["sessions"] if s["outcome"] == "consolidated"]
        rest = [s for s in report["sessions"] if s["outcome"] != "consolidated"]
        assert 1 <= len(landed) < SESSIONS
        assert len(landed) + len(rest) == SESSIONS
        assert {s["outcome"] for s in rest} <= {"interrupted", "not_attempted"}
        on_disk = history(isolated.workspace)
        assert sorted(c for s in landed for c in s["entries"]) == [e["cursor"] for e in on_disk]
        assert any("stopped by" in n for n in report["notes"])
        assert any("received: stopping" in line for line in run.seen)
        if log_format == "json":
            events = [json.loads(line) for line in run.seen if line.strip()]
            assert any(e["event"] == "signal" and "received: stopping" in e["text"] for e in events)
        _fsck(isolated)

    with slow_echo(isolated, 0.0):
        again = isolated.process("consolidate", "--all", "--force", "--quiet")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert sorted(s["path"] for s in second["sessions"] if s["outcome"] == "consolidated") == sorted(
        s["path"] for s in rest
    )
    _every_slice_once(isolated, keys)
    _fsck(isolated)


def test_a_slice_whose_model_call_outlives_the_stop_wait_lands_not_at_all(isolated: Cli) -> None:
    """Behind a model taking 20 s per call, SIGTERM during the first session's call: within the
    2 s stop wait (plus start-up) the call is abandoned, the session is `interrupted` with no
    history entry and no progress recorded, exit 143; the next run consolidates every session."""
    assert isolated.run("init").exit_code == 0
    keys = _sessions(isolated)
    with slow_echo(isolated, 20.0) as server:
        run = Running(isolated)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "no model call was made"
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        exit_code, out = run.finish()
    assert exit_code == 143, run.seen
    assert time.monotonic() - sent < 15.0  # the 2 s wait and the report; the call: 20 s
    report = json.loads(out)
    assert report["status"] == "interrupted"
    first, *rest = report["sessions"]
    assert first["outcome"] == "interrupted" and first["entries"] == [] and first["messages_archived"] == 0
    assert {s["outcome"] for s in rest} == {"not_attempted"}
    assert history(isolated.workspace) == []
    assert first["path"] not in progress(isolated.workspace)["sessions"]  # its progress did not move
    with slow_echo(isolated, 0.0):
        again = isolated.process("consolidate", "--all", "--force", "--quiet")
    assert again.returncode == 0, again.stderr
    _every_slice_once(isolated, keys)
    _fsck(isolated)


def test_a_second_signal_stops_the_consolidation_at_once_and_the_next_run_recovers(isolated: Cli) -> None:
    """A second SIGTERM while a slow model call is in flight ends the process at once (exit 143);
    the next run consolidates every session, none twice."""
    assert isolated.run("init").exit_code == 0
    keys = _sessions(isolated)
    with slow_echo(isolated, 5.0):
        run = Running(isolated)
        run.wait_line(_consolidated, timeout=120)
        run.proc.send_signal(signal.SIGTERM)
        run.wait_line(lambda line: "SIGTERM received" in line)
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        run.proc.wait(timeout=30)
        assert time.monotonic() - sent < 2.0
        assert run.proc.returncode == 143
    with slow_echo(isolated, 0.0):
        again = isolated.process("consolidate", "--all", "--force", "--quiet")
    assert again.returncode == 0, again.stderr
    _every_slice_once(isolated, keys)
    _fsck(isolated)


def _json_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.strip()]


def test_progress_of_a_consolidation_in_each_log_format(isolated: Cli) -> None:
    """One plain line per session as it ends (path, outcome, messages, entries, tokens, seconds);
    --log-format json: every stderr line a JSON object, a session_ended event per session with the
    documented keys and run_started/run_ended around them; --quiet: no progress line."""
    assert isolated.run("init").exit_code == 0
    keys = _sessions(isolated)
    with slow_echo(isolated, 0.0):
        plain = isolated.process("consolidate", "--all", "--force")
        assert plain.returncode == 0, plain.stderr
        report = json.loads(plain.stdout)
        lines = [line for line in plain.stderr.splitlines() if line.startswith("dream consolidate: sessions/")]
        assert len(lines) == SESSIONS, plain.stderr
        for s, line in zip(report["sessions"], lines, strict=True):
            assert line.startswith(
                f"dream consolidate: {s['path']}: consolidated, {s['messages_archived']} message(s) -> "
                f"{len(s['entries'])} entr"
            ), line
            assert line.endswith(" s"), line

        for n, key in enumerate(keys):  # new turns: more to consolidate
            session(isolated, key, turns(12, size=n))
        logged = isolated.process("consolidate", "--all", "--force", "--log-format", "json")
        assert logged.returncode == 0, logged.stderr
        events = _json_lines(logged.stderr)
        assert events[0]["event"] == "run_started" and events[0]["total"] == SESSIONS
        assert [e["status"] for e in events if e["event"] == "run_ended"] == ["ok"]
        assert events[-1]["event"] == "summary"  # the closing summary, as one JSON object too
        ended = [e for e in events if e["event"] == "session_ended"]
        assert len(ended) == SESSIONS
        for e in ended:
            assert set(e) == {
                "ts",
                "event",
                "path",
                "outcome",
                "messages",
                "entries",
                "tokens",
                "seconds",
                "reason",
                "error",
            }
        assert {e["event"] for e in events} <= {"run_started", "session_ended", "run_ended", "summary", "message"}

        quiet = isolated.process("consolidate", "--all", "--force", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "dream consolidate: sessions/" not in quiet.stderr
