"""`Workspace.append_many` / `dream append --jsonl` beside nanobot's own ``MemoryStore``, which
appends without our lock: every batch lands whole, with consecutive cursors, and no cursor is
shared with nanobot's entries (issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nanobot_driver import Nanobot
from test_history_beside_nanobot import APPENDER, _everything, _wait_until_ready

from dream_memory.testing import build_workspace

pytestmark = pytest.mark.nanobot

# dream-memory's side: BATCHES batches of SIZE entries, each one Workspace.append_many call.
OURS = """
import json, sys, time
from pathlib import Path
from dream_memory import Workspace
workspace, batches, size, go = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
ws = Workspace(workspace, env={"HOME": str(workspace.parent)})
Path(str(go) + ".ours").touch()
while not go.exists():
    time.sleep(0.001)
out = []
for b in range(batches):
    done = ws.append_many([{"content": f"batch {b} entry {i}", "session_key": "dream:cli"} for i in range(size)])
    out.append([e.cursor for e in done.entries])
    time.sleep(0.01)
print(json.dumps(out))
"""


def test_batches_beside_nanobot_appending_every_2ms_stay_whole(nanobot: Nanobot, tmp_path: Path) -> None:
    """nanobot's MemoryStore appends 300 entries, one every 2 ms, while dream-memory appends ten
    batches of 100 with append_many: all 1,300 entries are stored once, no cursor twice, each
    batch's cursors are consecutive and hold that batch's texts in order, and nanobot's cursors
    hold its own."""
    ws = build_workspace(tmp_path / "ws")
    go = tmp_path / "go"
    theirs = nanobot.start(APPENDER, str(ws), "300", "0.002", str(go))
    ours = subprocess.Popen(
        [sys.executable, "-c", OURS, str(ws), "10", "100", str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_until_ready(go, theirs)
    _wait_until_ready(go, ours, mark=".ours")
    go.touch()
    theirs_out, theirs_err = theirs.communicate(timeout=180)
    ours_out, ours_err = ours.communicate(timeout=180)
    assert theirs.returncode == 0, theirs_err
    assert ours.returncode == 0, ours_err

    everything = _everything(ws)
    cursors = [e.cursor for e in everything]
    assert len(cursors) == 1300 and len(set(cursors)) == 1300
    by_cursor = {e.cursor: e.content for e in everything}
    for b, batch in enumerate(json.loads(ours_out)):
        assert batch == list(range(batch[0], batch[0] + 100)), b
        assert [by_cursor[c] for c in batch] == [f"batch {b} entry {i}" for i in range(100)]
    assert [by_cursor[c] for c in json.loads(theirs_out)] == [f"nanobot entry {i}" for i in range(300)]
