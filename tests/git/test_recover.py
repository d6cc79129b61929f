"""A change killed between moving HEAD and writing its files is finished by `recover` on the next
command (or rolled back when HEAD never moved), and is never committed as `memory: manual edits`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory.app.versioning import commit_manual_edits

# Applies a Dream-like commit of two files, SIGKILLing itself just before the N-th write at SITE.
KILLER = """
import sys
from pathlib import Path
from dream_memory.adapters import fsutil
from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit
from dream_memory.testing import FrozenClock
from dream_memory.testing.faults import at_write, kill_self
site, nth, ws = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
store = GitStore.open(ws, author="dream-memory <dream-memory@localhost>", clock=FrozenClock())
fsutil.set_fault_injector(at_write(kill_self, site, nth))
apply_commit(store, {"memory/MEMORY.md": b"# Memory\\n- new fact\\n", "USER.md": b"# User\\n- new pref\\n",
                     "memory/.dream_cursor": b"7\\n"}, "dream: two facts\\n\\nDream-Range: 1..7")
"""

CASES = [
    ("git.ref", 1, "rolled back"),  # journal written, HEAD not moved yet
    ("memory.write", 1, "finished"),  # HEAD moved, no file written
    ("memory.write", 2, "finished"),  # HEAD moved, one file written
    ("git.index", 1, "finished"),  # files written, index not in step
    ("journal.remove", 1, "finished"),  # everything but the journal's removal
]


@pytest.mark.parametrize(("site", "nth", "outcome"), CASES)
def test_a_killed_commit_is_finished_or_rolled_back_never_taken_for_hand_edits(
    tmp_path: Path, dream, git, store, clean_env: dict[str, str], site: str, nth: int, outcome: str
) -> None:
    """Whatever the moment of the kill, the next command leaves files equal to HEAD and a clean
    `git status`; the history holds the Dream commit (or not, if HEAD never moved) and never a
    `memory: manual edits` commit with Dream's changes in it."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    init = git(ws, "rev-parse", "HEAD").strip()
    before = {rel: (ws / rel).read_text(encoding="utf-8") for rel in ("memory/MEMORY.md", "USER.md")}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, site, str(nth), str(ws)], capture_output=True, text=True, env=clean_env
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (ws / "memory/.dream_journal.json").exists()

    with store(ws) as s:
        assert commit_manual_edits(s) is None  # recovers first, then finds no hand edit
    subjects = git(ws, "log", "--format=%s").splitlines()
    assert "memory: manual edits" not in subjects
    assert not (ws / "memory/.dream_journal.json").exists()
    assert git(ws, "status", "--porcelain") == ""
    fsck = git(ws, "fsck", "--strict", "--no-progress", check=False).splitlines()
    if outcome == "finished":
        assert fsck == []
        assert subjects == ["dream: two facts", "memory: init"]
        assert (ws / "memory/MEMORY.md").read_text(encoding="utf-8") == "# Memory\n- new fact\n"
        assert (ws / "USER.md").read_text(encoding="utf-8") == "# User\n- new pref\n"
        assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8") == "7\n"
    else:
        # the commit object was built before HEAD could move: unreachable, harmless
        assert len(fsck) == 1 and fsck[0].startswith("dangling commit ")
        assert git(ws, "rev-parse", "HEAD").strip() == init
        assert {rel: (ws / rel).read_text(encoding="utf-8") for rel in before} == before
        assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8") == "0\n"  # as init committed it


def test_status_and_init_after_a_kill(tmp_path: Path, dream, git, clean_env: dict[str, str]) -> None:
    """`dream init`, a writing command, also finishes an interrupted change."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, "memory.write", "1", str(ws)], capture_output=True, env=clean_env
    )
    assert proc.returncode == -signal.SIGKILL
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert git(ws, "status", "--porcelain") == ""
    assert git(ws, "log", "--format=%s").splitlines() == ["dream: two facts", "memory: init"]


@pytest.mark.parametrize(("site", "lock"), [("git.index", ".git/index.lock"), ("git.ref", ".git/refs/heads/main.lock")])
@pytest.mark.slow
def test_a_git_lock_left_by_the_kill_does_not_block_forever(
    tmp_path: Path, dream, git, clean_env: dict[str, str], site: str, lock: str
) -> None:
    """Killed inside the write of the index or of the branch ref, the process leaves git's
    index.lock or main.lock behind, which would block every later commit (and git itself). The
    next command sees the interrupted change's journal, waits a moment, removes the lock and
    finishes (or rolls back) the change."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = subprocess.run([sys.executable, "-c", KILLER, site, "1", str(ws)], capture_output=True, env=clean_env)
    assert proc.returncode == -signal.SIGKILL
    (ws / lock).write_bytes(b"what the killed process had half written")  # as dulwich leaves it
    appended = dream("append", "- next", "--workspace", str(ws))  # does not touch git
    assert appended.returncode == 0
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert not (ws / lock).exists()
    assert git(ws, "status", "--porcelain") == ""
    subjects = git(ws, "log", "--format=%s").splitlines()
    assert subjects == (["dream: two facts", "memory: init"] if site == "git.index" else ["memory: init"])


