"""A project's ignore rules keep memory out of the project's repository.

A workspace inside a project (agents/bot/ in a checkout) is versioned in the project's repository.
When the project ignores the workspace folder (`agents/` in its .gitignore), Dream used to commit
it there all the same, as `git add -f` would: the agent's USER.md went out with the next push.
Now such a workspace gets a repository of its own, and a memory file the project ignores (and
does not track) is refused with exit 2 before anything is committed. Only ignore files outside
the workspace count: nanobot's own `.gitignore` (`/*` and its four files) inside the workspace
never stops Dream.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dulwich.repo import Repo

from dream_memory.adapters.git.ignores import OuterIgnores

WORKSPACE = "agents/bot"
PATHS = ("agents/bot/USER.md", "agents/bot/memory/MEMORY.md", "agents/bot/skills/x/SKILL.md")
# Ignore files outside the workspace (a name ending in / is a folder), each judged by git too.
CASES = {
    "none": {},
    "the folder": {".gitignore": "agents/\n"},
    "the workspace by name": {".gitignore": "/agents/bot/\n"},
    "a file anywhere": {".gitignore": "USER.md\n"},
    "a folder anywhere": {".gitignore": "memory/\n"},
    "a glob": {".gitignore": "agents/**/*.md\n"},
    "a later negation": {".gitignore": "*.md\n!USER.md\n"},
    "no negation below an excluded folder": {".gitignore": "agents/\n!agents/bot/USER.md\n"},
    "contents then negation": {".gitignore": "agents/*\n!agents/bot/\n"},
    "a deeper file wins": {".gitignore": "*.md\n", "agents/.gitignore": "!*.md\n"},
    "relative to its folder": {"agents/.gitignore": "/bot/memory/\n"},
    "anchored elsewhere": {"agents/.gitignore": "/USER.md\n"},
    "info/exclude": {".git/info/exclude": "skills/\n"},
    "a comment and an escaped hash": {".gitignore": "# USER.md\n\\#x\n"},
}


def _project(root: Path, files: dict[str, str]) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel in PATHS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# x\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


@pytest.mark.parametrize("case", list(CASES))
def test_the_verdict_is_the_one_git_check_ignore_gives(tmp_path: Path, case: str, clean_env, monkeypatch) -> None:
    monkeypatch.setenv("HOME", clean_env["HOME"])
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path / "project"
    _project(root, CASES[case])
    with Repo(str(root)) as repo:
        ignores = OuterIgnores(root, root / ".git", WORKSPACE, repo.get_config_stack())
    for rel in (*PATHS, WORKSPACE):
        is_dir = rel == WORKSPACE
        git_says = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", "--no-index", "--", rel + ("/" if is_dir else "")],
            env=clean_env,
        ).returncode
        assert git_says in (0, 1)
        assert (ignores.rule_for(rel, is_dir=is_dir) is not None) == (git_says == 0), (case, rel)


def test_a_user_wide_ignore_file_counts_as_git_counts_it(tmp_path: Path, clean_env, monkeypatch) -> None:
    home = Path(clean_env["HOME"])
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "git" / "ignore").write_text("SKILL.md\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path / "project"
    _project(root, {})
    with Repo(str(root)) as repo:
        ignores = OuterIgnores(root, root / ".git", WORKSPACE, repo.get_config_stack())
    rule = ignores.rule_for("agents/bot/skills/x/SKILL.md")
    assert rule is not None and rule.pattern == "SKILL.md" and rule.source.endswith("git/ignore")
    assert ignores.rule_for("agents/bot/USER.md") is None


def test_the_workspaces_own_gitignore_is_not_read(tmp_path: Path, clean_env, monkeypatch) -> None:
    """nanobot's .gitignore ignores all but its four files: git would ignore skills/, Dream must not."""
    monkeypatch.setenv("HOME", clean_env["HOME"])
    root = tmp_path / "project"
    _project(root, {"agents/bot/.gitignore": "/*\n!USER.md\n"})
    with Repo(str(root)) as repo:
        ignores = OuterIgnores(root, root / ".git", WORKSPACE, repo.get_config_stack())
    assert ignores.rule_for("agents/bot/skills/x/SKILL.md") is None


def _git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    who = ["-c", "user.name=Someone", "-c", "user.email=someone@example.com"]
    return subprocess.run(["git", *who, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def _project_repo(root: Path, ignore: str, env: dict[str, str]) -> None:
    root.mkdir()
    _git(root, "init", "-q", "-b", "trunk", env=env)
    (root / "app.py").write_text("print('hi')\n", encoding="utf-8")
    (root / ".gitignore").write_text(ignore, encoding="utf-8")
    _git(root, "add", ".", env=env)
    _git(root, "commit", "-q", "-m", "project", env=env)


def test_a_workspace_the_project_ignores_gets_a_repository_of_its_own(tmp_path: Path, dream, clean_env) -> None:
    project = tmp_path / "project"
    _project_repo(project, "agents/\n", clean_env)
    ws = project / "agents" / "bot"

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert f"versioned in its own repository at {ws}" in init.stdout
    assert "the repository above ignores this folder" in init.stdout and ".gitignore: agents/" in init.stdout
    assert dream("append", "- [durable] User's name is Ada.", "--workspace", str(ws)).returncode == 0
    run = dream("run", "--model", "offline", "--json", "--workspace", str(ws))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "ok"

    # The project's repository holds none of it, and its git status is clean.
    assert _git(project, "log", "--format=%s", env=clean_env).split() == ["project"]
    assert _git(project, "status", "--porcelain", "--ignored=no", env=clean_env) == ""
    assert _git(project, "ls-files", env=clean_env).split() == [".gitignore", "app.py"]
    # The workspace's own does.
    subjects = _git(ws, "log", "--format=%s", env=clean_env).splitlines()
    assert subjects[-1] == "memory: init" and subjects[0].startswith("dream: ")
    assert "Ada" in _git(ws, "show", "HEAD:USER.md", env=clean_env)


def test_a_memory_file_the_project_ignores_is_refused_before_anything_is_committed(
    tmp_path: Path, dream, clean_env
) -> None:
    project = tmp_path / "project"
    _project_repo(project, "USER.md\n", clean_env)
    ws = project / "agents" / "bot"

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 2, init.stdout + init.stderr
    assert "agents/bot/USER.md is ignored by the repository" in init.stderr
    assert ".gitignore: USER.md" in init.stderr and "nothing was committed" in init.stderr
    assert "git init" in init.stderr and "add -f agents/bot/USER.md" in init.stderr
    assert _git(project, "log", "--format=%s", env=clean_env).split() == ["project"]
    assert _git(project, "ls-files", env=clean_env).split() == [".gitignore", "app.py"]

    # Tracked once by hand, it is the project's choice: Dream commits it from then on.
    _git(project, "add", "-f", "agents/bot/USER.md", env=clean_env)
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert "versioned in the enclosing repository" in init.stdout
    assert "agents/bot/USER.md" in _git(project, "ls-files", env=clean_env).split()
