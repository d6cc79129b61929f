"""Many writers at once, as real processes on real files: nothing lost, no cursor twice."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock, build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

WRITERS = 8
PER_WRITER = 500

WRITER = """
import json, sys
from pathlib import Path
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
workspace, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
log = HistoryLog(workspace, clock=FrozenClock(), lock_timeout=120)
cursors = [log.append(f"{name} entry {i}", session_key=name).cursor for i in range(count)]
print(json.dumps(cursors))
"""

# Plays Dream's part: moves .dream_cursor up behind the writers (so entries are consumable) and
# compacts to a small limit, over and over, until told to stop.
COMPACTOR = """
import json, sys, time
from pathlib import Path
from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
workspace, stop = Path(sys.argv[1]), Path(sys.argv[2])
log = HistoryLog(workspace, clock=FrozenClock(), lock_timeout=120)
runs = archived = 0
while not stop.exists():
    top = log.scan(report=False).max_cursor
    if top > 20:
        fsutil.atomic_write(workspace / "memory/.dream_cursor", f"{top - 20}\\n")
    result = log.compact(dream_cursor=max(top - 20, 0), max_entries=40)
    runs += 1
    archived += result.archived
    time.sleep(0.02)
print(json.dumps({"runs": runs, "archived": archived}))
"""


def test_eight_writers_and_a_compactor_lose_nothing_and_share_no_cursor(tmp_path: Path) -> None:
    """8 processes append 500 entries each while another process compacts in a loop: all 4,000
    entries are there once (history.jsonl and memory/archive/ together), every cursor is
    distinct, each writer saw its own cursors strictly increase, and each cursor it was given
    holds its own text."""
    workspace = build_workspace(tmp_path / "ws")
    stop = tmp_path / "stop"
    compactor = subprocess.Popen(
        [sys.executable, "-c", COMPACTOR, str(workspace), str(stop)], stdout=subprocess.PIPE, text=True
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(workspace), f"w{n}", str(PER_WRITER)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    given: dict[str, list[int]] = {}
    deadline = time.monotonic() + 170
    for n, proc in enumerate(writers):
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert proc.returncode == 0, err
        given[f"w{n}"] = json.loads(out)
    stop.touch()
    compaction = json.loads(compactor.communicate(timeout=60)[0])

    log = HistoryLog(workspace, clock=FrozenClock())
    scan = log.scan()
    assert scan.problems == []
    archived = log.archive_entries()
    everything = archived + scan.entries
    cursors = [e.cursor for e in everything]
    assert len(everything) == WRITERS * PER_WRITER
    assert len(set(cursors)) == len(cursors), "a cursor was given twice"
    assert sorted(e.content for e in everything) == sorted(
        f"w{n} entry {i}" for n in range(WRITERS) for i in range(PER_WRITER)
    )
    by_cursor = {e.cursor: e for e in everything}
    for name, mine in given.items():
        assert all(b > a for a, b in itertools.pairwise(mine)), name
        assert [by_cursor[c].content for c in mine] == [f"{name} entry {i}" for i in range(PER_WRITER)]
    # compaction really ran against the writers, and the file is back under its limit
    assert compaction["archived"] > 1000, compaction
    # Each run waits its turn among nine processes polling the lock; the writers' appends are
    # quicker since the lock is a plain flock, so fewer runs fit in their time (7-18 seen).
    assert compaction["runs"] >= 4, compaction
    assert all(e.cursor <= (log.read_dream_cursor() or 0) for e in archived)
    assert log.read_counter() == max(cursors)
    assert not (workspace / "memory/archive/.pending.json").exists()
    assert sorted(p.name for p in (workspace / "memory").iterdir() if p.name.endswith(".tmp")) == []


HOLDING_WRITER = r"""
import json, sys, time
with open(sys.argv[1], "a", buffering=1) as f:
    print("open", flush=True)
    for i in range(25):
        f.write(json.dumps({"cursor": 1000 + i, "timestamp": "2026-12-01 10:00", "content": f"held-writer fact {i}"}) + "\n")
        time.sleep(0.1)
"""


def test_a_writer_that_keeps_history_open_loses_nothing_to_a_compaction(tmp_path: Path, dream: Dream) -> None:
    """An agent that opens history.jsonl once and keeps appending: a compaction would replace the
    file under it, and what it wrote afterwards would land in the replaced file that nobody reads.
    The run leaves the file alone this time and says so; the next run, after the writer closed
    it, compacts. Every line the writer wrote is kept."""
    ws = build_workspace(tmp_path / "ws", history=[f"fact {i} about otters" for i in range(1, 16)])
    (ws / "dream.json").write_text('{"agents": {"defaults": {"dream": {"maxHistoryEntries": 10}}}}')
    history = ws / "memory" / "history.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", HOLDING_WRITER, str(history)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "open\n"
    ran = dream("run", "-w", str(ws), "--model", "offline", "--json")
    assert writer.wait(timeout=60) == 0
    report = json.loads(ran.stdout)
    assert ran.returncode == 0, ran.stderr
    assert any("compaction skipped" in note for note in report["notes"]), report["notes"]
    again = json.loads(dream("run", "-w", str(ws), "--model", "offline", "--json").stdout)
    assert again["compaction"] is not None and again["compaction"]["archived"] > 0
    kept = b"".join(p.read_bytes() for p in [history, *sorted((ws / "memory" / "archive").glob("*.jsonl"))])
    assert all(f'held-writer fact {i}"'.encode() in kept for i in range(25))


PROBING = r"""
import os, sys, time
from dream_memory.adapters.history_log.writers import writers_gone
fd = os.open(sys.argv[1], os.O_RDONLY)
end = time.monotonic() + 0.5
while time.monotonic() < end:
    writers_gone(fd, wait=0)
print("alive", flush=True)
"""

OPENING = r"""
import sys, time
end = time.monotonic() + 0.8
while time.monotonic() < end:
    with open(sys.argv[1], "a") as f:
        f.write("{}\n")
"""


def test_asking_whether_writers_hold_history_open_never_kills_the_asker(tmp_path: Path) -> None:
    """The question is a kernel lease taken and given back at once; a writer opening the file in
    between breaks it, and the kernel signals the asker (SIGIO by default, which ends a process).
    Asked in a loop beside a writer that opens the file in a loop, the asker lives. (Half a second
    is ~30,000 probes here; without the fix the asker died within ~9,000. Kept short: two busy
    loops for longer starve the timing-sensitive tests beside nanobot on other workers.)"""
    path = tmp_path / "history.jsonl"
    path.write_text("")
    writer = subprocess.Popen([sys.executable, "-c", OPENING, str(path)])
    asker = subprocess.run([sys.executable, "-c", PROBING, str(path)], capture_output=True, text=True, timeout=60)
    writer.wait(timeout=60)
    assert asker.returncode == 0 and asker.stdout == "alive\n", (asker.returncode, asker.stderr)
