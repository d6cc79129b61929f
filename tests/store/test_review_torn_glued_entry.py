"""A torn line (a writer killed mid-line, a full disk) followed by the next append of a writer that
does not check for a final newline (nanobot's ``append_history``): the complete entry glued onto
the torn part is read as an entry, with the cursor it was written with, while the torn part is
reported as malformed as before and stays in the file as it is."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry, parse_line
from dream_memory.testing import FrozenClock, build_workspace

TORN = '{"cursor": 2, "timestamp": "2026-12-05 10:00", "content": "- [durable] torn hal'
GLUED = '{"cursor": 2, "timestamp": "2026-12-05 12:24", "content": "- [durable] User has a dog", "session_key": "t:1"}'
DOG = HistoryEntry(2, "2026-12-05 12:24", "- [durable] User has a dog", "t:1")


def test_the_entry_glued_after_a_torn_part_is_read_and_the_torn_part_reported() -> None:
    parsed = parse_line(TORN + GLUED, 2)
    assert parsed.entries == (DOG,)
    assert parsed.problem is not None and parsed.problem.kind == "malformed"
    assert parsed.problem.detail.startswith("not valid JSON (Expecting ',' delimiter, column 82)")
    assert "the complete entry glued after it (cursor 2) is read" in parsed.problem.detail


def test_entries_before_the_torn_part_are_kept_and_nothing_else_is_read_into_it() -> None:
    before = '{"cursor": 1, "content": "a"}'
    # The last `{"cursor":` is an object nested in the glued entry: the entry is the one around it.
    glued = '{"cursor": 3, "content": "b", "meta": {"cursor": 9}}'
    parsed = parse_line(before + '{"cursor": 2, "content": "to' + glued, 1)
    assert [e.cursor for e in parsed.entries] == [1, 3]
    assert parsed.problem is not None and parsed.problem.detail.startswith("1 entry read, then not valid JSON")
    # A torn line alone, or followed by junk, still yields nothing; escaped text is never an entry.
    assert parse_line(TORN, 1).entries == ()
    assert parse_line(TORN + '{"cursor": 3, "content": "x"} junk', 1).entries == ()
    assert parse_line('{"cursor": 2, "content": "say \\"{\\"cursor\\": 7, \\"content\\": \\"x\\"}', 1).entries == ()


def test_dream_gets_the_glued_entry_and_the_line_stays_as_it_is(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User likes one"], cursor=2, dream_cursor=1)
    history = ws / "memory/history.jsonl"
    with history.open("a", encoding="utf-8") as handle:
        handle.write(TORN + GLUED + "\n")
    before = history.read_bytes()
    problems: list[str] = []
    log = HistoryLog(ws, clock=FrozenClock(), on_problem=problems.append)
    assert log.pending(1, ()) == [DOG]
    assert log.scan().malformed == 1
    assert problems == [
        "memory/history.jsonl line 2: malformed: not valid JSON (Expecting ',' delimiter, column 82); "
        "the complete entry glued after it (cursor 2) is read"
    ]
    log.compact(dream_cursor=2, max_entries=0)  # a malformed line never moves, its entry with it
    assert history.read_bytes().endswith((TORN + GLUED + "\n").encode())
    assert history.read_bytes() != before  # the first line went to the archive
    assert log.append("- next").cursor == 3