def test_a_change_still_being_made_is_not_recovered(tmp_path: Path, dream, store, clean_env: dict[str, str]) -> None:
    """A journal whose writer is alive belongs to a change in progress: recover leaves it alone."""
    from dream_memory.app.versioning import recover

    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import json
        import socket

        journal = ws / "memory/.dream_journal.json"
        journal.write_text(
            json.dumps(
                {
                    "commit": "0" * 40,
                    "base": None,
                    "paths": ["USER.md"],
                    "pid": sleeper.pid,
                    "host": socket.gethostname(),
                }
            )
        )
        with store(ws) as s:
            assert recover(s) is None
        assert journal.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    with store(ws) as s:
        assert recover(s) is not None  # its writer is gone now: abandoned (HEAD is neither)
    assert not journal.exists()


@pytest.mark.slow
def test_a_lock_made_long_after_the_interrupted_change_is_left_to_its_owner(
    tmp_path: Path, dream, git, clean_env: dict[str, str]
) -> None:
    """An index.lock made well after the interrupted change's journal is no lock of the killed
    process: a person's `git commit` holds one while its editor is open. Recovery removed it, and
    the person's commit then failed ("unable to write new_index file") (found by an independent
    review). It is left alone, the command says what blocks it, and once the lock is gone the
    next command recovers."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = subprocess.run([sys.executable, "-c", KILLER, "git.index", "1", str(ws)], capture_output=True, env=clean_env)
    assert proc.returncode == -signal.SIGKILL
    lock = ws / ".git" / "index.lock"
    lock.write_bytes(b"a person's git commit, its editor open")
    journal = (ws / "memory" / ".dream_journal.json").stat().st_mtime
    os.utime(lock, (journal + 120, journal + 120))  # made two minutes after the crash

    blocked = dream("init", "--workspace", str(ws))
    assert blocked.returncode != 0 and "index.lock" in blocked.stderr, blocked.stdout + blocked.stderr
    assert "Traceback" not in blocked.stderr, blocked.stderr
    assert lock.read_bytes() == b"a person's git commit, its editor open"

    lock.unlink()  # the person's commit ended
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert git(ws, "status", "--porcelain") == ""
    assert git(ws, "log", "--format=%s").splitlines() == ["dream: two facts", "memory: init"]


def test_the_journal_is_fresh_when_the_index_is_written(tmp_path: Path, dream, store) -> None:
    """Recovery judges an index.lock by how soon after the journal it was made; writing the files
    onto edits made meanwhile can take seconds (each edited file is given time to be saved whole),
    so a commit killed in its index write left a lock recovery would have taken for a person's
    (found by a review). The journal is touched right before the index is written."""
    from dream_memory.adapters import fsutil
    from dream_memory.app.versioning import apply_commit

    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    journal = ws / "memory" / ".dream_journal.json"
    seen: dict[str, float] = {}

    def slow_files(at: str, path: object) -> None:
        if at == "memory.write" and "files_done" not in seen:
            time.sleep(1.5)
            seen["files_done"] = time.time()
        if at == "git.index" and journal.exists():
            seen["journal"] = journal.stat().st_mtime

    fsutil.set_fault_injector(slow_files)
    try:
        with store(ws) as s:
            assert apply_commit(s, {"USER.md": b"# User\n- new pref\n"}, "dream: a test change")
    finally:
        fsutil.set_fault_injector(None)
    assert seen["journal"] >= seen["files_done"] - 0.1, seen
