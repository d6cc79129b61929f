"""What the fast paths of issue 21 must not change: `dream log` reads versions without loading
the configuration (yet a config file named explicitly must exist), and a GitStore that keeps the
parsed index between commits still sees what git staged in between."""

from __future__ import annotations

import json
from pathlib import Path

from dream_memory.app.versioning import apply_commit


def test_log_does_not_need_a_valid_config_but_a_named_one_must_exist(tmp_path: Path, dream, dream_commit) -> None:
    """A config file with a value Dream would refuse does not stop `dream log` (nothing in it
    changes what log shows); `--config` naming a file that is not there is still exit 2."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    sha = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- Uses PostgreSQL\n"}, "decision", (1, 2))
    (ws / "dream.json").write_text(json.dumps({"agents": {"defaults": {"dream": {"maxBatchSize": "lots"}}}}))
    assert dream("status", "--workspace", str(ws)).returncode == 2  # the config really is refused elsewhere

    shown = dream("log", "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"commit  {sha}"

    missing = dream("log", "--workspace", str(ws), "--config", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert "nope.json does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_a_store_kept_open_sees_what_git_staged_between_two_commits(tmp_path: Path, dream, git, store) -> None:
    """Dream keeps one GitStore open for a whole run: a file the user stages with git between two
    of its commits stays staged (the index was read again, not taken from memory), and the
    second commit's files are recorded in the index too."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    with store(ws) as opened:
        assert apply_commit(opened, {"USER.md": b"# User\n- one\n"}, "dream: one") is not None
        assert opened.dirty() == []  # reads (and keeps) the index
        (ws / "notes.txt").write_text("staged by hand\n", encoding="utf-8")
        git(ws, "add", "-f", "notes.txt")
        assert apply_commit(opened, {"USER.md": b"# User\n- one\n- two\n"}, "dream: two") is not None
    staged = git(ws, "diff", "--cached", "--name-only")
    assert staged.split() == ["notes.txt"]
    assert git(ws, "status", "--porcelain", "--", "USER.md") == ""
