"""Lines of history.jsonl Dream could not read as entries (not JSON, a foreign object) are named
in the run's JSON report, not only on stderr: a scheduler keeps the report and drops stderr, and
never learnt that a line an agent wrote was skipped (found by an independent hunt)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


def test_unreadable_history_lines_are_in_the_report_and_stay_in_the_file(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea."])
    history = ws / "memory" / "history.jsonl"
    with history.open("a", encoding="utf-8") as handle:
        handle.write('not json\n{"cursor": 6, "content": 123}\n')
    before = history.read_bytes()
    run = dream("run", "-w", str(ws), "--model", "offline", "--json")
    assert run.returncode == 0, run.stderr
    (note,) = [n for n in json.loads(run.stdout)["notes"] if "history.jsonl line" in n]
    assert note.startswith("2 history.jsonl line(s) not read as written (left in the file)"), note
    assert "line 2: malformed: not valid JSON" in note and "line 3: foreign: not a history entry" in note
    assert history.read_bytes() == before
