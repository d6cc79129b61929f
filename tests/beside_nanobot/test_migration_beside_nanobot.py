"""Legacy HISTORY.md split exactly as nanobot's own migration splits it."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import parse_legacy_history
from dream_memory.testing import FrozenClock, build_workspace

pytestmark = pytest.mark.nanobot

# nanobot's MemoryStore migrating memory/HISTORY.md on construction, as it does at start-up.
NANOBOT_MIGRATES = """
import json, sys
from pathlib import Path
from nanobot.agent.memory import MemoryStore
store = MemoryStore(Path(sys.argv[1]))
print(json.dumps([[e["timestamp"], e["content"]] for e in store._read_entries()]))
"""

# The cases where the previous parser and nanobot's differed, and the header forms around them.
CASES = {
    "raw block": "[2026-03-03 09:00] [RAW] 3 messages\n[2026-03-03 08:00] USER: hi\n"
    "[2026-03-03 08:01] ASSISTANT [tools: exec]: ok\n[2026-03-03 08:02] USER: thanks\n[2026-03-04 10:00] next\n",
    "undated paragraph after a blank line": "[2026-03-01 10:00] first\n\nan afterthought, no header\n"
    "[2026-03-02 11:00] second\n",
    "day range header": "[2026-03-01 10:00] first\n[2026-03-25–2026-04-02] a week of work\n",
    "slashed days header": "[2026-03-01 10:00] first\n[2026-03-26/27] two days\n",
    "time ranges": "[2026-03-09 21:04-22:12] evening\n[2026-03-09 19:15-03-10 00:27] overnight\n[2026-03-12] day\n",
    "bare dates": "2025-01-01 00:00:00 New year\n\n2026-05-31 09:46 User asked\n",
    "undated only": "notes without any date\n\nmore notes\n",
    "bullets under a header": "[2026-03-01 10:00] did things\n- one\n- two\n\n- three after a blank\n",
    "crlf": "[2026-03-01 10:00] first\r\n[2026-03-02 11:00] second\r\n",
    "header alone on its line": "[2026-03-01 10:00]\nbody on the next line\n",
}
MTIME = datetime(2026, 3, 30, 7, 45).timestamp()


@pytest.mark.parametrize("case", sorted(CASES))
def test_migration_matches_nanobots_own(nanobot: Nanobot, tmp_path: Path, case: str) -> None:
    """nanobot migrates a HISTORY.md in one workspace, dream-memory the same file in another:
    the same entries with the same text; the same timestamps wherever nanobot reads one from a
    "[YYYY-MM-DD HH:MM]" header, and otherwise either the start of the header we read or, for
    undated text, the file's modification time (nanobot's fallback)."""
    text = CASES[case]
    theirs_ws = tmp_path / "theirs"
    (theirs_ws / "memory").mkdir(parents=True)
    (theirs_ws / "memory/HISTORY.md").write_bytes(text.encode())
    os.utime(theirs_ws / "memory/HISTORY.md", (MTIME, MTIME))
    theirs = nanobot.run(NANOBOT_MIGRATES, str(theirs_ws))

    ours_ws = build_workspace(tmp_path / "ours")
    (ours_ws / "memory/HISTORY.md").write_bytes(text.encode())
    os.utime(ours_ws / "memory/HISTORY.md", (MTIME, MTIME))
    log = HistoryLog(ours_ws, clock=FrozenClock())
    assert log.migrate_legacy() is not None
    ours = [(e.timestamp, e.content) for e in log.scan().entries]

    assert [c for _, c in ours] == [c for _, c in theirs]
    parsed = parse_legacy_history(text)
    fallback = datetime.fromtimestamp(MTIME).strftime("%Y-%m-%d %H:%M")
    for (our_ts, _), (their_ts, _), entry in zip(ours, theirs, parsed, strict=True):
        if their_ts != fallback:
            assert our_ts == their_ts
        else:
            assert our_ts == (entry.timestamp or fallback)


def test_real_history_files_split_as_nanobot_splits_them(nanobot: Nanobot, fixtures_root: Path) -> None:
    """Every real HISTORY.md of the corpus: our entries' texts equal nanobot's, except where a
    stray `-e` line (which nanobot keeps as an entry of its own) stood."""
    files = sorted(fixtures_root.glob("*/memory/HISTORY.md*")) + sorted(fixtures_root.glob("*/*/memory/HISTORY.md*"))
    assert files
    script = (
        "import json, sys\nfrom nanobot.agent.memory import MemoryStore\nfrom pathlib import Path\n"
        "store = MemoryStore.__new__(MemoryStore)\nstore.legacy_history_file = Path('/nonexistent')\n"
        "print(json.dumps([[e['content'] for e in store._parse_legacy_history(Path(p).read_text(encoding='utf-8'))]"
        " for p in sys.argv[1:]]))\n"
    )
    theirs = nanobot.run(script, *map(str, files))
    for path, their_contents in zip(files, theirs, strict=True):
        ours = [e.content for e in parse_legacy_history(path.read_text(encoding="utf-8"))]
        assert ours == [c for c in their_contents if c.strip() != "-e"], path
    assert json.dumps(theirs)  # nanobot really parsed them
