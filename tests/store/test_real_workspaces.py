"""Every history file and legacy HISTORY.md of the real-workspace corpus loads with the counts
verified by hand (plain json.loads line by line, grep and reading the files), or is reported as
foreign. The corpus is read from $DREAM_FIXTURES/real-workspaces and copied to a temp folder
only, so the originals are never written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import parse_legacy_history
from dream_memory.testing import FrozenClock

# workspace dir -> what its memory/history.jsonl holds (verified by hand, see each note)
HISTORY_FILES: dict[str, dict[str, object]] = {
    # 37 records on 37 lines, cursors 1..40 with 28-30 missing; session_key on the last 10 only;
    # no .cursor (deleted upstream), no .dream_cursor.
    "AlexEgorov85__workspaces_nanobot/workspace": {
        "lines": 37,
        "entries": 37,
        "first": 1,
        "last": 40,
        "problems": {},
        "counter": None,
        "dream": None,
        "pending": 37,
        "next": 41,
    },
    # 69 lines, 70 records: line 1 holds cursors 2477 (ISO timestamp, no session_key) and 2478
    # glued together; 2479..2546 follow one per line. .cursor 2546, .dream_cursor 2567 ahead of
    # it, so the next entry must be 2568 or Dream would never see it.
    "Trantrongtan2000__my_nanobot": {
        "lines": 69,
        "entries": 70,
        "first": 2477,
        "last": 2546,
        "problems": {1: "repaired"},
        "counter": 2546,
        "dream": 2567,
        "pending": 0,
        "next": 2568,
    },
    # Fork schema {type, session_key, summary, memory_update?, message_count, cursor, timestamp}:
    # no content key, so all 11 lines are foreign. Their own "cursor" keys (max 56) still
    # count for allocation, harmlessly: the first entry of ours is 57.
    "Greenhandyanjx__jd_agent": {
        "lines": 11,
        "entries": 0,
        "first": None,
        "last": None,
        "problems": dict.fromkeys(range(1, 12), "foreign"),
        "counter": None,
        "dream": None,
        "pending": 0,
        "next": 57,
    },
    # {time, user, assistant} chat log: 19 foreign lines.
    "demoyu123__minibot": {
        "lines": 19,
        "entries": 0,
        "first": None,
        "last": None,
        "problems": dict.fromkeys(range(1, 20), "foreign"),
        "counter": None,
        "dream": None,
        "pending": 0,
        "next": 1,
    },
    "Kiruno-lz__nanobot_configFile/workspace": {
        "lines": 6,
        "entries": 6,
        "first": 1,
        "last": 6,
        "problems": {},
        "counter": 6,
        "dream": 6,
        "pending": 0,
        "next": 7,
    },
    "MIRA-Intelligence__mira": {
        "lines": 2,
        "entries": 2,
        "first": 1,
        "last": 2,
        "problems": {},
        "counter": None,
        "dream": None,
        "pending": 2,
        "next": 3,
    },
    "Nostra-patria__patria": {
        "lines": 12,
        "entries": 12,
        "first": 1,
        "last": 12,
        "problems": {},
        "counter": 12,
        "dream": None,
        "pending": 12,
        "next": 13,
    },
    "Pepsisvt__NanoSchedule-agent/workspace": {
        "lines": 3,
        "entries": 3,
        "first": 1,
        "last": 3,
        "problems": {},
        "counter": 3,
        "dream": 2,
        "pending": 1,
        "next": 4,
    },
    "fambopenclaw-hash__ClawdyNanobot": {
        "lines": 4,
        "entries": 4,
        "first": 1,
        "last": 4,
        "problems": {},
        "counter": 4,
        "dream": 3,
        "pending": 1,
        "next": 5,
    },
}

# legacy file -> (entries, timestamps of the first and last entry)
LEGACY_FILES: dict[str, tuple[int, str, str]] = {
    # 4 [date] entries separated by single newlines.
    "Arsapol__agent-npa-guy/workspace/memory/HISTORY.md": (4, "2026-04-07 08:00", "2026-04-11 08:00"),
    "Eevoo__piclaw/memory/HISTORY.md": (2, "2026-03-02 01:36", "2026-03-02 01:49"),
    # 11 header-less paragraphs, each opening with a bare date (some with HH:MM:SS), out of order.
    "Greenhandyanjx__jd_agent/memory/HISTORY.md": (11, "2025-01-01 00:00", "2026-05-31 13:03"),
    "Kiruno-lz__nanobot_configFile/workspace/memory/HISTORY.md.bak": (6, "2026-02-14 01:40", "2026-03-15 19:34"),
    # 6 entries, 5 of them under the same [2026-04-19 15:19] header.
    "MIRA-Intelligence__mira/memory/HISTORY.md": (6, "2026-04-19 15:19", "2026-04-19 15:27"),
    # 63 bracket headers: 48 [date HH:MM], 12 same-day ranges, 1 cross-day range, 2 date-only;
    # plus 2 header-less paragraphs after a blank line, entries of their own as nanobot splits them.
    "tlin-taolin__nanobot_workspace/workspace/memory/HISTORY.md": (65, "2026-03-08 21:01", "2026-03-13 09:43"),
    "zhangyong04__stock_chatBI_nanobot/memory/HISTORY.md": (2, "2026-06-16 21:05", "2026-06-17 00:27"),
}


def _copy_memory(fixtures_root: Path, name: str, tmp_path: Path) -> Path:
    workspace = tmp_path / name.replace("/", "_")
    shutil.copytree(fixtures_root / name / "memory", workspace / "memory")
    return workspace


def test_the_tables_cover_every_history_file_in_the_corpus(fixtures_root: Path) -> None:
    """A history file added to the corpus fails here until its counts are verified by hand."""
    jsonl = {str(p.parent.parent.relative_to(fixtures_root)) for p in fixtures_root.rglob("history.jsonl")}
    legacy = {str(p.relative_to(fixtures_root)) for p in fixtures_root.rglob("HISTORY.md*")}
    assert jsonl == set(HISTORY_FILES)
    assert legacy == set(LEGACY_FILES)


@pytest.mark.parametrize("name", sorted(HISTORY_FILES))
def test_history_file_loads_with_the_verified_counts(fixtures_root: Path, tmp_path: Path, name: str) -> None:
    """Each real history.jsonl reads as it is: entries, gaps, glued lines repaired, foreign
    schemas reported line by line, and the next cursor above the file, .cursor and .dream_cursor."""
    expected = HISTORY_FILES[name]
    workspace = _copy_memory(fixtures_root, name, tmp_path)
    reported: list[str] = []
    log = HistoryLog(workspace, clock=FrozenClock(), on_problem=reported.append)
    scan = log.scan()
    entries = scan.entries
    assert len(scan.lines) == expected["lines"]
    assert len(entries) == expected["entries"]
    assert (entries[0].cursor if entries else None) == expected["first"]
    assert (entries[-1].cursor if entries else None) == expected["last"]
    problems: dict[int, str] = expected["problems"]  # type: ignore[assignment]
    assert {p.line_no: p.kind for p in scan.problems} == problems
    assert [r.split(":")[0] for r in reported] == [f"memory/history.jsonl line {n}" for n in sorted(problems)]
    assert log.read_counter() == expected["counter"]
    assert log.read_dream_cursor() == expected["dream"]
    dream = log.read_dream_cursor() or 0
    assert len(log.entries_after(dream)) == expected["pending"]
    before = (workspace / "memory" / "history.jsonl").read_bytes()
    entry = log.append("- appended after the real history")
    assert entry.cursor == expected["next"]
    after = (workspace / "memory" / "history.jsonl").read_bytes()
    assert after.startswith(before), "an append never rewrites what was there"
    assert log.scan().entries[-1] == entry


def test_alex_egorov_keeps_the_gap_and_mixed_session_keys(fixtures_root: Path, tmp_path: Path) -> None:
    """Cursors 28-30 are missing and only the last ten records have a session_key: both read as is."""
    workspace = _copy_memory(fixtures_root, "AlexEgorov85__workspaces_nanobot/workspace", tmp_path)
    entries = HistoryLog(workspace, clock=FrozenClock()).scan().entries
    cursors = [e.cursor for e in entries]
    assert cursors == [*range(1, 28), *range(31, 41)]
    assert [e.session_key is not None for e in entries] == [False] * 27 + [True] * 10
    assert max(len(e.content) for e in entries) == 2675


def test_trantrongtan_glued_line_yields_both_entries_and_stays_on_disk(fixtures_root: Path, tmp_path: Path) -> None:
    """The line holding two objects gives cursors 2477 (ISO timestamp) and 2478, and the file
    is left exactly as it was by reading and by compaction of the consumed entries around it."""
    workspace = _copy_memory(fixtures_root, "Trantrongtan2000__my_nanobot", tmp_path)
    log = HistoryLog(workspace, clock=FrozenClock())
    first, second = log.scan().entries[:2]
    assert (first.cursor, first.timestamp, first.session_key) == (2477, "2026-07-23T15:35:00", None)
    assert (second.cursor, second.timestamp) == (2478, "2026-07-23 15:53")
    glued = (workspace / "memory" / "history.jsonl").read_text(encoding="utf-8").split("\n")[0]
    result = log.compact(dream_cursor=2567, max_entries=10)
    assert result.archived == 60
    kept = (workspace / "memory" / "history.jsonl").read_text(encoding="utf-8").split("\n")
    archived = "".join(p.read_text(encoding="utf-8") for p in log.archive_files()).split("\n")
    assert glued in archived and glued not in kept  # a repaired line moves whole, unchanged
    assert len(log.scan().entries) == 10
    assert [e.cursor for e in log.entries_after(2476)] == list(range(2477, 2547))


@pytest.mark.parametrize("name", sorted(LEGACY_FILES))
def test_legacy_history_parses_with_the_verified_counts(fixtures_root: Path, name: str) -> None:
    """Every header variant of the real HISTORY.md files becomes dated entries, in file order."""
    count, first, last = LEGACY_FILES[name]
    entries = parse_legacy_history((fixtures_root / name).read_text(encoding="utf-8"))
    assert len(entries) == count
    assert (entries[0].timestamp, entries[-1].timestamp) == (first, last)
    assert all(e.content.strip() for e in entries)
    assert not any(line.startswith("-e") for e in entries for line in e.content.split("\n"))


def test_tlin_taolin_header_variants(fixtures_root: Path) -> None:
    """Ranges take their start, the cross-day range its first day, date-only headers midnight,
    and those headers stay in the text (as nanobot keeps them); the stray `-e ` line vanishes and
    the header-less paragraphs after a blank line (lines 28 and 90) are entries of their own,
    undated, as nanobot's migration splits them."""
    text = (fixtures_root / "tlin-taolin__nanobot_workspace/workspace/memory/HISTORY.md").read_text(encoding="utf-8")
    entries = parse_legacy_history(text)
    stamps = [e.timestamp for e in entries]
    assert stamps[0] == "2026-03-08 21:01"  # [2026-03-08 21:01-21:43]
    assert entries[0].content.startswith("[2026-03-08 21:01-21:43] User installed")
    assert stamps[10] == "2026-03-09 19:15"  # [2026-03-09 19:15-03-10 00:27]
    assert stamps[51:53] == ["2026-03-12 00:00", "2026-03-12 00:00"]  # [2026-03-12] twice
    assert [i for i, stamp in enumerate(stamps) if stamp is None] == [12, 43]
    assert entries[15].content.startswith("用户确认12只股票") and "-e" not in entries[15].content
    assert entries[16].content.startswith("每日复盘完成")
    assert entries[42].timestamp == "2026-03-12 01:33"
    assert entries[43].content.startswith("修复了 monitor_quick.py")  # line 90, no header of its own
    # a bullet list after a blank line is its own entry too (nanobot's split), kept whole
    assert entries[12].content.startswith("关键变更：\n- 关闭self-improving")
    assert entries[12].content.endswith("- 找到多模态RL相关Cubox材料")


