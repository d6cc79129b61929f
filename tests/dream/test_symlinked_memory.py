"""A memory folder moved out of the workspace and linked back: what lies beyond a symbolic link
is not in the workspace (as git sees it), so its files are committed as removed, and the run's
report says so instead of removing them silently."""

from __future__ import annotations

from pathlib import Path

from dream_helpers import Cli, git, make_workspace

OFFLINE = {"DREAM_MODEL": "offline"}
SKILL = "---\nname: deploy\ndescription: how we deploy\n---\nRun make deploy.\n"


def test_a_skills_folder_turned_into_a_symlink_is_a_removal_the_report_names(isolated: Cli, tmp_path: Path) -> None:
    make_workspace(isolated, ["- Decided to use PostgreSQL"], files={"skills/deploy/SKILL.md": SKILL})
    assert isolated.run("run", env=OFFLINE).exit_code == 0
    ws = isolated.workspace
    assert "skills/deploy/SKILL.md" in git(ws, "ls-files")
    elsewhere = tmp_path / "shared-skills"
    (ws / "skills").rename(elsewhere)
    (ws / "skills").symlink_to(elsewhere)
    isolated.run("append", "- Decided to use Redis")
    code, report = isolated.run_json("run", "--json", env=OFFLINE)
    assert code == 0, report
    assert report["notes"] == [
        "skills/deploy/SKILL.md is committed as removed: skills is a symbolic link, and dream-memory "
        "versions only what lies in the workspace itself, as git does (its last version stays in the "
        "git history)"
    ]
    assert "skills/deploy/SKILL.md" not in git(ws, "ls-files")
    assert git(ws, "show", "HEAD~2:skills/deploy/SKILL.md") == SKILL
    assert (elsewhere / "deploy/SKILL.md").read_text(encoding="utf-8") == SKILL
