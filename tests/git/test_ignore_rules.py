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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    "the folder, then its contents back": {".gitignore": "agents/bot/\n!agents/bot/**\n"},
    "a folder-only rule, then the folder back": {".gitignore": "agents/*/\n!agents/bot/\n"},
    "the folder's contents": {".gitignore": "agents/bot/*\n"},
    "CRLF lines": {".gitignore": "USER.md\r\nskills/\r\n"},
    "a negated anchored file": {".gitignore": "agents/bot/*.md\n!/agents/bot/USER.md\n"},
    "info/exclude under the project's negation": {".git/info/exclude": "*.md\n", ".gitignore": "!SKILL.md\n"},
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
    for rel in PATHS:
        git_says = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", "--no-index", "--", rel], env=clean_env
        ).returncode
        assert git_says in (0, 1)
        assert (ignores.rule_for(rel) is not None) == (git_says == 0), (case, rel)


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


def _ignores(root: Path) -> OuterIgnores:
    with Repo(str(root)) as repo:
        return OuterIgnores(root, Path(repo.commondir()), WORKSPACE, repo.get_config_stack())


def test_the_workspaces_own_gitignore_never_makes_a_file_ignored(tmp_path: Path, clean_env, monkeypatch) -> None:
    """nanobot's .gitignore ignores all but its four files: git would ignore skills/, Dream must
    not. A `!` line in it still counts, as it does for git."""
    monkeypatch.setenv("HOME", clean_env["HOME"])
    root = tmp_path / "project"
    _project(root, {"agents/bot/.gitignore": "/*\n!USER.md\n!memory/\n", ".gitignore": "memory/\n"})
    ignores = _ignores(root)
    assert ignores.rule_for("agents/bot/skills/x/SKILL.md") is None
    assert ignores.rule_for("agents/bot/memory/MEMORY.md") is None  # git agrees: the workspace's ! wins
    rc = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "agents/bot/memory/MEMORY.md"], env=clean_env)
    assert rc.returncode == 1


def test_ignore_files_that_are_links_folders_or_relative_are_read_as_git_reads_them(
    tmp_path: Path, clean_env, monkeypatch
) -> None:
    """git follows a symlinked user-wide file (dotfile managers link them), resolves a relative
    core.excludesFile from the work tree's top, and goes on without a .gitignore that is a folder."""
    home = Path(clean_env["HOME"])
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (home / "dotfiles").mkdir(parents=True, exist_ok=True)
    (home / "dotfiles" / "ignore").write_text("SKILL.md\n", encoding="utf-8")
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "git" / "ignore").symlink_to(home / "dotfiles" / "ignore")
    root = tmp_path / "project"
    _project(root, {})
    (root / "agents" / ".gitignore").mkdir()
    rule = _ignores(root).rule_for("agents/bot/skills/x/SKILL.md")
    assert rule is not None and rule.pattern == "SKILL.md"

    subprocess.run(["git", "-C", str(root), "config", "core.excludesFile", ".myignore"], check=True, env=clean_env)
    (root / ".myignore").write_text("USER.md\n", encoding="utf-8")
    rule = _ignores(root).rule_for("agents/bot/USER.md")
    assert rule is not None and rule.source == str(root / ".myignore")
    assert _ignores(root).rule_for("agents/bot/skills/x/SKILL.md") is None  # the user-wide file is replaced


