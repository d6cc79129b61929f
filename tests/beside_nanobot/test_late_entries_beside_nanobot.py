"""nanobot's MemoryStore appends without our lock: it reads the last cursor, then writes its line.
Stopped in between (a scheduler stall on a loaded machine), it writes its line under a cursor that
`dream append` gave meanwhile and a Dream run has passed. That entry is dreamt by the next run,
where the cursor alone used to call it done (core/late_entries.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

pytestmark = pytest.mark.nanobot

Dream = Callable[..., subprocess.CompletedProcess[str]]

# nanobot's own append_history, stopped after it allocated its cursor until RELEASE exists.
STALLED_APPEND = """
import json, sys, time
from pathlib import Path
from nanobot.agent.memory import MemoryStore
workspace, allocated, release = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
store = MemoryStore(workspace)
_allocate = store._next_cursor
def _stalled():
    cursor = _allocate()
    # Renamed into place: the test polls for the name and reads it at once, and a plain
    # write_text let it read the file created but still empty.
    partial = allocated.with_suffix(".partial")
    partial.write_text(str(cursor))
    partial.replace(allocated)
    while not release.exists():
        time.sleep(0.01)
    return cursor
store._next_cursor = _stalled
print(json.dumps(store.append_history(sys.argv[4], session_key="telegram:42")))
"""

CAT = "- [durable] User's cat is called Miso."


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120  # nanobot's imports take seconds on a loaded machine
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "nanobot did not allocate a cursor within 120 s"
        time.sleep(0.01)


def _run(dream: Dream, ws: Path) -> dict[str, object]:
    proc = dream("run", "--model", "offline", "--json", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    return report


def test_an_entry_nanobot_wrote_after_a_run_passed_its_cursor_is_dreamt_next(
    nanobot: Nanobot, dream: Dream, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert dream("append", "- [durable] User's name is Ada.", "--workspace", str(ws)).returncode == 0
    assert _run(dream, ws)["cursor_after"] == 1

    allocated, release = tmp_path / "allocated", tmp_path / "release"
    proc = nanobot.start(STALLED_APPEND, str(ws), str(allocated), str(release), CAT)
    _wait_for(allocated, proc)
    assert allocated.read_text() == "2"
    # While nanobot is stopped: our append takes cursor 2 too (nanobot has not written anything
    # it could see), and a run dreams it and passes cursor 2.
    ours = dream("append", "- [durable] User lives in Lyon.", "--workspace", str(ws))
    assert ours.stdout.strip() == "2"
    assert _run(dream, ws)["cursor_after"] == 2
    release.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out) == 2

    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (status["dream_cursor"], status["pending"]) == (2, 1)
    report = _run(dream, ws)
    assert report["entries_processed"] == 1
    assert "Miso" in (ws / "USER.md").read_text(encoding="utf-8")
    assert _run(dream, ws)["status"] == "nothing_to_do"
