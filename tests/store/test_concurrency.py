"""Many writers at once, as real processes on real files: nothing lost, no cursor twice."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock, build_workspace

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
    assert compaction["runs"] > 10, compaction
    assert all(e.cursor <= (log.read_dream_cursor() or 0) for e in archived)
    assert log.read_counter() == max(cursors)
    assert not (workspace / "memory/archive/.pending.json").exists()
    assert sorted(p.name for p in (workspace / "memory").iterdir() if p.name.endswith(".tmp")) == []
