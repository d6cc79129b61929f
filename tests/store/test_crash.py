"""SIGKILL at every durable step of an append, a compaction and a legacy migration (real
processes killing themselves through the fsutil fault hook), and at random moments of a busy
writer: the next ordinary command finishes the job, and history.jsonl plus memory/archive/ hold
every entry exactly once, with no orphaned HISTORY.md and no temp file left."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

# Runs `dream ARGS` (or a compaction with "compact DREAM_CURSOR MAX") and SIGKILLs itself just
# before the N-th write at SITE, so the crash lands exactly between two durable steps.
KILLER = """
import sys
from pathlib import Path
from dream_memory.adapters import fsutil
from dream_memory.testing.faults import at_write, kill_self
site, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
fsutil.set_fault_injector(at_write(kill_self, site, nth))
if args[0] == "compact":
    from dream_memory.adapters.history_log import HistoryLog
    from dream_memory.testing import FrozenClock
    HistoryLog(Path(args[1]), clock=FrozenClock()).compact(dream_cursor=int(args[2]), max_entries=int(args[3]))
else:
    sys.argv = ["dream", *args]
    from dream_memory.entrypoints.cli import main
    main()
print("NOT KILLED", file=sys.stderr)
"""


def _kill_at(site: str, nth: int, *args: str, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, site, str(nth), *args], capture_output=True, text=True, env=env
    )
    assert proc.returncode == -signal.SIGKILL, f"{site}#{nth} was never reached: {proc.stderr}"


def _all_entries(ws: Path) -> list[HistoryEntry]:
    log = HistoryLog(ws, clock=FrozenClock())
    scan = log.scan()
    assert scan.problems == [], [p.describe() for p in scan.problems]
    return log.archive_entries() + scan.entries


def _leftovers(ws: Path) -> list[str]:
    memory = ws / "memory"
    names = [p.relative_to(memory).as_posix() for p in memory.rglob("*") if p.name.endswith(".tmp")]
    names += [n for n in ("archive/.pending.json", ".migration.json", "HISTORY.md") if (memory / n).exists()]
    names += [p.name for p in memory.glob(".history.replaced*")]
    return names


@pytest.mark.parametrize(("site", "written"), [("history.append", False), ("cursor.write", True)])
def test_sigkill_during_append(tmp_path: Path, dream, clean_env: dict[str, str], site: str, written: bool) -> None:
    """Killed before its line is written the entry is simply absent; killed after it but before
    .cursor moved, the entry is there once and the next append still gets a fresh cursor."""
    ws = build_workspace(tmp_path / "ws", history=[f"- old {i}" for i in range(1, 6)], cursor=5)
    _kill_at(site, 1, "append", "- killed append", "--workspace", str(ws), env=clean_env)
    proc = dream("append", "- next append", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    entries = _all_entries(ws)
    contents = [e.content for e in entries]
    expected = [f"- old {i}" for i in range(1, 6)] + (["- killed append"] if written else []) + ["- next append"]
    assert contents == expected
    assert [e.cursor for e in entries] == list(range(1, len(expected) + 1))
    assert int(proc.stdout) == len(expected)
    assert _leftovers(ws) == []


COMPACTION_SITES = [
    ("archive.marker", 1),  # before the marker: nothing happened
    ("archive.append", 1),  # marker written, nothing archived
    ("archive.append", 2),  # the first month archived, the second not
    ("history.replaced", 1),  # both months archived, the file to replace not yet kept by name
    ("history.rewrite", 1),  # kept by name, history.jsonl not rewritten: duplicates on disk
    ("history.replaced", 2),  # rewritten and drained, the replaced file's name not yet removed
    ("archive.marker", 2),  # everything done but the marker's removal
]
# The drain's own points, with a writer appending to the replaced file: test_review_replaced_history.py


@pytest.mark.parametrize(("site", "nth"), COMPACTION_SITES)
def test_sigkill_during_compaction(tmp_path: Path, dream, clean_env: dict[str, str], site: str, nth: int) -> None:
    """Wherever compaction dies, the next command (here a plain `dream append`) completes or
    undoes it: each entry ends up exactly once in history.jsonl or the archive."""
    history = [HistoryEntry(c, f"2026-0{3 if c <= 20 else 4}-03 00:02", f"- fact {c}") for c in range(1, 41)]
    ws = build_workspace(tmp_path / "ws", history=history, dream_cursor=30, cursor=40)
    _kill_at(site, nth, "compact", str(ws), "30", "5", env=clean_env)
    proc = dream("append", "- after the crash", "--workspace", str(ws))
    assert (proc.returncode, proc.stdout) == (0, "41\n"), proc.stderr
    entries = _all_entries(ws)
    assert sorted(e.cursor for e in entries) == list(range(1, 42))
    assert sorted(e.content for e in entries) == sorted([*(f"- fact {c}" for c in range(1, 41)), "- after the crash"])
    assert _leftovers(ws) == []
    log = HistoryLog(ws, clock=FrozenClock())
    log.compact(dream_cursor=30, max_entries=5)  # and a later compaction still does its job
    assert [e.cursor for e in log.scan().entries] == list(range(31, 42))
    assert [e.cursor for e in log.archive_entries()] == list(range(1, 31))


LEGACY = (
    "[2026-03-01 10:00] first old entry\n\n[2026-03-02 11:00-12:00] second\n- with a bullet\n\n[2026-03-03] third\n"
)
MIGRATION_SITES = {
    "initial": [
        ("migration.marker", 1),
        ("history.rewrite", 1),
        ("cursor.write", 1),
        ("dream_cursor.write", 1),
        ("migration.rename", 1),
        ("migration.marker", 2),
    ],
    "append": [
        ("migration.marker", 1),
        ("history.rewrite", 1),
        ("cursor.write", 1),
        ("migration.rename", 1),
        ("migration.marker", 2),
    ],
}


@pytest.mark.parametrize(
    ("mode", "site", "nth"), [(mode, site, nth) for mode, sites in MIGRATION_SITES.items() for site, nth in sites]
)
def test_sigkill_during_migration(
    tmp_path: Path, dream, clean_env: dict[str, str], mode: str, site: str, nth: int
) -> None:
    """A migration killed at any step is finished by the next writing command: the three legacy
    entries are in history.jsonl once, HISTORY.md is renamed HISTORY.md.bak (one backup), the
    cursors are what an uninterrupted migration sets."""
    existing = [f"- existing {i}" for i in (1, 2)] if mode == "append" else []
    ws = build_workspace(tmp_path / "ws", history=existing)
    (ws / "memory/HISTORY.md").write_text(LEGACY, encoding="utf-8")
    _kill_at(site, nth, "append", "- killed", "--workspace", str(ws), env=clean_env)
    proc = dream("append", "- after the crash", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    entries = _all_entries(ws)
    # split and worded as nanobot's own migration has them: only a "[date HH:MM]" header leaves
    # the content, the other header forms only give the time
    legacy = ["first old entry", "[2026-03-02 11:00-12:00] second\n- with a bullet", "[2026-03-03] third"]
    assert [e.content for e in entries] == [*existing, *legacy, "- after the crash"]
    assert [e.cursor for e in entries] == list(range(1, len(entries) + 1))
    assert [e.timestamp for e in entries[len(existing) : -1]] == [
        "2026-03-01 10:00",
        "2026-03-02 11:00",
        "2026-03-03 00:00",
    ]
    log = HistoryLog(ws, clock=FrozenClock())
    last_legacy = len(existing) + 3
    assert log.read_dream_cursor() == (last_legacy if mode == "initial" else None)
    assert log.read_counter() == last_legacy + 1
    assert sorted(p.name for p in (ws / "memory").glob("HISTORY.md*")) == ["HISTORY.md.bak"]
    assert (ws / "memory/HISTORY.md.bak").read_text(encoding="utf-8") == LEGACY
    assert _leftovers(ws) == []


def test_agent_appending_to_history_md_between_crash_and_recovery(
    tmp_path: Path, dream, clean_env: dict[str, str]
) -> None:
    """Killed after history.jsonl took the legacy entries, then the agent appended to HISTORY.md
    before the next command: the migrated part becomes the backup, only the new tail is migrated
    (as new entries), nothing twice."""
    ws = build_workspace(tmp_path / "ws")
    (ws / "memory/HISTORY.md").write_text(LEGACY, encoding="utf-8")
    _kill_at("cursor.write", 1, "append", "- killed", "--workspace", str(ws), env=clean_env)
    with (ws / "memory/HISTORY.md").open("a", encoding="utf-8") as handle:
        handle.write("\n[2026-03-04 09:00] written by the agent after the crash\n")
    proc = dream("append", "- after", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    contents = [e.content for e in _all_entries(ws)]
    assert contents == [
        "first old entry",
        "[2026-03-02 11:00-12:00] second\n- with a bullet",
        "[2026-03-03] third",
        "written by the agent after the crash",
        "- after",
    ]
    assert sorted(p.name for p in (ws / "memory").glob("HISTORY.md*")) == ["HISTORY.md.bak", "HISTORY.md.bak.2"]
    assert (ws / "memory/HISTORY.md.bak").read_text(encoding="utf-8") == LEGACY
    assert HistoryLog(ws, clock=FrozenClock()).read_dream_cursor() == 3  # the tail is for Dream


BUSY = """
import sys
from pathlib import Path
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
ws, tag = Path(sys.argv[1]), sys.argv[2]
log = HistoryLog(ws, clock=FrozenClock())
i = 0
while True:
    i += 1
    print("START", f"{tag}-{i}", flush=True)
    cursor = log.append(f"{tag}-{i}").cursor
    print("DONE", f"{tag}-{i}", cursor, flush=True)
    if i % 7 == 0:
        log.compact(dream_cursor=max(cursor - 5, 0), max_entries=10)