def test_a_linked_worktree_reads_the_common_info_exclude(tmp_path: Path, dream, clean_env) -> None:
    project = tmp_path / "project"
    _project_repo(project, "", clean_env)
    _git(project, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt", env=clean_env)
    with (project / ".git" / "info" / "exclude").open("a", encoding="utf-8") as f:
        f.write("agents/\n")
    init = dream("init", "--workspace", str(tmp_path / "wt" / "agents" / "bot"))
    assert init.returncode == 0, init.stderr
    assert "versioned in its own repository" in init.stdout and "info/exclude: agents/" in init.stdout
    assert _git(project, "log", "--all", "--format=%s", env=clean_env).split() == ["project"]


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


@pytest.mark.parametrize("rule", ["agents/", "/agents/bot", "agents/bot/\n!agents/bot/**"])
def test_a_workspace_the_project_ignores_gets_a_repository_of_its_own(
    tmp_path: Path, dream, clean_env, rule: str
) -> None:
    project = tmp_path / "project"
    _project_repo(project, rule + "\n", clean_env)
    ws = project / "agents" / "bot"

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert f"versioned in its own repository at {ws}" in init.stdout
    assert "the repository above ignores this folder" in init.stdout
    assert f".gitignore: {rule.splitlines()[0]}" in init.stdout
    assert _git(project, "check-ignore", "agents/bot/USER.md", env=clean_env).strip() == "agents/bot/USER.md"
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


@pytest.mark.parametrize(("rule", "refused"), [("USER.md", "USER.md"), ("agents/bot/*", "SOUL.md (and 3 more")])
def test_a_memory_file_the_project_ignores_is_refused_before_anything_is_committed(
    tmp_path: Path, dream, clean_env, rule: str, refused: str
) -> None:
    """A file rule, or a rule on what the folder holds (the folder itself stays in sight of the
    project's git, so a repository of its own there would show in its status)."""
    project = tmp_path / "project"
    _project_repo(project, rule + "\n", clean_env)
    ws = project / "agents" / "bot"

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 2, init.stdout + init.stderr
    assert f"agents/bot/{refused}" in init.stderr and "is ignored by the repository" in init.stderr
    assert f".gitignore: {rule})" in init.stderr and "nothing was committed" in init.stderr
    assert "git init" in init.stderr and f"un-ignore it in {project / '.gitignore'}" in init.stderr
    assert _git(project, "log", "--format=%s", env=clean_env).split() == ["project"]
    assert _git(project, "ls-files", env=clean_env).split() == [".gitignore", "app.py"]

    doctor = dream("doctor", "--workspace", str(ws))
    assert "PROBLEM  git" in doctor.stdout and "the next commit stops: agents/bot/" in doctor.stdout, doctor.stdout
    if rule != "USER.md":
        return
    # Tracked once by hand, it is the project's choice: Dream commits it from then on.
    _git(project, "add", "-f", "agents/bot/USER.md", env=clean_env)
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert "versioned in the enclosing repository" in init.stdout
    assert "agents/bot/USER.md" in _git(project, "ls-files", env=clean_env).split()


def test_a_project_that_ignores_memory_it_already_holds_refuses_new_files_naming_each(
    tmp_path: Path, dream, clean_env
) -> None:
    """Versioned in the project first, then ignored there: Dream's next new files are refused, all
    of them named, with the two ways out; nothing is written or committed, the cursor stays."""
    project = tmp_path / "project"
    _project_repo(project, "", clean_env)
    ws = project / "agents" / "bot"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    (project / ".gitignore").write_text("agents/\n", encoding="utf-8")
    _git(project, "commit", "-q", "-am", "ignore agents", env=clean_env)
    head = _git(project, "rev-parse", "HEAD", env=clean_env)
    for text in ("- [entity] Acme: a client of the user.", "- [entity] Globex: a supplier of the user."):
        assert dream("append", text, "--workspace", str(ws)).returncode == 0

    run = dream("run", "--model", "offline", "--json", "--workspace", str(ws))
    assert run.returncode == 2, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["status"] == "failed" and report["cursor_after"] == 0
    assert [(b["outcome"], b["commit"]) for b in report["batches"]] == [("failed", None)]
    error = report["errors"][0]
    assert "is ignored by the repository" in error and "more: " in error and "agents/bot/" in error
    assert "a `!` line after `agents/`" in run.stderr and "rm -r -q --cached agents/bot" in run.stderr
    assert _git(project, "rev-parse", "HEAD", env=clean_env) == head
    assert not (ws / "entities").exists()


_FRAGMENTS = ["agents", "bot", "*", "**", "USER.md", "*.md", "memory", "skills", "x", "S*"]
_LINE = st.tuples(
    st.sampled_from(["", "!", "/"]),
    st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=3),
    st.sampled_from(["", "/"]),
).map(lambda t: t[0] + "/".join(t[1]) + t[2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(top=st.lists(_LINE, max_size=4), below=st.lists(_LINE, max_size=3))
def test_random_rules_get_the_verdicts_git_gives(
    tmp_path_factory, clean_env, monkeypatch, top: list[str], below: list[str]
) -> None:
    monkeypatch.setenv("HOME", clean_env["HOME"])
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path_factory.mktemp("fuzz") / "project"
    _project(root, {".gitignore": "\n".join(top) + "\n", "agents/.gitignore": "\n".join(below) + "\n"})
    said = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--", *PATHS],
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert said.returncode in (0, 1), said.stderr
    ignores = OuterIgnores(root, root / ".git", WORKSPACE, _config(root))
    assert {p for p in PATHS if ignores.rule_for(p) is not None} == set(said.stdout.split()), (top, below)


def _config(root: Path):  # type: ignore[no-untyped-def]
    with Repo(str(root)) as repo:
        return repo.get_config_stack()
