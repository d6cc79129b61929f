"""`dream append`, `dream status` and the start-up path of `dream --help`, as separate processes
on a machine with an empty HOME."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.core.history import HistoryEntry
from dream_memory.testing import build_workspace, read_history

HOLD_HISTORY_LOCK = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""

HOLD_DREAM_LOCK = """
import sys, time
from datetime import datetime, timezone
from pathlib import Path
from dream_memory.adapters.locks import dream_lock
with dream_lock(Path(sys.argv[1]), now=datetime.now(timezone.utc)):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold(code: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_append_prints_the_cursor_and_reads_stdin(tmp_path: Path, dream) -> None:
    """`dream append TEXT` prints the new cursor on stdout (adding the durable templates a
    nanobot workspace lacks); `-` reads the entry from stdin, undecodable bytes replaced rather
    than failing."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    first = dream("append", "- User prefers dark mode", "--session-key", "cli:direct", "--workspace", str(ws))
    assert (first.returncode, first.stdout) == (0, "1\n"), first.stderr
    proc = dream("append", "-", "--workspace", str(ws), input=b"- from a pipe\n- second line\n\xff bad byte\n")
    assert (proc.returncode, proc.stdout) == (0, "2\n"), proc.stderr
    entries = read_history(ws)
    assert [{k: v for k, v in e.items() if k != "timestamp"} for e in entries] == [
        {"cursor": 1, "content": "- User prefers dark mode", "session_key": "cli:direct"},
        {"cursor": 2, "content": "- from a pipe\n- second line\n\ufffd bad byte"},
    ]
    assert (ws / "SOUL.md").is_file() and (ws / "memory/.cursor").read_text() == "2\n"


def test_empty_text_is_exit_2_and_creates_nothing(tmp_path: Path, dream) -> None:
    """An empty or blank entry is bad input: exit 2, a message on stderr, no workspace made."""
    ws = tmp_path / "ws"
    for args, stdin in (
        (["append", ""], None),
        (["append", "  \t "], None),
        (["append", "-"], ""),
        (["append", "-"], "\n\n"),
    ):
        proc = dream(*args, "--workspace", str(ws), input=stdin)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "nothing to append" in proc.stderr and proc.stdout == ""
    assert not ws.exists()


@pytest.mark.slow
def test_append_waits_a_bounded_time_for_the_history_lock(tmp_path: Path, dream) -> None:
    """A lock released within the bound is waited for; one held past it (default 10 s) makes
    `dream append` give up with exit 1 naming the lock, instead of hanging a scheduled job."""
    ws = build_workspace(tmp_path / "ws")
    lock = str(ws / "memory/.history.lock")
    holder = _hold(HOLD_HISTORY_LOCK, lock, "1.5")
    start = time.monotonic()
    proc = dream("append", "- waited", "--workspace", str(ws))
    waited = time.monotonic() - start
    holder.wait()
    assert (proc.returncode, proc.stdout) == (0, "1\n"), proc.stderr
    assert waited >= 1.0
    holder = _hold(HOLD_HISTORY_LOCK, lock, "60")
    try:
        start = time.monotonic()
        proc = dream("append", "- gives up", "--workspace", str(ws))
        waited = time.monotonic() - start
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 1
    assert "memory/.history.lock is held by another writer for more than 10 s" in proc.stderr
    assert 9.5 <= waited < 20
    assert [e["content"] for e in read_history(ws)] == ["- waited"]


def test_a_history_lock_that_is_a_symlink_is_refused_and_its_target_never_made(tmp_path: Path, dream) -> None:
    """A planted link at memory/.history.lock would make the lock create or lock a file outside
    the workspace: `dream append` refuses it (exit 2, naming the link) and writes nothing."""
    ws = build_workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    (ws / "memory/.history.lock").unlink(missing_ok=True)
    (ws / "memory/.history.lock").symlink_to(outside)
    proc = dream("append", "- refused", "--workspace", str(ws))
    assert proc.returncode == 2, proc.stderr
    assert "cannot take the history lock" in proc.stderr and "is a symbolic link" in proc.stderr
    assert not outside.exists()
    assert read_history(ws) == []


def test_append_is_never_blocked_by_a_dream_run(tmp_path: Path, dream) -> None:
    """While a Dream run holds memory/.dream.lock, appends go straight through."""
    ws = build_workspace(tmp_path / "ws")
    holder = _hold(HOLD_DREAM_LOCK, str(ws), "60")
    try:
        start = time.monotonic()
        proc = dream("append", "- during a dream run", "--workspace", str(ws))
        elapsed = time.monotonic() - start
        status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    finally:
        holder.kill()
        holder.wait()
    assert (proc.returncode, proc.stdout) == (0, "1\n"), proc.stderr
    assert elapsed < 5
    assert status["lock"]["pid"] == holder.pid


def test_status_reports_and_never_migrates(tmp_path: Path, dream) -> None:
    """`dream status --json` carries the CONTRACT keys; a legacy HISTORY.md is reported as a
    pending migration, not migrated (read-only), and the next writing command migrates it."""
    history = [HistoryEntry(c, "2026-04-03 00:02", f"- fact {c}") for c in (3, 4, 9)]
    ws = build_workspace(tmp_path / "ws", history=history, dream_cursor=4, cursor=9)
    with (ws / "memory/history.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("not json at all\n")
    (ws / "memory/HISTORY.md").write_text("[2026-03-01 10:00] old entry\n", encoding="utf-8")
    proc = dream("status", "--json", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    required = {
        "cursor",
        "dream_cursor",
        "pending",
        "malformed",
        "lock",
        "last_dream_commit",
        "dirty",
        "held",
        "pending_migration",
    }
    assert required <= set(status)
    assert {k: status[k] for k in ("cursor", "dream_cursor", "pending", "malformed", "lock", "pending_migration")} == {
        "cursor": 9,
        "dream_cursor": 4,
        "pending": 1,
        "malformed": 1,
        "lock": None,
        "pending_migration": True,
    }
    assert "memory/history.jsonl line 4: malformed" in proc.stderr
    assert (ws / "memory/HISTORY.md").exists()
    proc = dream("append", "- new", "--workspace", str(ws))
    assert (proc.returncode, proc.stdout) == (0, "11\n"), proc.stderr
    assert "migrated 1 entries from memory/HISTORY.md (as new entries for Dream)" in proc.stderr
    assert not (ws / "memory/HISTORY.md").exists() and (ws / "memory/HISTORY.md.bak").exists()
    text = dream("status", "--workspace", str(ws)).stdout
    assert "pending        3 entries" in text and "migration" not in text


def test_help_imports_neither_litellm_nor_dulwich_nor_pydantic(clean_env: dict[str, str]) -> None:
    """`dream --help` stays fast on a fresh install: none of the heavy libraries is imported."""
    code = (
        "import sys\n"
        "sys.argv = ['dream', '--help']\n"
        "from dream_memory.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'dulwich', 'pydantic', 'mcp', 'openai'})\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env, timeout=60)
    assert "Usage: dream" in proc.stdout
    assert "HEAVY []" in proc.stderr, proc.stderr
