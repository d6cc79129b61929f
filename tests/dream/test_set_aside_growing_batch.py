"""A batch failing on its content is set aside at its third failing run even when its end moves
between runs (docs/reliability.md, promise 5): the agent appends between scheduled runs, and a
default batch takes every pending entry, so the same failing front arrives with a new tail each
time; --batch-size changes the end too. Only the range that failed all three times is set aside;
entries that joined later stay pending and are dreamt by the next run.

Real model server on 127.0.0.1 answering through the offline engine, except for any request
holding one entry, which it refuses the way a real model did ("I cannot help with that.").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dream_helpers import Cli, git, make_workspace, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, Step, from_chat_model

POISON = "- [durable] The user's launch codes are in the blue binder."
FACTS = sample_entries(5)


def refusing_the_poison() -> ScriptedLLMServer:
    offline = from_chat_model(OfflineModel())

    def respond(request: dict[str, Any]) -> Step:
        if POISON in json.dumps(request.get("messages", []), ensure_ascii=False):
            return Reply("I cannot help with that.")
        return offline(request)

    return ScriptedLLMServer(responder=respond)


def run(cli: Cli, *args: str) -> tuple[int, dict[str, Any], list[str]]:
    """One `dream run --json`: exit code, report, and the notes of its batches."""
    code, report = cli.run_json("run", "--json", *args)
    return code, report, [note for batch in report["batches"] for note in batch["notes"]]


def ranges(report: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(b["cursor_from"], b["cursor_to"], b["outcome"]) for b in report["batches"]]


def pending(cli: Cli) -> int:
    code, status = cli.run_json("status", "--json")
    assert code == 0, status
    return int(status["pending"])


def memory_text(workspace: Path) -> str:
    return "".join(p.read_text() for p in sorted((workspace / "memory").glob("*.md"))) + "".join(
        p.read_text() for p in sorted(workspace.glob("*.md"))
    )


def test_a_batch_growing_between_runs_is_set_aside_at_its_third_failure(isolated: Cli) -> None:
    """Three runs, an entry appended after each failing one: batches 1..3, 1..4, 1..5 all fail on
    the entry at their front; the third run sets aside 1..3 (what failed three times) and leaves
    4..5 pending, and the next run dreams them into memory."""
    with refusing_the_poison() as server:
        use_server(isolated, server)
        make_workspace(isolated, [POISON, *FACTS[:2]])
        for attempt, appended in ((1, FACTS[2]), (2, FACTS[3])):
            code, report, notes = run(isolated)
            assert code == 1 and report["status"] == "failed", report
            assert ranges(report) == [(1, 2 + attempt, "failed")]
            assert any(f"content failure {attempt} of 3" in n for n in notes), notes
            assert "I cannot help with that." in report["batches"][0]["error"]
            assert isolated.run("append", appended).exit_code == 0

        result = isolated.run("run", "--json")
        code, report = result.exit_code, json.loads(result.stdout)
        notes = [note for batch in report["batches"] for note in batch["notes"]]
        assert code == 0 and report["status"] == "set_aside", report
        # The batch's record says what was set aside and what stays pending, as set_aside,
        # cursor_after and entries_processed do: a scheduler reading batches[] alone took 1..5.
        assert ranges(report) == [(1, 3, "set_aside")]
        assert report["batches"][0]["entries"] == 3
        assert report["batches"][0]["left_pending"] == {"cursor_from": 4, "cursor_to": 5, "entries": 2}
        assert [(s["cursor_from"], s["cursor_to"]) for s in report["set_aside"]] == [(1, 3)]
        assert "failed 3 runs in a row" in report["set_aside"][0]["reason"]
        assert report["cursor_after"] == 3 and report["entries_processed"] == 3
        assert any("4..5" in n and "pending" in n for n in notes), notes
        # The text the run prints says the same: never batch 1..5 set aside.
        assert "dream: batch 1..3 (3 entries): set_aside" in result.stderr, result.stderr
        assert "batch 1..5 (5 entries)" not in result.stderr and "set aside 1..5" not in result.stderr
        assert "set aside 1..3: failed 3 runs" in result.stderr and "left pending 4..5" in result.stderr, result.stderr
        assert (
            git(isolated.workspace, "log", "-1", "--format=%s").strip() == "dream: set aside 1..3 after 3 failed runs"
        )
        assert "Dream-Range: 1..3" in git(isolated.workspace, "log", "-1", "--format=%B")
        assert pending(isolated) == 2

        code, report, _ = run(isolated)
        assert code == 0 and report["status"] == "ok", report
        assert ranges(report) == [(4, 5, "committed")]
        assert report["cursor_after"] == 5 and pending(isolated) == 0
        kept = memory_text(isolated.workspace)
        assert "setting 3" in kept and "setting 4" in kept and "launch codes" not in kept
        # Every entry is still in history: set aside is never deleted.
        assert len((isolated.workspace / "memory" / "history.jsonl").read_text().splitlines()) == 5


def test_a_batch_size_changed_between_runs_still_counts_and_sets_aside_only_what_failed_each_time(
    isolated: Cli,
) -> None:
    """--batch-size 3, then 2, then the default: batches 1..3, 1..2, 1..5 fail on their front.
    The third sets aside 1..2, the range every one of the three runs failed; 3..5 stay pending."""
    with refusing_the_poison() as server:
        use_server(isolated, server)
        make_workspace(isolated, [POISON, *FACTS[:4]])
        for attempt, size in ((1, "3"), (2, "2")):
            code, report, notes = run(isolated, "--batch-size", size)
            assert code == 1 and ranges(report) == [(1, int(size), "failed")], report
            assert any(f"content failure {attempt} of 3" in n for n in notes), notes

        code, report, notes = run(isolated)
        assert code == 0 and report["status"] == "set_aside", report
        assert ranges(report) == [(1, 2, "set_aside")]
        assert report["batches"][0]["left_pending"] == {"cursor_from": 3, "cursor_to": 5, "entries": 3}
        assert [(s["cursor_from"], s["cursor_to"]) for s in report["set_aside"]] == [(1, 2)]
        assert any("3..5" in n and "pending" in n for n in notes), notes
        assert pending(isolated) == 3

        code, report, _ = run(isolated)
        assert code == 0 and ranges(report) == [(3, 5, "committed")], report
        kept = memory_text(isolated.workspace)
        assert all(f"setting {i}" in kept for i in (2, 3, 4)) and "launch codes" not in kept


def test_a_set_aside_whose_commit_is_refused_is_not_reported_as_set_aside(isolated: Cli) -> None:
    """The third failure's set-aside commit fails before HEAD moves (a full disk at the ref): the
    run fails, the cursor stays, the batch is reported failed and nothing is listed as set aside
    (it listed 1..2 under set_aside while nothing was); the next run sets the range aside."""
    from dream_memory.testing.faults import at_write, disk_full, fault_hook

    with refusing_the_poison() as server:
        use_server(isolated, server)
        make_workspace(isolated, [POISON, FACTS[0]])
        for _ in range(2):
            assert run(isolated)[0] == 1
        with fault_hook(at_write(disk_full, "git.lock.ref")):
            code, report, _ = run(isolated)
        assert code != 0 and report["status"] == "failed", report
        assert report["set_aside"] == [] and report["cursor_after"] == 0, report
        assert [b["outcome"] for b in report["batches"]] == ["failed"], report["batches"]
        code, report, _ = run(isolated)
        assert [(s["cursor_from"], s["cursor_to"]) for s in report["set_aside"]] == [(1, 2)], report
