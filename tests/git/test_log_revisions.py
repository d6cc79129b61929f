"""What `dream log REV` accepts, and what it says when REV names nothing (issue 17: `dream log
nonsense-branch` said "give at least 4 hex digits of a SHA" although branch names are accepted)."""

from __future__ import annotations

import json
from pathlib import Path

from dream_memory.testing import build_workspace


def test_an_unknown_name_says_no_such_branch_or_commit_and_what_is_accepted(tmp_path: Path, dream, git) -> None:
    """`dream log nonsense-branch`: exit 2, no branch or commit of that name, and the message lists
    what a revision may be (a branch name, HEAD, HEAD~N, a SHA prefix of 4+ hex digits); a real
    branch name and a SHA prefix both show the change."""
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea"])
    assert dream("run", "--model", "offline", "-w", str(ws)).returncode == 0
    git(ws, "branch", "side")
    for rev in ("nonsense-branch", "abc", "deadbeef00"):
        done = dream("log", rev, "-w", str(ws))
        assert done.returncode == 2, done.stderr
        assert f"'{rev}'" in done.stderr and "no branch or commit" in done.stderr, done.stderr
        assert "a branch name" in done.stderr and "SHA prefix of at least 4 hex digits" in done.stderr
    sha = git(ws, "rev-parse", "HEAD").strip()
    for rev in ("side", sha[:4]):
        shown = dream("log", rev, "--json", "-w", str(ws))
        assert shown.returncode == 0 and json.loads(shown.stdout)["commit"] == sha, shown.stderr
