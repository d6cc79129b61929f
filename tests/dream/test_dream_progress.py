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