def test_kiruno_legacy_file_parses_exactly_as_nanobot_migrated_it(fixtures_root: Path) -> None:
    """The corpus's migration pair: our parse of HISTORY.md.bak equals nanobot's history.jsonl."""
    base = fixtures_root / "Kiruno-lz__nanobot_configFile/workspace/memory"
    ours = parse_legacy_history((base / "HISTORY.md.bak").read_text(encoding="utf-8"))
    theirs = [json.loads(line) for line in (base / "history.jsonl").read_text(encoding="utf-8").split("\n") if line]
    assert [(e.timestamp, e.content) for e in ours] == [(o["timestamp"], o["content"]) for o in theirs]


# workspace dir -> (mode, first cursor, last cursor, .cursor, .dream_cursor) after migration
MIGRATIONS: dict[str, tuple[str, int, int, int, int | None]] = {
    # no history.jsonl (not collected), cursors 2388/2388: entries continue above them
    "Arsapol__agent-npa-guy/workspace": ("initial", 2389, 2392, 2392, 2392),
    "Eevoo__piclaw": ("initial", 1, 2, 2, 2),
    # history.jsonl holds only foreign lines: "empty" for our schema; they stay in the file
    "Greenhandyanjx__jd_agent": ("initial", 57, 67, 67, 67),
    # history.jsonl holds 2 entries: the legacy ones arrive as new, undreamt entries
    "MIRA-Intelligence__mira": ("append", 3, 8, 8, None),
    "tlin-taolin__nanobot_workspace/workspace": ("initial", 1, 65, 65, 65),
    "zhangyong04__stock_chatBI_nanobot": ("initial", 1, 2, 2, 2),
}


