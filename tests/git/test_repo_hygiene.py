"""What our commits must never do to a repository: rewrite a user's .gitignore lines, run its
hooks, call gpg, or need a git identity."""

from __future__ import annotations

import os
from pathlib import Path

from dream_memory.adapters.git import GITIGNORE_BEGIN, GITIGNORE_END, gitignore_lines


def test_gitignore_merge_keeps_user_lines_and_stays_in_step(tmp_path: Path, dream, git) -> None:
    """An existing .gitignore keeps every byte of the user's lines (CRLF and comments included);
    our block is added once, replaced in place when the tracked set changes, and git honours it:
    tracked memory paths are not ignored, everything else is."""
    ws = tmp_path / "ws"
    ws.mkdir()
    user_lines = b"# my rules\r\n*.log\r\n!keep.log\r\n"
    (ws / ".gitignore").write_bytes(user_lines)
    assert dream("init", "--workspace", str(ws)).returncode == 0
    merged = (ws / ".gitignore").read_bytes()
    assert merged.startswith(user_lines)
    assert merged.count(GITIGNORE_BEGIN.encode()) == 1
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert (ws / ".gitignore").read_bytes() == merged  # idempotent

    # an older version of our block (the tracked set changed since), between user lines
    old_block = f"{GITIGNORE_BEGIN}\n/*\n!/SOUL.md\n{GITIGNORE_END}\n"
    (ws / ".gitignore").write_bytes(user_lines + old_block.encode() + b"after-our-block\n")
    assert dream("init", "--workspace", str(ws)).returncode == 0
    text = (ws / ".gitignore").read_bytes()
    ours = "\n".join([GITIGNORE_BEGIN, *gitignore_lines(), GITIGNORE_END]).encode() + b"\n"
    assert text == user_lines + ours + b"after-our-block\n"

    for rel in (
        "SOUL.md",
        "memory/MEMORY.md",
        "memory/.dream_cursor",
        "skills/a/SKILL.md",
        "entities/x.md",
        "index.md",
    ):
        assert not _ignored(git, ws, rel), f"{rel} must not be ignored"
    ignored = (
        "memory/history.jsonl",
        "memory/.cursor",
        "memory/.history.lock",
        "memory/archive/history-2026-04.jsonl",
        "prompts/dream.md",
        "sessions/a.jsonl",
        "AGENTS.md",
        "debug.log",
    )
    for rel in ignored:
        assert _ignored(git, ws, rel), f"{rel} must be ignored"


def _ignored(git, ws: Path, rel: str) -> bool:
    return git(ws, "check-ignore", rel, check=False).strip() == rel


def test_no_hooks_no_gpg_and_no_identity_needed(tmp_path: Path, dream, git, clean_env, dream_commit) -> None:
    """With failing pre-commit and commit-msg hooks, commit.gpgsign=true and a gpg program that
    records its calls, on a machine where no git config names anyone: init, Dream commits,
    a restore and a forced restore all commit; no hook and no gpg ever ran."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    marker = tmp_path / "ran"
    hooks = ws / ".git/hooks"
    for name in ("pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n", encoding="utf-8")
        os.chmod(hooks / name, 0o755)
    fake_gpg = tmp_path / "gpg"
    fake_gpg.write_text(f"#!/bin/sh\necho gpg >> {marker}\nexit 1\n", encoding="utf-8")
    os.chmod(fake_gpg, 0o755)
    git(ws, "config", "commit.gpgsign", "true")
    git(ws, "config", "gpg.program", str(fake_gpg))
    assert git(ws, "config", "user.name", check=False) == ""
    assert not any(Path(clean_env["HOME"]).iterdir()), "HOME must be empty"

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    sha = dream_commit(ws, {"USER.md": "# User\n- likes tea\n"}, "tea", (1, 1))
    (ws / "USER.md").write_text("# User\n- likes coffee\n", encoding="utf-8")
    assert dream("restore", sha, "--workspace", str(ws)).returncode == 1
    assert dream("restore", sha, "--force", "--workspace", str(ws)).returncode == 0
    assert not marker.exists(), marker.read_text()
    log = git(ws, "log", "--format=%an <%ae>|%s").splitlines()
    assert log == [
        f"dream-memory <dream-memory@localhost>|dream: revert {sha[:10]} (dream: tea)",
        "dream-memory <dream-memory@localhost>|memory: manual edits",
        "dream-memory <dream-memory@localhost>|dream: tea",
        "dream-memory <dream-memory@localhost>|memory: init",
    ]
    assert "gpgsig" not in git(ws, "cat-file", "-p", "HEAD")
    assert git(ws, "fsck", "--strict", "--no-progress", check=False) == ""


def test_a_configured_author_is_used(tmp_path: Path, dream, git) -> None:
    """agents.defaults.dream.gitAuthor names the author and committer of our commits."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "dream.json").write_text(
        '{"agents": {"defaults": {"dream": {"gitAuthor": "Memory Bot <bot@example.org>"}}}}', encoding="utf-8"
    )
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert (
        git(ws, "log", "--format=%an <%ae>|%cn <%ce>").strip()
        == "Memory Bot <bot@example.org>|Memory Bot <bot@example.org>"
    )
