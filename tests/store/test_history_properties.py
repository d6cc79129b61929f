"""Property tests (hypothesis) of the history line parser and of cursor allocation.

What a user would notice if these failed: a history file that crashes `dream status`, an entry
that changes on its way through history.jsonl, or two entries sharing a cursor (one of them never
reaching Dream)."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import (
    MAX_CURSOR,
    HistoryEntry,
    max_cursor_bound,
    next_cursor,
    parse_cursor_text,
    parse_line,
    parse_lines,
    split_physical_lines,
)
from dream_memory.testing import FrozenClock

TRICKY = st.sampled_from(["\udcff", "\ud800", "\u2028", "\x85", "\n", "\r", "\x00", "{", "}", '"', "\\", "\ufeff", " "])
TEXT = st.text(alphabet=st.one_of(st.characters(exclude_categories=()), TRICKY))
CURSORS = st.integers(min_value=1, max_value=MAX_CURSOR)
ENTRIES = st.builds(
    HistoryEntry,
    cursor=CURSORS,
    timestamp=TEXT,
    content=TEXT,
    session_key=st.none() | TEXT,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
FOREIGN = st.dictionaries(st.sampled_from(["time", "user", "assistant", "type", "summary", "cursor"]), JSON_VALUES)


@settings(max_examples=200)
@given(st.one_of(TEXT, st.lists(st.one_of(TEXT, JSON_VALUES.map(json.dumps))).map("".join)))
def test_the_line_parser_never_raises(raw: str) -> None:
    """Whatever a line holds, reading it gives entries and at most one problem, never a crash."""
    parsed = parse_line(raw, 7)
    assert parsed.raw == raw
    if parsed.problem is not None:
        assert parsed.problem.line_no == 7
        assert parsed.problem.describe()


def test_pathological_lines_are_reported_not_raised() -> None:
    """Deep nesting and 5000-digit numbers make json raise other errors than JSONDecodeError."""
    for raw in ("[" * 100_000, '{"cursor": 1' + "0" * 5000 + ', "content": "x"}', "\x00\x00", "{" * 50 + "}" * 50):
        parsed = parse_line(raw, 1)
        assert parsed.entries == ()
        assert parsed.problem is not None and parsed.problem.kind == "malformed"


@settings(max_examples=300)
@given(ENTRIES)
def test_to_json_line_round_trips(entry: HistoryEntry) -> None:
    """An entry written as a line reads back equal: one physical line, valid UTF-8, any text."""
    line = entry.to_json_line()
    assert "\n" not in line and "\r" not in line
    line.encode("utf-8")  # lone surrogates would raise here
    assert split_physical_lines(line + "\n") == [line]
    parsed = parse_line(line, 1)
    assert parsed.entries == (entry,)
    assert parsed.problem is None
    assert json.loads(line)["cursor"] == entry.cursor


@settings(max_examples=150)
@given(
    st.lists(ENTRIES, min_size=1, max_size=5), st.lists(st.sampled_from(["", " ", "\t", "  "]), min_size=5, max_size=5)
)
def test_glued_objects_each_become_an_entry(entries: list[HistoryEntry], gaps: list[str]) -> None:
    """Several objects on one line (a writer that forgot the newline) are each read, in order,
    and the line is reported as repaired, never as lost."""
    raw = "".join(gap + e.to_json_line() for gap, e in zip(gaps, entries, strict=False))
    parsed = parse_line(raw, 3)
    assert list(parsed.entries) == entries
    if len(entries) > 1:
        assert parsed.problem is not None and parsed.problem.kind == "repaired"
    else:
        assert parsed.problem is None


@settings(max_examples=200)
@given(ENTRIES, st.data())
def test_a_torn_line_never_yields_a_wrong_entry(entry: HistoryEntry, data: st.DataObject) -> None:
    """A line cut short by a crash is malformed: it yields no entry rather than a damaged one."""
    line = entry.to_json_line()
    cut = data.draw(st.integers(min_value=1, max_value=len(line) - 1))
    parsed = parse_line(line[:cut], 1)
    assert parsed.entries == ()
    assert parsed.problem is not None and parsed.problem.kind == "malformed"


@given(
    st.none() | st.integers(0, MAX_CURSOR - 1),
    st.none() | st.integers(0, MAX_CURSOR - 1),
    st.lists(st.integers(0, MAX_CURSOR - 2)),
)
def test_next_cursor_is_above_every_input(counter: int | None, dream: int | None, seen: list[int]) -> None:
    """A new cursor is above the counter, Dream's cursor and every cursor seen."""
    new = next_cursor(counter, dream, seen)
    assert new >= 1
    assert all(new > value for value in [counter or 0, dream or 0, *seen])