@pytest.mark.parametrize("name", sorted(MIGRATIONS))
def test_real_legacy_history_migrates(fixtures_root: Path, tmp_path: Path, name: str) -> None:
    """Migration of each real HISTORY.md: cursors per CONTRACT section 3, the old file renamed to
    HISTORY.md.bak, nothing of the previous history.jsonl lost, foreign lines still reported."""
    mode, first, last, counter, dream = MIGRATIONS[name]
    workspace = _copy_memory(fixtures_root, name, tmp_path)
    log = HistoryLog(workspace, clock=FrozenClock())
    before = log.scan()
    assert log.legacy_pending()
    result = log.migrate_legacy()
    assert result is not None
    assert (result.mode, result.first_cursor, result.last_cursor) == (mode, first, last)
    assert result.backup == "memory/HISTORY.md.bak"
    assert not (workspace / "memory/HISTORY.md").exists()
    assert (workspace / "memory/HISTORY.md.bak").is_file()
    assert not log.legacy_pending()
    assert (log.read_counter(), log.read_dream_cursor()) == (counter, dream)
    after = log.scan()
    assert [ln.raw for ln in after.lines[: len(before.lines)]] == [ln.raw for ln in before.lines]
    assert [e.cursor for e in after.entries[len(before.entries) :]] == list(range(first, last + 1))
    assert after.malformed == before.malformed
    assert log.migrate_legacy() is None  # once


