"""`dream run`'s progress lines on stderr: one per batch as it ends, one per model retry, none
with --quiet; stdout stays the JSON report (issue 17). (That they arrive while the run goes, with
real time between: test_dream_signals.py.)"""

from __future__ import annotations

import json

from dream_helpers import Cli, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Fail, ScriptedLLMServer, from_chat_model


def test_a_retry_and_each_batch_get_a_line_on_stderr(isolated: Cli) -> None:
    """A model answering 503 once: stderr names the failed attempt, the wait and the reason, then
    one line per batch with its range, outcome, tokens and seconds; stdout is only the report."""
    build_workspace(isolated.workspace, history=sample_entries(4))
    with ScriptedLLMServer([Fail(503, "overloaded")], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        result = isolated.run("run", "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    lines = result.stderr.splitlines()
    retry = [line for line in lines if "retrying" in line]
    assert len(retry) == 1, lines
    assert retry[0].startswith("dream: model call attempt 1 of 3 failed, retrying in ")
    assert "overloaded" in retry[0] or "503" in retry[0]
    batches = [line for line in lines if line.startswith("dream: batch ")]
    expected = [
        f"dream: batch {b['cursor_from']}..{b['cursor_to']} ({b['entries']} entries): committed, "
        f"{b['usage']['total_tokens']} tokens, "
        for b in report["batches"]
    ]
    assert len(batches) == 2
    for line, start in zip(batches, expected, strict=True):
        assert line.startswith(start) and line.endswith(" s"), line


def test_quiet_leaves_the_progress_lines_out(isolated: Cli) -> None:
    """--quiet: no batch or retry line on stderr; the report on stdout is unchanged."""
    build_workspace(isolated.workspace, history=sample_entries(4))
    with ScriptedLLMServer([Fail(503, "overloaded")], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        result = isolated.run("run", "--batch-size", "2", "--quiet")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"
    assert "dream: batch" not in result.stderr
    assert "retrying" not in result.stderr


# An API key's shape (the secret guard recognises it): a server quoting it in an error body.
TOKEN = "sk-proj-" + "A1b2C3d4" * 6
LONG_REASON = f"overloaded ({TOKEN}): " + "the upstream pool is busy; " * 5


def _json_lines(stderr: str) -> list[dict[str, object]]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line: one JSON object, or this fails


def test_log_format_json_writes_one_redacted_json_object_per_stderr_line(isolated: Cli) -> None:
    """--log-format json: every stderr line parses as a JSON object with `ts` and `event`; a
    retry event carries attempt, attempts, wait and the reason (the token in the server's error
    redacted), one batch_ended event per batch carries its range, outcome, tokens and seconds
    as in the report, run_started and run_ended frame them; stdout is still only the report."""
    build_workspace(isolated.workspace, history=sample_entries(4))
    with ScriptedLLMServer([Fail(503, LONG_REASON)], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        result = isolated.run("run", "--batch-size", "2", "--log-format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    events = _json_lines(result.stderr)
    assert all(isinstance(e["ts"], str) and e["ts"].endswith("Z") for e in events)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and "run_ended" in kinds
    assert TOKEN not in result.stderr
    (retry,) = [e for e in events if e["event"] == "retry"]
    assert set(retry) == {"ts", "event", "attempt", "attempts", "wait", "reason"}
    assert (retry["attempt"], retry["attempts"]) == (1, 3)
    assert "the upstream pool is busy" in str(retry["reason"]) and "[REDACTED" in str(retry["reason"]).upper()
    batches = [e for e in events if e["event"] == "batch_ended"]
    assert [(b["cursor_from"], b["cursor_to"], b["outcome"], b["tokens"]) for b in batches] == [
        (b["cursor_from"], b["cursor_to"], b["outcome"], b["usage"]["total_tokens"]) for b in report["batches"]
    ]
    assert all(isinstance(b["seconds"], float) and b["entries"] == 2 for b in batches)
    assert "phase_started" not in kinds  # phases: --verbose only
    (ended,) = [e for e in events if e["event"] == "run_ended"]
    assert (ended["status"], ended["done"]) == ("ok", 2)


def test_run_started_names_its_batches_and_workspace(isolated: Cli) -> None:
    """--log-format json: `run_started` of `dream run` carries the number of batches it will run
    (pending entries / batch size, capped by --max-batches; 0 when there is nothing to do) and
    the workspace in `where`, never `"total": null` and `"where": ""`."""
    build_workspace(isolated.workspace, history=sample_entries(6))
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        first = isolated.run("run", "--batch-size", "2", "--max-batches", "2", "--log-format", "json")
        rest = isolated.run("run", "--batch-size", "2", "--log-format", "json")
        again = isolated.run("run", "--batch-size", "2", "--log-format", "json")
    for result in (first, rest, again):
        assert result.exit_code == 0, result.stderr
    started = [[e for e in _json_lines(r.stderr) if e["event"] == "run_started"] for r in (first, rest, again)]
    assert [[e["total"] for e in s] for s in started] == [[2], [1], [0]]
    assert all(s[0]["where"] == str(isolated.workspace) and s[0]["unit"] == "batch" for s in started)


def test_verbose_adds_the_phases_and_the_full_retry_reason(isolated: Cli) -> None:
    """The default retry line shortens a long reason; --verbose shows it in full (still redacted)
    and adds a line as each model phase of a batch starts and ends, with its calls, tool calls
    and seconds."""
    build_workspace(isolated.workspace, history=sample_entries(2))
    with ScriptedLLMServer([Fail(503, LONG_REASON)], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        plain = isolated.run("run", "--batch-size", "2")
    (short,) = [line for line in plain.stderr.splitlines() if "retrying" in line]
    assert short.endswith("…") and "busy" in short and len(short) < 260
    assert "dream: phase 1" not in plain.stderr

    other = build_workspace(isolated.workspace.parent / "other", history=sample_entries(2))
    with ScriptedLLMServer([Fail(503, LONG_REASON)], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        verbose = isolated.run("run", "--batch-size", "2", "--verbose", "-w", str(other))
    assert verbose.exit_code == 0, verbose.stderr
    lines = verbose.stderr.splitlines()
    (full,) = [line for line in lines if "retrying" in line]
    assert full.count("the upstream pool is busy") == 5 and TOKEN not in full
    assert "dream: phase 1 started" in lines and "dream: phase 2 started" in lines
    ended = [line for line in lines if line.startswith("dream: phase 2 ended: ")]
    assert len(ended) == 1 and "model call(s)" in ended[0] and "tool call(s)" in ended[0]
    assert lines.index("dream: phase 1 started") < lines.index("dream: phase 2 started")
    assert any(line.startswith("dream: batch 1..2 (2 entries): committed, ") for line in lines)


def test_quiet_wins_over_verbose_and_json(isolated: Cli) -> None:
    """--quiet with --verbose or --log-format json: still no progress on stderr."""
    build_workspace(isolated.workspace, history=sample_entries(2))
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server)
        result = isolated.run("run", "--quiet", "--verbose", "--log-format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"
    assert result.stderr == ""
