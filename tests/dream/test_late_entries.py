"""Entries that reach history.jsonl after Dream passed their cursor are dreamt, once: a line a
writer without our lock wrote late (under a cursor a run had passed meanwhile), and the second of
two entries sharing a cursor when a batch ended between them. Before, the cursor alone said they
were done: `dream status` counted them out, the next run reported `nothing_to_do`, and the facts
never reached memory (core/late_entries.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.core.late_entries import compaction_horizon, entry_key, late_entries, missed, still_late
from dream_memory.testing import FrozenClock, build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]

CAT = "- [durable] User's cat is called Miso."


def _line(cursor: int, content: str, session_key: str | None = None) -> str:
    return HistoryEntry(cursor, "2026-04-03 00:05", content, session_key).to_json_line() + "\n"


def _append(root: Path, *lines: str) -> None:
    with (root / "memory" / "history.jsonl").open("a", encoding="utf-8") as f:
        f.writelines(lines)


def _memory(root: Path) -> str:
    return (root / "USER.md").read_text(encoding="utf-8") + (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")


def _report(dream: Dream, root: Path, *args: str) -> dict[str, object]:
    proc = dream("run", "-w", str(root), "--model", "offline", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    return report


def _pending(dream: Dream, root: Path) -> int:
    proc = dream("status", "-w", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    return int(json.loads(proc.stdout)["pending"])


def test_a_line_written_late_under_a_cursor_dream_passed_is_dreamt_on_the_next_run(
    dream: Dream, tmp_path: Path
) -> None:
    root = build_workspace(tmp_path / "ws", history=["- [durable] User's name is Ada."])
    assert _report(dream, root)["cursor_after"] == 1
    _append(root, _line(2, "- [durable] User lives in Lyon."))
    assert _report(dream, root)["cursor_after"] == 2
    # A writer that read cursor 1 before the run above, and wrote only now (nanobot stopped
    # between its read and its write): cursor 2 again, after the line Dream dreamt.
    _append(root, _line(2, CAT, "telegram:42"))
    assert _pending(dream, root) == 1

    report = _report(dream, root)
    assert report["status"] == "ok"
    assert report["entries_processed"] == 1
    assert (report["cursor_before"], report["cursor_after"]) == (2, 2)
    assert any("not dreamt yet (2)" in note for note in report["notes"])  # type: ignore[union-attr]
    assert "Miso" in _memory(root)

    # Dreamt once: the state records it, with the cursor, in Dream's commit.
    assert _pending(dream, root) == 0
    assert _report(dream, root)["status"] == "nothing_to_do"


def test_the_second_of_two_entries_sharing_a_cursor_survives_a_batch_ending_between_them(
    dream: Dream, tmp_path: Path
) -> None:
    root = build_workspace(
        tmp_path / "ws",
        history=[
            HistoryEntry(1, "2026-04-03 00:01", "- [durable] User's name is Ada."),
            HistoryEntry(2, "2026-04-03 00:02", "- [durable] User lives in Lyon."),
            HistoryEntry(2, "2026-04-03 00:02", CAT, "telegram:42"),
            HistoryEntry(3, "2026-04-03 00:03", "- [durable] User prefers short answers."),
        ],
    )
    first = _report(dream, root, "--batch-size", "1", "--max-batches", "2")
    assert first["cursor_after"] == 2
    assert _pending(dream, root) == 2  # the cat and cursor 3, not only cursor 3

    second = _report(dream, root)
    assert second["entries_processed"] == 2
    assert "Miso" in _memory(root) and "short answers" in _memory(root)
    assert _report(dream, root)["status"] == "nothing_to_do"


def test_a_late_entry_in_a_batch_above_the_cursor_is_dreamt_once(dream: Dream, tmp_path: Path) -> None:
    """Two entries sharing a pending cursor are dreamt together; the second is late, so the
    state records it, and the next run does not dream it again."""
    root = build_workspace(
        tmp_path / "ws",
        history=[
            HistoryEntry(1, "2026-04-03 00:01", "- [durable] User's name is Ada."),
            HistoryEntry(1, "2026-04-03 00:01", CAT, "telegram:42"),
        ],
    )
    assert _report(dream, root)["entries_processed"] == 2
    assert "Miso" in _memory(root)
    assert _pending(dream, root) == 0
    assert _report(dream, root)["status"] == "nothing_to_do"


def test_compaction_keeps_a_late_entry_not_dreamt_and_the_lines_that_show_it_late(tmp_path: Path) -> None:
    lines = [HistoryEntry(c, "2026-04-03 00:01", f"- entry {c}") for c in range(1, 31)]
    late = HistoryEntry(20, "2026-04-03 00:09", CAT, "telegram:42")
    root = build_workspace(tmp_path / "ws", history=[*lines, late], dream_cursor=30)
    log = HistoryLog(root, clock=FrozenClock())

    log.compact(dream_cursor=30, max_entries=10)
    kept = log.scan().entries
    # Cursors 1..19 moved; 20..30 and the late 20 stayed, so the late one is still seen as late.
    assert [e.cursor for e in kept] == [*range(20, 31), 20]
    assert missed(kept, 30, ()) == [late]

    # Once dreamt, the oldest lines move again (20 and 21, to leave 10), whatever shows it late.
    log.compact(dream_cursor=30, max_entries=10, dreamt_late=(entry_key(late),))
    assert [e.cursor for e in log.scan().entries] == [*range(22, 31), 20]


def test_late_entries_in_file_order() -> None:
    def entry(cursor: int, text: str = "x") -> HistoryEntry:
        return HistoryEntry(cursor, "2026-04-03 00:01", text)

    entries = [entry(1), entry(3), entry(2), entry(3, "y"), entry(4), entry(1, "z")]
    assert late_entries(entries) == [entry(2), entry(3, "y"), entry(1, "z")]
    assert missed(entries, 2, {entry_key(entry(2))}) == [entry(1, "z")]
    assert compaction_horizon(entries, 4, ()) == 0  # the late cursor 1 keeps everything
    assert compaction_horizon(entries, 4, {entry_key(e) for e in late_entries(entries)}) == 4
    assert still_late(["gone", "a"], {"a", "b"}, ["b"]) == ("a", "b")
