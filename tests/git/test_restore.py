"""`dream restore SHA`: exactly that commit's changes are undone, in a new commit that can be
restored in turn; conflicts refuse and change nothing; --force says what it threw away;
Dream's own cursor and state are left alone unless --replay."""

from __future__ import annotations

import json
from pathlib import Path

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace


def _init(tmp_path: Path, dream, **build) -> Path:
    ws = build_workspace(tmp_path / "ws", **build)
    proc = dream("init", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    return ws


def _read(ws: Path, rel: str) -> str | None:
    path = ws / rel
    return path.read_text(encoding="utf-8") if path.exists() else None


def test_restore_undoes_one_commit_and_a_restore_of_it_redoes_it(tmp_path: Path, dream, git, dream_commit) -> None:
    """Restoring an old commit puts back only the files it touched: a file it added is removed
    (with its now empty folder), a file it changed returns to its earlier text, and a later
    commit's changes stay. A file a commit removed comes back when that commit is restored.
    Restoring the revert brings the original change back."""
    ws = _init(tmp_path, dream)
    template = _read(ws, "memory/MEMORY.md")
    old = dream_commit(
        ws,
        {"memory/MEMORY.md": "# Memory\n- Uses PostgreSQL\n", "skills/sql/SKILL.md": "sql tips\n"},
        "decision",
        (1, 2),
    )
    dream_commit(ws, {"USER.md": "# User\n- Prefers dark mode\n", "entities/db.md": "# db\n"}, "preference", (3, 4))
    removal = dream_commit(ws, {"entities/db.md": None}, "drop entity", (5, 5))

    proc = dream("restore", old, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _read(ws, "memory/MEMORY.md") == template
    assert not (ws / "skills/sql").exists() and (ws / "skills").is_dir()
    assert _read(ws, "USER.md") == "# User\n- Prefers dark mode\n"  # the later commit is intact
    assert _read(ws, "entities/db.md") is None
    assert "skills/sql/SKILL.md" in proc.stdout and "deleted" in proc.stdout
    revert = git(ws, "rev-parse", "HEAD").strip()
    assert git(ws, "log", "-1", "--format=%s").strip() == f"dream: revert {old[:10]} (dream: decision)"
    assert (git(ws, "show", "--format=", "--name-only", revert).split()) == ["memory/MEMORY.md", "skills/sql/SKILL.md"]

    proc = dream("restore", revert[:8], "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _read(ws, "memory/MEMORY.md") == "# Memory\n- Uses PostgreSQL\n"
    assert _read(ws, "skills/sql/SKILL.md") == "sql tips\n"

    proc = dream("restore", removal, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _read(ws, "entities/db.md") == "# db\n"
    assert git(ws, "status", "--porcelain") == ""
    listing = dream("restore", "--workspace", str(ws)).stdout
    assert (
        listing.index(f"revert {removal[:10]}")
        < listing.index(f"revert {revert[:10]}")
        < listing.index(f"revert {old[:10]}")
    )


def test_a_conflict_changes_nothing_and_force_says_what_it_threw_away(
    tmp_path: Path, dream, git, dream_commit, snapshot
) -> None:
    """Where lines the commit wrote changed since (by a later commit, or by hand), the restore
    refuses with exit 1 naming each such file and line and leaves every file, the index and HEAD
    as they were; a hand edit on other lines is no conflict. --force takes the restore's side in
    those lines only, names them, and the hand edit stays, committed first as `memory: manual
    edits`."""
    ws = _init(tmp_path, dream)
    dream_commit(ws, {"memory/MEMORY.md": "# Memory\n", "USER.md": "# User\n", "SOUL.md": "# Soul\n"}, "start")
    target = dream_commit(
        ws,
        {"memory/MEMORY.md": "# Memory\n- A\n", "USER.md": "# User\n- B\n", "SOUL.md": "# Soul\n- C\n"},
        "three files",
        (1, 3),
    )
    dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- A, revised by a later batch\n"}, "later", (4, 4))
    (ws / "SOUL.md").write_text("# Soul\n- C, my words now\n", encoding="utf-8")
    (ws / "USER.md").write_text("my own note\n# User\n- B\n", encoding="utf-8")
    before = snapshot(ws)

    refused = dream("restore", target, "--workspace", str(ws))
    assert refused.returncode == 1
    assert "SOUL.md line 2; memory/MEMORY.md line 2 changed since that commit; nothing was changed" in refused.stderr
    assert "USER.md" not in refused.stderr
    assert refused.stdout == ""
    after = snapshot(ws)
    assert after.pop("memory/.dream.lock") == before.pop("memory/.dream.lock", b"") == b""  # released run lock
    assert after == before

    forced = dream("restore", target, "--force", "--workspace", str(ws))
    assert forced.returncode == 0, forced.stderr
    assert "--force: took the restore's side in SOUL.md line 2; memory/MEMORY.md line 2" in forced.stdout
    assert "committed your unsaved edits first" in forced.stdout
    assert _read(ws, "memory/MEMORY.md") == "# Memory\n"
    assert _read(ws, "SOUL.md") == "# Soul\n"
    assert _read(ws, "USER.md") == "my own note\n# User\n"
    assert git(ws, "log", "--format=%s", "-2").splitlines()[1] == "memory: manual edits"
    assert "- C, my words now" in git(ws, "show", "HEAD~1:SOUL.md")
    assert "Forced-Over: SOUL.md line 2; memory/MEMORY.md line 2" in git(ws, "log", "-1", "--format=%b")
    assert git(ws, "status", "--porcelain") == ""


def test_cursor_and_state_are_left_alone_unless_replay(tmp_path: Path, dream, git, dream_commit) -> None:
    """.dream_cursor and .dream_state.json are neither conflict-checked nor written by a restore:
    restoring memory does not re-queue history. --replay moves the cursor back to just before
    the commit's range, in the revert commit, and says how many entries the next run reads."""
    history = [HistoryEntry(c, "2026-04-03 00:02", f"- fact {c}") for c in range(1, 10)]
    ws = _init(tmp_path, dream, history=history)
    first = dream_commit(
        ws,
        {"memory/MEMORY.md": "# Memory\n- from 1..5\n", "memory/.dream_state.json": '{"version": 1}\n'},
        "first",
        (1, 5),
    )
    second = dream_commit(ws, {"USER.md": "# User\n- from 6..9\n"}, "second", (6, 9))
    # Dream has moved on since (its own files differ from every commit, uncommitted)
    (ws / "memory/.dream_cursor").write_text("9\n", encoding="utf-8")
    (ws / "memory/.dream_state.json").write_text('{"version": 1, "failure": null}\n', encoding="utf-8")
    proc = dream("restore", first, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _read(ws, "memory/.dream_cursor") == "9\n"
    assert _read(ws, "memory/.dream_state.json") == '{"version": 1, "failure": null}\n'
    assert "memory/.dream_" not in git(ws, "show", "--format=", "--name-only", "HEAD")

    proc = dream("restore", second, "--replay", "--json", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["cursor_before"], result["cursor_after"]) == (9, 5)
    assert (result["replay_entries"], result["replay_from_archive"]) == (4, 0)
    assert _read(ws, "memory/.dream_cursor") == "5\n"
    assert git(ws, "show", "HEAD:memory/.dream_cursor") == "5\n"
    assert "Replay-From: 5" in git(ws, "log", "-1", "--format=%B")
    assert [e.cursor for e in HistoryLog(ws, clock=FrozenClock()).entries_after(5)] == [6, 7, 8, 9]

    revert = git(ws, "rev-parse", "HEAD~1").strip()  # the revert of `first`: no Dream-Range
    assert git(ws, "log", "-1", "--format=%s", revert).startswith("dream: revert")
    proc = dream("restore", revert, "--replay", "--workspace", str(ws))
    assert proc.returncode == 2 and "records no history range" in proc.stderr


def test_replay_reads_the_archive_when_compaction_moved_the_range(tmp_path: Path, dream, dream_commit) -> None:
    """The range of an old Dream commit was compacted into memory/archive/: --replay still moves
    the cursor back, and the next run reads those entries from the archive."""
    history = [HistoryEntry(c, f"2026-0{3 if c <= 30 else 4}-03 00:02", f"- fact {c}") for c in range(1, 61)]
    ws = _init(tmp_path, dream, history=history, dream_cursor=50)
    old = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- from 11..20\n"}, "old batch", (11, 20))
    dream_commit(ws, {"USER.md": "# User\n- later\n"}, "later batch", (21, 50))
    log = HistoryLog(ws, clock=FrozenClock())
    assert log.compact(dream_cursor=50, max_entries=10).archived == 50
    assert min(e.cursor for e in log.scan().entries) == 51

    proc = dream("restore", old, "--replay", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert "--replay: the Dream cursor moved from 50 to 10" in proc.stdout
    assert (
        "--replay: the next Dream run reads 50 entries from cursor 11 on, 40 of them from memory/archive/"
        in proc.stdout
    )
    pending = HistoryLog(ws, clock=FrozenClock()).entries_after(10)
    assert [e.cursor for e in pending] == list(range(11, 61))
    assert pending[0].content == "- fact 11"
    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (status["dream_cursor"], status["pending"]) == (10, 50)  # archived entries count as pending


def test_a_restore_during_a_dream_run_is_exit_75(tmp_path: Path, dream, dream_commit) -> None:
    """While a Dream run holds memory/.dream.lock, a restore does nothing and exits 75."""
    import subprocess
    import sys

    ws = _init(tmp_path, dream)
    sha = dream_commit(ws, {"USER.md": "# User\n- x\n"}, "x", (1, 1))
    code = (
        "import sys, time\nfrom datetime import datetime, timezone\nfrom pathlib import Path\n"
        "from dream_memory.adapters.locks import dream_lock\n"
        "with dream_lock(Path(sys.argv[1]), now=datetime.now(timezone.utc)):\n"
        "    print('locked', flush=True)\n    time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(ws)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        proc = dream("restore", sha, "--workspace", str(ws))
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 75
    assert f"locked by another Dream run (pid {holder.pid}" in proc.stderr
    assert _read(ws, "USER.md") == "# User\n- x\n"


def _snapshot(ws: Path) -> dict[str, bytes]:
    return {
        p.relative_to(ws).as_posix(): p.read_bytes()
        for p in sorted(ws.rglob("*"))
        if p.is_file() and p.relative_to(ws).parts[0] != ".git"
    }


def test_restoring_the_first_commit_is_refused_and_changes_nothing(tmp_path: Path, dream, git, dream_commit) -> None:
    """`dream restore <sha of memory: init>` would delete SOUL.md, USER.md, memory/MEMORY.md and
    the .gitignore block: exit 2 with a message naming the first commit, and the files, HEAD and
    the history stay exactly as they were (nanobot refuses to revert a root commit too)."""
    ws = _init(tmp_path, dream)
    dream_commit(ws, {"USER.md": "# User\n\n- likes tea\n"}, "tea", (1, 1))
    root = git(ws, "rev-list", "--max-parents=0", "HEAD").strip()
    assert git(ws, "log", "-1", "--format=%s", root).strip() == "memory: init"
    head, files = git(ws, "rev-parse", "HEAD").strip(), _snapshot(ws)
    proc = dream("restore", root[:8], "--workspace", str(ws))
    assert proc.returncode == 2, proc.stderr
    assert "first commit" in proc.stderr and "nothing was changed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert _snapshot(ws) == files
    assert git(ws, "status", "--porcelain") == ""


def test_a_restore_that_would_delete_the_gitignore_block_is_refused(tmp_path: Path, dream, git) -> None:
    """A commit that put the dream-memory block back into .gitignore (after someone committed it
    away) cannot be undone: the block keeps runtime files out of git. Exit 2, nothing changed."""
    ws = _init(tmp_path, dream)
    with_block = (ws / ".gitignore").read_text(encoding="utf-8")
    (ws / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    git(ws, "commit", "-qam", "drop the block", identity=True)
    (ws / ".gitignore").write_text("node_modules/\n" + with_block, encoding="utf-8")
    git(ws, "commit", "-qam", "block back", identity=True)
    head, files = git(ws, "rev-parse", "HEAD").strip(), _snapshot(ws)
    proc = dream("restore", head[:8], "--workspace", str(ws))
    assert proc.returncode == 2, proc.stderr
    assert ".gitignore" in proc.stderr and "nothing was changed" in proc.stderr
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert _snapshot(ws) == files