# Lines of a history file: entries (one per line or glued), foreign objects, junk, torn lines.
LINES = st.lists(
    st.one_of(
        st.lists(ENTRIES, min_size=1, max_size=3).map(lambda es: "".join(e.to_json_line() for e in es)),
        FOREIGN.map(lambda o: json.dumps(o, ensure_ascii=False)),
        TEXT.filter(lambda t: "\n" not in t),
        ENTRIES.map(lambda e: e.to_json_line()[: len(e.to_json_line()) // 2]),
    ),
    max_size=8,
)


def test_the_fast_cursor_bound_reads_numbers_not_strings() -> None:
    """Leading zeros (never valid JSON, but seen in broken lines) and numbers too large to be a
    cursor do not fool the byte-level bound."""
    assert max_cursor_bound(b'{"cursor": 0000099}\n{"cursor": 100, "content": "x"}\n') == 100
    assert max_cursor_bound(b'{"cursor": 99999999999999999999, "content": "x"}\n{"cursor": 3}') == 3
    assert max_cursor_bound(b'{"cursor": 9223372036854775808}{"cursor": 9223372036854775807}') == MAX_CURSOR
    assert max_cursor_bound(b'"content": "{\\"cursor\\": 500}"') == 0


@settings(max_examples=150)
@given(LINES)
def test_the_fast_cursor_bound_covers_every_entry(lines: list[str]) -> None:
    """The byte-level bound used under the lock is never below a cursor the parser reads."""
    text = "\n".join(lines)
    data = text.encode("utf-8", errors="surrogatepass")
    cursors = [
        e.cursor for p in parse_lines(split_physical_lines(data.decode("utf-8", errors="replace"))) for e in p.entries
    ]
    assert max_cursor_bound(data) >= max(cursors, default=0)


COUNTER_STATES = st.one_of(
    st.just(None),  # missing
    st.sampled_from(["", "\n", "abc", "-4", "12.5", "٣", "9" * 30]),  # empty or corrupt
    st.integers(0, 10**6).map(str),  # stale or ahead, with or without newline
    st.integers(0, 10**6).map(lambda n: f"{n}\n"),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(1, 10**6), max_size=12),
    st.lists(TEXT.filter(lambda t: "\n" not in t), max_size=3),
    COUNTER_STATES,
    st.none() | st.integers(0, 10**6),
    st.integers(1, 4),
)
def test_appends_are_strictly_increasing_whatever_cursor_holds(
    file_cursors: list[int], junk: list[str], counter: str | None, dream: int | None, appends: int
) -> None:
    """Real files have gaps, unordered and duplicate cursors, junk lines, and a .cursor that is
    missing, stale, ahead or corrupt: each append still gets a cursor above all of them and
    above .dream_cursor, and a run of appends is strictly increasing."""
    assume(not junk or all(max_cursor_bound(j.encode("utf-8", "surrogatepass")) <= 10**6 for j in junk))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        memory = workspace / "memory"
        memory.mkdir()
        lines = [HistoryEntry(c, "2026-04-03 00:02", f"entry {c}").to_json_line() for c in file_cursors]
        lines += junk
        (memory / "history.jsonl").write_bytes("".join(f"{line}\n" for line in lines).encode("utf-8", "surrogatepass"))
        if counter is not None:
            (memory / ".cursor").write_text(counter, encoding="utf-8")
        if dream is not None:
            (memory / ".dream_cursor").write_text(str(dream), encoding="utf-8")
        valid_counter = parse_cursor_text(counter) if counter is not None else None
        floor = max([0, *file_cursors, valid_counter or 0, dream or 0])
        log = HistoryLog(workspace, clock=FrozenClock())
        got = [log.append(f"new {i}").cursor for i in range(appends)]
        assert got[0] > floor
        assert all(b > a for a, b in itertools.pairwise(got))
        assert log.read_counter() == got[-1]
        readable = [e.cursor for e in log.scan().entries]
        assert readable[-appends:] == got
