"""Lines that a killed rewrite of history.jsonl left only in ``memory/.history.replaced.<offset>``
(another writer appended them while it ran) are shown by ``dream status`` and ``dream doctor``,
through the CLI and the Python API alike, until the next writing command carries them. Before,
status said nothing: its pending count left them out, and nothing told the user they were there.
The kept file is laid out by hand here as a killed compaction leaves it (the killing itself is
test_review_replaced_history.py's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dream_memory import Workspace
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import build_workspace

LATE = '{"cursor": 41, "timestamp": "2026-04-05 10:00", "content": "- late line of the lockless writer"}\n'


def _killed_mid_drain(tmp_path: Path) -> tuple[Path, str]:
    """A workspace whose history.jsonl was replaced by a rewrite that was killed before it carried
    the late line another writer had appended to the old file; the old file's kept name."""
    history = [HistoryEntry(c, "2026-04-03 00:02", f"- fact {c}") for c in range(1, 41)]
    ws = build_workspace(tmp_path / "ws", history=history, dream_cursor=30, cursor=40)
    old = (ws / "memory/history.jsonl").read_bytes()
    name = f".history.replaced.{len(old)}"
    (ws / "memory" / name).write_bytes(old + LATE.encode())
    return ws, f"memory/{name}"


def test_status_names_the_lines_waiting_in_a_replaced_history_file(tmp_path: Path, dream) -> None:
    ws, kept = _killed_mid_drain(tmp_path)
    shown = dream("status", "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    (line,) = [line for line in shown.stdout.splitlines() if line.startswith("replaced")]
    assert f"1 line(s) (cursors 41) wait only in {kept}" in line
    assert "the next dream append, consolidate or run carries them" in line
    as_json = json.loads(dream("status", "--workspace", str(ws), "--json").stdout)
    assert as_json["replaced_history"] == [{"file": kept, "lines": 1, "cursors": [41]}]
    assert Workspace(ws).status().to_json() == as_json  # the Python API gives the same answer
    doctor = json.loads(dream("doctor", "--workspace", str(ws), "--json").stdout)
    (check,) = [c for c in doctor["checks"] if kept in c["summary"]]
    assert check["status"] == "warning" and "carries them" in check["fix"]
    assert (ws / kept).exists()  # status and doctor only read


def test_the_next_append_carries_them_and_status_is_quiet_again(tmp_path: Path, dream) -> None:
    ws, kept = _killed_mid_drain(tmp_path)
    appended = dream("append", "--workspace", str(ws), "- after the crash")
    assert appended.returncode == 0, appended.stderr
    assert "carried 1 line(s) (cursors 41)" in appended.stderr
    assert not (ws / kept).exists()
    after = json.loads(dream("status", "--workspace", str(ws), "--json").stdout)
    assert after["replaced_history"] == []
    assert after["cursor"] == 42
    assert "replaced" not in dream("status", "--workspace", str(ws)).stdout


def test_a_kept_name_with_nothing_left_to_carry_is_not_shown(tmp_path: Path, dream) -> None:
    """Killed after the drain (every late line already in history.jsonl), or before the rename
    (the name is history.jsonl itself): nothing waits, so status says nothing of it."""
    ws, kept = _killed_mid_drain(tmp_path)
    with (ws / "memory/history.jsonl").open("a", encoding="utf-8") as history:
        history.write(LATE)  # the drain carried it before the kill
    assert json.loads(dream("status", "--workspace", str(ws), "--json").stdout)["replaced_history"] == []
    (ws / kept).unlink()
    os.link(ws / "memory/history.jsonl", ws / kept)
    assert json.loads(dream("status", "--workspace", str(ws), "--json").stdout)["replaced_history"] == []
    assert (ws / kept).exists()
