"""`dream init` records memory/.dream_cursor in a commit of ours: the file's value when it has
one, else 0 (the file is made). Until then the cursor is "uncommitted" and the file is followed,
so a nanobot gateway start before the first Dream commit skipped every entry written so far."""

from __future__ import annotations

import json
from pathlib import Path


def _status(dream, ws: Path) -> dict:
    shown = dream("status", "--json", "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_fresh_init_commits_cursor_0_so_a_move_before_the_first_run_skips_nothing(tmp_path: Path, dream, git) -> None:
    ws = tmp_path / "ws"
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8") == "0\n"
    assert git(ws, "show", "HEAD:memory/.dream_cursor") == "0\n"
    assert "memory/.dream_cursor" in git(ws, "log", "-1", "--format=%B")
    assert git(ws, "status", "--porcelain") == ""
    assert _status(dream, ws)["cursor_check"]["state"] == "ok"

    for fact in ("- [durable] User is allergic to peanuts", "- [durable] User's daughter is named Mia"):
        assert dream("append", fact, "--workspace", str(ws)).returncode == 0
    (ws / "memory/.dream_cursor").write_text("2", encoding="utf-8")  # a gateway (re)start
    shown = _status(dream, ws)
    assert (shown["dream_cursor"], shown["pending"], shown["cursor_check"]["state"]) == (0, 2, "ahead")
    run = dream("run", "--model", "offline", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["entries_processed"] == 2
    memory = (ws / "USER.md").read_text(encoding="utf-8") + (ws / "memory/MEMORY.md").read_text(encoding="utf-8")
    assert "peanuts" in memory and "Mia" in memory


def test_init_adopts_the_cursor_file_already_there(tmp_path: Path, dream, git) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory/.dream_cursor").write_text("7", encoding="utf-8")
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert git(ws, "show", "HEAD:memory/.dream_cursor") == "7"
    assert (ws / "memory/.dream_cursor").read_text(encoding="utf-8") == "7"


def test_init_inside_an_enclosing_repository_commits_the_cursor(tmp_path: Path, dream, git) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "app.py").write_text("print(1)\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "project", identity=True)
    ws = repo / "agents" / "bot"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert git(repo, "show", "HEAD:agents/bot/memory/.dream_cursor") == "0\n"
    assert _status(dream, ws)["cursor_check"]["state"] == "ok"


def test_init_records_the_cursor_in_a_repository_that_had_memory_but_no_readable_cursor(
    tmp_path: Path, dream, git
) -> None:
    """nanobot's own GitStore.init commits an empty memory/.dream_cursor; an older `dream init`
    committed none. `dream init` then records the cursor in a commit of its own, once."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "USER.md").write_text("# User\n", encoding="utf-8")
    (ws / "memory/MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    (ws / "memory/.dream_cursor").write_text("", encoding="utf-8")
    git(ws, "init", "-q")
    git(ws, "add", "-f", "USER.md", "memory/MEMORY.md", "memory/.dream_cursor")
    git(ws, "commit", "-q", "-m", "init: nanobot memory store", identity=True)
    assert _status(dream, ws)["cursor_check"]["state"] == "uncommitted"

    init = dream("init", "--workspace", str(ws), "--json")
    assert init.returncode == 0, init.stderr
    assert git(ws, "log", "-1", "--format=%s").strip() == "memory: dream cursor"
    assert git(ws, "show", "HEAD:memory/.dream_cursor") == "0\n"
    assert json.loads(init.stdout)["commit"] == git(ws, "rev-parse", "HEAD").strip()
    assert _status(dream, ws)["cursor_check"]["state"] == "ok"

    again = dream("init", "--workspace", str(ws))
    assert again.returncode == 0, again.stderr
    assert git(ws, "log", "-1", "--format=%s").strip() == "memory: dream cursor"
    assert git(ws, "rev-list", "--count", "HEAD").strip() == "2"


def test_a_range_restore_calls_the_cursor_record_dreams_bookkeeping(tmp_path: Path, dream, git) -> None:
    """`dream restore A..` over `dream init`'s `memory: dream cursor` commit undoes the batches
    and says that commit is Dream's bookkeeping, not a person's edits."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory/MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    git(ws, "init", "-q")
    git(ws, "add", "-f", "memory/MEMORY.md")
    git(ws, "commit", "-q", "-m", "my memory", identity=True)
    first = git(ws, "rev-parse", "HEAD").strip()
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert git(ws, "log", "-1", "--format=%s").strip() == "memory: dream cursor"
    assert dream("append", "--workspace", str(ws), "- [durable] User prefers tea.").returncode == 0
    assert dream("run", "--workspace", str(ws), "--model", "offline").returncode == 0

    restore = dream("restore", f"{first}..", "--workspace", str(ws), "--json")
    assert restore.returncode == 0, restore.stderr
    notes = json.loads(restore.stdout)["notes"]
    (recorded,) = [n for n in notes if "(memory: dream cursor)" in n]
    assert recorded.endswith("Dream's bookkeeping, not a batch's lines"), notes
    assert "tea" not in (ws / "USER.md").read_text(encoding="utf-8")