def test_kiruno_already_migrated_backup_is_left_alone(fixtures_root: Path, tmp_path: Path) -> None:
    """A HISTORY.md.bak is the product of an earlier migration: it is never migrated again."""
    workspace = _copy_memory(fixtures_root, "Kiruno-lz__nanobot_configFile/workspace", tmp_path)
    log = HistoryLog(workspace, clock=FrozenClock())
    assert not log.legacy_pending()
    assert log.migrate_legacy() is None
    assert len(log.scan().entries) == 6


def test_status_of_real_workspaces_through_the_cli(fixtures_root: Path, tmp_path: Path, dream) -> None:
    """`dream status --json` on copies of the real workspaces: counts as verified above, foreign
    lines counted as malformed and named on stderr, a pending migration reported, nothing written."""
    expectations = {
        "Trantrongtan2000__my_nanobot": {"cursor": 2546, "dream_cursor": 2567, "pending": 0, "malformed": 0},
        "demoyu123__minibot": {"cursor": 0, "dream_cursor": 0, "pending": 0, "malformed": 19},
        "Greenhandyanjx__jd_agent": {"cursor": 0, "dream_cursor": 0, "pending": 0, "malformed": 11},
        "AlexEgorov85__workspaces_nanobot/workspace": {"cursor": 40, "dream_cursor": 0, "pending": 37, "malformed": 0},
    }
    for name, expected in expectations.items():
        workspace = _copy_memory(fixtures_root, name, tmp_path)
        snapshot = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
        proc = dream("status", "--json", "--workspace", str(workspace))
        assert proc.returncode == 0, proc.stderr
        status = json.loads(proc.stdout)
        assert {k: status[k] for k in expected} == expected, name
        assert status["pending_migration"] == (name == "Greenhandyanjx__jd_agent")
        if expected["malformed"]:
            assert "history.jsonl line 1: foreign" in proc.stderr
        assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == snapshot
