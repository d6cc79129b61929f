"""A byte order mark (EF BB BF) at the start of memory/history.jsonl, as an editor on Windows
saves it: the first entry is read like any other by every command (status, search, run,
compaction), the mark is no reason to rewrite the file, and only byte 0 is read so.

What a user would notice if this failed: `dream run` saying ok while the first entry never
reached memory (a line that says `{"timestamp": ..., "cursor": 1, ...}` behind the mark was
skipped as malformed), or `dream status` counting a malformed line in a file nobody broke.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dream_memory.core import layout
from dream_memory.core.history import parse_lines, split_physical_lines

BOM = b"\xef\xbb\xbf"
OFFLINE = ("--model", "offline")

# Line 1 as `dream append` writes it, and as another tool writes it (its keys in another order).
FIRST_LINES = {
    "dream's order": {"cursor": 1, "timestamp": "2026-04-03 09:00", "content": "- [durable] User keeps bees."},
    "another order": {"timestamp": "2026-04-03 09:00", "content": "- [durable] User keeps bees.", "cursor": 1},
}


def _workspace(tmp_path: Path, dream, first: dict[str, object], more: int = 2) -> Path:
    """An initialised workspace whose history.jsonl opens with a BOM, then ``first``, then
    ``more`` entries appended by `dream append`."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    history = ws / layout.HISTORY
    history.write_bytes(BOM + json.dumps(first).encode() + b"\n")
    (ws / layout.CURSOR).write_text("1\n")
    for i in range(2, more + 2):
        done = dream("append", "--workspace", str(ws), f"- [durable] User fact number {i}: likes item-{i}.")
        assert done.returncode == 0, done.stderr
    assert history.read_bytes().startswith(BOM + b"{")
    return ws


@pytest.mark.parametrize("case", sorted(FIRST_LINES))
def test_the_first_entry_behind_a_bom_is_read_by_status_search_and_run(tmp_path: Path, dream, case: str) -> None:
    """status counts the first entry as pending and no malformed line; search --history finds
    it; the run dreams it (batch from cursor 1, its fact in USER.md) with no warning; the file
    keeps its bytes (the mark is not rewritten away); an append after it gets the next cursor
    and the next run dreams that one."""
    ws = _workspace(tmp_path, dream, FIRST_LINES[case])
    history = ws / layout.HISTORY
    before = history.read_bytes()

    status = dream("status", "--json", "--workspace", str(ws))
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert (shown["pending"], shown["entries"], shown["malformed"]) == (3, 3, 0), shown
    assert "malformed" not in status.stderr

    found = dream("search", "bees", "--history", "--json", "--workspace", str(ws))
    assert found.returncode == 0, found.stderr
    lines = [line for result in json.loads(found.stdout)["results"] for line in result["lines"]]
    assert any(line["line"] == 1 and "cursor 1" in line["text"] for line in lines), lines

    run = dream("run", *OFFLINE, "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["status"] == "ok" and report["entries_processed"] == 3, report
    assert report["batches"][0]["cursor_from"] == 1 and report["cursor_after"] == 3
    assert "malformed" not in run.stderr and "warning" not in run.stderr, run.stderr
    assert "keeps bees" in (ws / "USER.md").read_text()
    assert history.read_bytes() == before

    assert dream("append", "--workspace", str(ws), "- [durable] User drives a tractor.").stdout.split() == ["4"]
    again = json.loads(dream("run", *OFFLINE, "--workspace", str(ws)).stdout)
    assert again["cursor_after"] == 4 and again["entries_processed"] == 1, again
    assert "tractor" in (ws / "USER.md").read_text()
    assert history.read_bytes().startswith(BOM + before[len(BOM) :])


def test_compaction_archives_the_first_entry_readably(tmp_path: Path, dream) -> None:
    """With maxHistoryEntries 10 and 12 entries, the run's compaction moves the two oldest, the
    one behind the mark among them, to memory/archive/ as a line that reads back (no mark in the
    middle of the archive); the rewritten history.jsonl holds the other ten and no mark."""
    ws = _workspace(tmp_path, dream, FIRST_LINES["dream's order"], more=11)
    (ws / layout.WORKSPACE_CONFIG).write_text(
        json.dumps({"agents": {"defaults": {"dream": {"maxHistoryEntries": 10}}}}), encoding="utf-8"
    )
    run = dream("run", *OFFLINE, "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["entries_processed"] == 12 and report["compaction"]["archived"] == 2, report

    archived = [
        json.loads(line)
        for path in sorted((ws / layout.ARCHIVE_DIR).glob("history-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert [e["cursor"] for e in archived] == [1, 2] and "keeps bees" in archived[0]["content"]
    kept = (ws / layout.HISTORY).read_bytes()
    assert not kept.startswith(BOM)
    assert [json.loads(line)["cursor"] for line in kept.decode().splitlines()] == list(range(3, 13))
    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (status["pending"], status["malformed"]) == (0, 0), status


def test_only_byte_zero_is_read_past_a_bom() -> None:
    """U+FEFF opening any other line is that line's text, not a mark: the line stays reported
    malformed (it is not JSON), as it always was; the first line's `raw` is the line without
    the mark, so a rewrite never carries the mark into the middle of a file."""
    text = '\ufeff{"cursor": 1, "content": "a"}\n\ufeff{"content": "b", "cursor": 2}\n'
    first, second = parse_lines(split_physical_lines(text))
    assert [e.cursor for e in first.entries] == [1] and first.problem is None
    assert first.raw == '{"cursor": 1, "content": "a"}'
    assert second.entries == () and second.problem is not None and second.problem.kind == "malformed"
