"""nanobot's own ``MemoryStore.append_history`` appends after a torn line (what a writer killed
mid-line leaves) without checking for a final newline, so its entry lands on the torn line. That
entry is read, under the cursor nanobot gave it, and dreamt; the torn part is still reported."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock

pytestmark = pytest.mark.nanobot

Dream = Callable[..., subprocess.CompletedProcess[str]]

APPEND = """
import json, sys
from pathlib import Path
from nanobot.agent.memory import MemoryStore
print(json.dumps(MemoryStore(Path(sys.argv[1])).append_history(sys.argv[2], session_key="telegram:42")))
"""

DOG = "- [durable] User has a dog named Pixel."


def test_nanobots_entry_glued_onto_a_torn_line_is_dreamt(nanobot: Nanobot, dream: Dream, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert dream("append", "- [durable] User likes tea.", "--workspace", str(ws)).stdout.strip() == "1"
    history = ws / "memory/history.jsonl"
    with history.open("a", encoding="utf-8") as handle:
        handle.write('{"cursor": 2, "timestamp": "2026-12-05 10:00", "content": "- [durable] torn hal')
    cursor = nanobot.run(APPEND, str(ws), DOG)
    assert cursor == 2
    lines = history.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and lines[1].endswith(DOG + '", "session_key": "telegram:42"}')

    log = HistoryLog(ws, clock=FrozenClock())
    assert [(e.cursor, e.content) for e in log.scan().entries] == [(1, "- [durable] User likes tea."), (2, DOG)]
    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (status["pending"], status["malformed"]) == (2, 1)
    assert dream("append", "- [durable] User lives in Lyon.", "--workspace", str(ws)).stdout.strip() == "3"

    run = dream("run", "--model", "offline", "--json", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert "line 2: malformed" in run.stderr
    assert json.loads(run.stdout)["entries_processed"] == 3
    assert "Pixel" in (ws / "USER.md").read_text(encoding="utf-8")
    assert history.read_text(encoding="utf-8").splitlines()[1] == lines[1]  # the torn part stays
