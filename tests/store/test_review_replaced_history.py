"""A rewrite of history.jsonl killed while it drains the replaced file (a compaction's, a purge's):
a writer that takes no lock (as nanobot's append) opened the old file just before the rename and
appends to it after; a SIGKILL (an OOM kill, a pod eviction) before its line is carried over must
not take the line with it. The old file keeps a name until the drain is over, and the next
writing command carries what is missing from there, once (real processes, the fsutil fault hook)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace

pytestmark = pytest.mark.slow  # real processes end to end

# Appends LINE to history.jsonl through a descriptor opened before the rewrite's rename (as
# nanobot's `open(..., "a")` descheduled between its open and its write), after the rename.
WRITER = """
import os, sys, time
path, flag, line = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path, "a", encoding="utf-8") as handle:
    inode = os.fstat(handle.fileno()).st_ino
    open(flag, "w").close()
    deadline = time.monotonic() + 60
    while os.stat(path).st_ino == inode and time.monotonic() < deadline:
        time.sleep(0.001)
    handle.write(line + "\\n")
open(flag + ".done", "w").close()
"""

# Runs a compaction ("compact") or a purge of SECRET ("purge") that starts WRITER right before its
# rename, and SIGKILLs itself just before the N-th write at SITE ("none": never).
KILLER = """
import subprocess, sys, time
from pathlib import Path
from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
from dream_memory.testing.faults import at_write, kill_self
site, nth, op, ws, writer, line = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5], sys.argv[6]
flag = ws.parent / "writer-open"
kill = at_write(kill_self, site, nth)

def hook(name, path):
    if name == "history.rewrite" and not flag.exists():
        subprocess.Popen([sys.executable, "-c", writer, str(ws / "memory/history.jsonl"), str(flag), line])
        while not flag.exists():
            time.sleep(0.001)
    kill(name, path)

fsutil.set_fault_injector(hook)
log = HistoryLog(ws, clock=FrozenClock())
if op == "compact":
    log.compact(dream_cursor=30, max_entries=5)
else:
    from dream_memory.adapters.history_log.purge import purge_history
    from dream_memory.core.forget import Target, purge_jsonl
    purge_history(log, lambda text: purge_jsonl(text, Target("value", "SECRET")), dry_run=False)
"""

LATE = '{"cursor": 41, "timestamp": "2026-04-05 10:00", "content": "- late line of the lockless writer"}'


def _run(ws: Path, op: str, site: str, nth: int, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, site, str(nth), op, str(ws), WRITER, LATE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    expected = 0 if site == "none" else -signal.SIGKILL
    assert proc.returncode == expected, f"{site}#{nth}: {proc.returncode} {proc.stderr}"
    done = ws.parent / "writer-open.done"
    deadline = time.monotonic() + 60
    while not done.exists():
        assert time.monotonic() < deadline, "the lockless writer never wrote its line"
        time.sleep(0.01)


def _workspace(tmp_path: Path, secret: bool = False) -> Path:
    history = [
        HistoryEntry(c, f"2026-0{3 if c <= 20 else 4}-03 00:02", f"- fact {c}{' SECRET' if secret and c == 35 else ''}")
        for c in range(1, 41)
    ]
    return build_workspace(tmp_path / "ws", history=history, dream_cursor=30, cursor=40)


def _kept_names(ws: Path) -> list[str]:
    return sorted(name for name in os.listdir(ws / "memory") if name.startswith(".history.replaced"))


DRAIN_POINTS = [
    ("history.carry", 1),  # the writer's line only in the replaced file
    ("history.replaced", 2),  # carried, the replaced file's name not yet removed
    ("archive.marker", 2),  # all done but the compaction's marker
    ("none", 0),  # not killed
]


@pytest.mark.parametrize(("site", "nth"), DRAIN_POINTS)
def test_a_compaction_killed_while_it_drains_loses_no_line_of_a_lockless_writer(
    tmp_path: Path, clean_env: dict[str, str], site: str, nth: int
) -> None:
    """Killed before the line was carried, the next command carries it and says so; killed after,
    nothing is carried twice. Every entry ends up exactly once in history.jsonl or the archive,
    and no name of the replaced file is left."""
    ws = _workspace(tmp_path)
    _run(ws, "compact", site, nth, clean_env)
    if site == "history.carry":
        assert len(_kept_names(ws)) == 1  # the line is on disk, under a name
    notes: list[str] = []
    log = HistoryLog(ws, clock=FrozenClock(), on_problem=notes.append)
    after = log.append("- after the crash")
    assert after.cursor == 42
    carried = [n for n in notes if "carried" in n]
    if site == "history.carry":
        assert len(carried) == 1 and "cursors 41" in carried[0] and ".history.replaced." in carried[0], notes
    else:
        assert carried == [], notes
    scan = log.scan()
    assert scan.problems == []
    entries = log.archive_entries() + scan.entries
    assert sorted(e.cursor for e in entries) == list(range(1, 43))
    assert [e.content for e in entries].count("- late line of the lockless writer") == 1
    assert _kept_names(ws) == []
    assert not (ws / "memory/archive/.pending.json").exists()
    log.compact(dream_cursor=41, max_entries=5)  # and the next compaction still does its job
    assert sorted(e.cursor for e in log.archive_entries() + log.scan().entries) == list(range(1, 43))


def test_a_purge_killed_while_it_drains_brings_back_neither_the_value_nor_loses_the_line(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Only what lies past the point the rewrite copied is carried from the replaced file: the
    purged line before it (still holding the value there) stays out, the late line comes in."""
    ws = _workspace(tmp_path, secret=True)
    _run(ws, "purge", "history.carry", 1, clean_env)
    log = HistoryLog(ws, clock=FrozenClock())
    log.append("- after the crash")
    text = (ws / "memory/history.jsonl").read_text(encoding="utf-8")
    assert "SECRET" not in text
    assert text.count("- late line of the lockless writer") == 1
    assert [e.cursor for e in log.scan().entries] == list(range(1, 43))
    assert _kept_names(ws) == []


def test_the_dream_run_that_carries_the_late_line_says_so_in_its_report(
    tmp_path: Path, clean_env: dict[str, str], dream
) -> None:
    """Killed before the line was carried, the next `dream run` carries it, dreams it, and its
    JSON report says so (a scheduled run's stderr is often read by nobody)."""
    ws = _workspace(tmp_path)
    _run(ws, "compact", "history.carry", 1, clean_env)
    (kept,) = _kept_names(ws)
    run = dream("run", "--workspace", str(ws), "--model", "offline", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    (note,) = [n for n in report["notes"] if n.startswith("carried ")]
    assert "cursors 41" in note and f"memory/{kept}" in note
    assert report["cursor_after"] == 41
    assert _kept_names(ws) == []
