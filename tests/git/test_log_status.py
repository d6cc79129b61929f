"""`dream log [SHA | A..B] [--json]` and what `dream status` says about versions."""

from __future__ import annotations

import json
from pathlib import Path


def test_log_when_there_is_nothing_to_show(tmp_path: Path, dream) -> None:
    """No repository, or only `memory: init`: a clear sentence (or JSON null) and exit 0."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)  # a workspace as nanobot leaves it: no repository yet
    proc = dream("log", "--workspace", str(ws))
    assert (proc.returncode, proc.stdout) == (
        0,
        "No memory versions yet: Dream has not committed anything in this workspace.\n",
    )
    assert not (ws / ".git").exists()
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = dream("log", "--workspace", str(ws))
    assert (proc.returncode, proc.stdout) == (
        0,
        "No Dream change yet: the repository holds only commits made outside Dream.\n",
    )
    proc = dream("log", "--json", "--workspace", str(ws))
    assert (proc.returncode, json.loads(proc.stdout)) == (0, None)


def test_log_latest_sha_and_range(tmp_path: Path, dream, git, dream_commit) -> None:
    """Without SHA: the latest Dream change (a later hand-edit commit is not one); with SHA: that
    commit; with A..B: the difference between two versions and the commits between them.
    Text shows commit, date, subject, +/- per file and the diff; --json the same, structured."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    first = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- Uses PostgreSQL\n"}, "decision", (1, 2))
    second = dream_commit(ws, {"USER.md": "# User\n- Prefers dark mode\n- Lives in Lyon\n"}, "two user facts", (3, 4))
    (ws / "SOUL.md").write_text("# Soul\n- terse\n", encoding="utf-8")
    git(ws, "commit", "-q", "-am", "memory: manual edits", identity=True)

    latest = dream("log", "--workspace", str(ws))
    assert latest.returncode == 0, latest.stderr
    lines = latest.stdout.splitlines()
    assert lines[0] == f"commit  {second}"
    assert lines[1].startswith("date    ") and "subject dream: two user facts" in lines
    assert any(line.split() == ["USER.md", "+2", "-9", "modified"] for line in lines)
    assert "+- Lives in Lyon" in lines and "--- a/USER.md" in lines
    assert "memory/.dream_cursor" in latest.stdout  # the cursor moved in the same commit

    shown = json.loads(dream("log", first[:6], "--json", "--workspace", str(ws)).stdout)
    assert (shown["commit"], shown["subject"], shown["parent"]) == (
        first,
        "dream: decision",
        git(ws, "rev-parse", f"{first}~1").strip(),
    )
    memory = next(f for f in shown["files"] if f["path"] == "memory/MEMORY.md")
    assert memory["status"] == "modified" and "+- Uses PostgreSQL" in memory["diff"]

    between = dream("log", f"{first[:7]}..HEAD", "--workspace", str(ws))
    assert between.returncode == 0, between.stderr
    assert between.stdout.splitlines()[:3] == [
        f"from    {first}  dream: decision",
        f"to      {git(ws, 'rev-parse', 'HEAD').strip()}  memory: manual edits",
        "commits 2",
    ]
    assert "SOUL.md" in between.stdout and "USER.md" in between.stdout and "memory/MEMORY.md" not in between.stdout
    data = json.loads(dream("log", f"{first}..{second}", "--json", "--workspace", str(ws)).stdout)
    assert [c["commit"] for c in data["commits"]] == [second]
    assert sorted(f["path"] for f in data["files"]) == ["USER.md", "memory/.dream_cursor"]
    assert (
        dream("log", "HEAD~1", "--json", "--workspace", str(ws)).stdout
        == dream("log", second, "--json", "--workspace", str(ws)).stdout
    )


def test_status_shows_the_last_dream_commit_and_unsaved_edits(tmp_path: Path, dream, dream_commit) -> None:
    """`dream status` names the last Dream commit and the tracked files edited by hand since,
    in text and as the `last_dream_commit` and `dirty` JSON keys."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    fresh = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert (fresh["last_dream_commit"], fresh["dirty"]) == (None, [])
    sha = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- fact\n"}, "a fact", (1, 1))
    (ws / "USER.md").write_text("# User\n- edited by hand\n", encoding="utf-8")
    (ws / "skills/new").mkdir(parents=True)
    (ws / "skills/new/SKILL.md").write_text("new skill\n", encoding="utf-8")
    status = json.loads(dream("status", "--json", "--workspace", str(ws)).stdout)
    assert status["last_dream_commit"]["commit"] == sha
    assert status["last_dream_commit"]["subject"] == "dream: a fact"
    assert status["dirty"] == ["USER.md", "skills/new/SKILL.md"]
    text = dream("status", "--workspace", str(ws)).stdout
    assert f"last dream     {sha[:10]} dream: a fact" in text
    assert "unsaved edits  USER.md, skills/new/SKILL.md" in text