"""


def _read_until_acknowledged(proc: subprocess.Popen[str], count: int, timeout_s: float = 60.0) -> list[str]:
    """The child's lines up to its ``count``-th acknowledged append (or its end, or the timeout)."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while sum(line.startswith("DONE") for line in lines) < count and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
    return lines


def test_sigkill_at_random_moments_of_a_busy_writer(tmp_path: Path) -> None:
    """A process appending and compacting nonstop is killed twelve times at random moments: every
    entry whose cursor was returned is kept, an entry being written when the kill came is there
    at most once, and no cursor is ever given twice."""
    ws = build_workspace(tmp_path / "ws")
    (ws / "memory/.dream_cursor").write_text("0\n", encoding="utf-8")
    rng = random.Random(20260403)
    acknowledged: dict[str, int] = {}
    in_flight: set[str] = set()
    for round_no in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", BUSY, str(ws), f"r{round_no}"], stdout=subprocess.PIPE, text=True
        )
        # Into the loop first (a few entries acknowledged, however slow the machine is to start an
        # interpreter), then a kill at a random moment of the loop.
        seen = _read_until_acknowledged(proc, 6)
        time.sleep(rng.random() * 0.3)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        started = []
        for line in seen + out.splitlines():
            parts = line.split()
            # A line the kill cut short: a bare "START" (its print never returned, so that entry's
            # append never began) or a "DONE" without its cursor (in flight, as if never printed).
            if parts[:1] == ["START"] and len(parts) == 2:
                started.append(parts[1])
            elif len(parts) == 3:
                acknowledged[parts[1]] = int(parts[2])
        in_flight |= {tag for tag in started if tag not in acknowledged}
        # Dream's cursor follows along, so compaction has consumed entries to move
        (ws / "memory/.dream_cursor").write_text(f"{max(acknowledged.values(), default=0)}\n", encoding="utf-8")
    log = HistoryLog(ws, clock=FrozenClock())
    log.append("- the next command")  # recovers whatever the last kill interrupted
    entries = _all_entries(ws)
    cursors = [e.cursor for e in entries]
    assert len(cursors) == len(set(cursors)), "a cursor was given twice"
    by_content = {e.content: e.cursor for e in entries}
    assert len(by_content) == len(entries), "an entry was written twice"
    assert all(by_content.get(tag) == cursor for tag, cursor in acknowledged.items()), "an acknowledged entry was lost"
    assert set(by_content) <= set(acknowledged) | in_flight | {"- the next command"}
    assert len(acknowledged) > 50
    assert _leftovers(ws) == []
