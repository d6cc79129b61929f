"""Which git filter a memory file has, judged as git's own `git check-attr filter` judges it:
the work tree's .gitattributes from the top down (deeper files and later lines win),
.git/info/attributes over them, and [attr] macros (git-crypt's `[attr]crypt filter=git-crypt`),
which dulwich's reader does not expand."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dream_memory.adapters.git.attributes import Attributes

PATH = "bot/memory/MEMORY.md"
CASES = {
    "none": {},
    "top": {".gitattributes": "bot/memory/MEMORY.md filter=crypt\n"},
    "basename anywhere": {".gitattributes": "MEMORY.md filter=crypt diff=crypt\n"},
    "a deeper file wins": {".gitattributes": "*.md filter=crypt\n", "bot/.gitattributes": "*.md -filter\n"},
    "a later line wins": {".gitattributes": "*.md filter=crypt\nMEMORY.md filter=lfs\n"},
    "unset": {".gitattributes": "*.md filter=crypt\n*.md !filter\n"},
    "a macro": {".gitattributes": "[attr]secret filter=crypt diff=crypt\nbot/** secret\n"},
    "a macro in a subfolder is ignored": {"bot/.gitattributes": "[attr]secret filter=crypt\n*.md secret\n"},
    "info/attributes wins": {".gitattributes": "*.md filter=crypt\n", ".git/info/attributes": "*.md -filter\n"},
    "relative to its folder": {"bot/memory/.gitattributes": "MEMORY.md filter=crypt\n"},
    "anchored elsewhere": {"bot/.gitattributes": "/MEMORY.md filter=crypt\n"},
    "binary is no filter": {".gitattributes": "*.md binary\n"},
    "a folder named .gitattributes": {"bot/.gitattributes/": ""},
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_filter_is_the_one_git_check_attr_names(tmp_path: Path, case: str) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / PATH).parent.mkdir(parents=True)
    (repo / PATH).write_text("# Memory\n", encoding="utf-8")
    for name, text in CASES[case].items():
        if name.endswith("/"):
            (repo / name).mkdir(parents=True)
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    said = subprocess.run(
        ["git", "-C", str(repo), "check-attr", "filter", "--", PATH], capture_output=True, text=True, check=True
    ).stdout.strip()
    value = said.rsplit(": ", 1)[1]
    expected = None if value in ("unspecified", "unset", "set") else value.encode()
    assert Attributes(repo, repo / ".git").filter_of(PATH.encode()) == expected, said


def _filter_by_git(repo: Path, path: str, env: dict[str, str]) -> str:
    """`git check-attr filter -- PATH`: git's own verdict, as it prints it."""
    return subprocess.run(
        ["git", "-C", str(repo), "check-attr", "filter", "--", path],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


@pytest.mark.parametrize("where", ["xdg", "core.attributesFile"])
def test_the_user_wide_attributes_file_counts_below_the_repositorys(tmp_path: Path, dream, clean_env, where) -> None:
    """git reads ~/.config/git/attributes (or core.attributesFile) under every repository's own
    files: a filter set there ran on `git add`, never on Dream's commits, which held plaintext."""
    home = Path(clean_env["HOME"])
    if where == "xdg":
        (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
        user_file = home / ".config" / "git" / "attributes"
    else:
        user_file = home / "my-attributes"
        subprocess.run(
            ["git", "config", "--global", "core.attributesFile", "~/my-attributes"], env=clean_env, check=True
        )
    user_file.write_text("USER.md filter=crypt\n", encoding="utf-8")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=clean_env)
    (repo / "bot").mkdir()
    (repo / "bot" / "USER.md").write_text("# User\n", encoding="utf-8")
    said = _filter_by_git(repo, "bot/USER.md", clean_env)
    assert said.strip().endswith(": crypt"), said
    init = dream("init", "--workspace", str(repo / "bot"))
    assert init.returncode == 2, init.stdout + init.stderr
    # The file that set it, not the repository's .gitattributes, which does not exist.
    assert f"USER.md has the git filter 'crypt' ({user_file})" in " ".join(init.stderr.split())
    assert f"`bot/USER.md -filter` at the end of {user_file}" in " ".join(init.stderr.split())

    # The hint, followed, works: git and Dream agree the filter is unset.
    with user_file.open("a", encoding="utf-8") as f:
        f.write("bot/USER.md -filter\n")
    said = _filter_by_git(repo, "bot/USER.md", clean_env)
    assert said.strip().endswith(": unset"), said
    init = dream("init", "--workspace", str(repo / "bot"))
    assert init.returncode == 0, init.stdout + init.stderr


def test_an_empty_xdg_config_home_reads_as_unset(tmp_path: Path, monkeypatch) -> None:
    """git reads ~/.config/git/attributes when XDG_CONFIG_HOME is empty; the path dulwich made of
    it (git/attributes, relative) missed the user's filter and read a file of the work tree."""
    from dulwich.config import StackedConfig

    from dream_memory.adapters.git.ignores import user_wide_file

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    found = user_wide_file(StackedConfig([]), b"attributesFile", "attributes", tmp_path / "repo")
    assert found == tmp_path / "home" / ".config" / "git" / "attributes"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert (
        user_wide_file(StackedConfig([]), b"excludesFile", "ignore", tmp_path / "repo")
        == tmp_path / "xdg" / "git" / "ignore"
    )


def test_an_unreadable_user_wide_attributes_file_is_gone_without(tmp_path: Path) -> None:
    """git warns and goes on; it used to stop every commit (a loop stands in for no permission)."""
    loop = tmp_path / "attributes"
    loop.symlink_to(loop)
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    assert Attributes(repo, repo / ".git", loop).filter_of(PATH.encode()) is None


@pytest.mark.parametrize("source", ["ws/.gitattributes", ".gitattributes", ".git/info/attributes"])
def test_the_hint_of_a_filter_refusal_works_in_the_file_it_names(tmp_path: Path, dream, clean_env, source: str) -> None:
    """The refusal names the file that set the filter and a line to add at its end. For a
    .gitattributes in a subfolder the line's pattern was the path from the repository's top,
    which git reads from that subfolder: following the hint changed nothing (found by a review)."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=clean_env)
    (repo / "ws").mkdir()
    rules = repo / source
    rules.parent.mkdir(parents=True, exist_ok=True)
    rules.write_text("*.md filter=crypt\n", encoding="utf-8")
    refused = dream("init", "--workspace", str(repo / "ws"))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.split())
    match = re.search(r"a line `(?P<line>[^`]+)` at the end of (?P<file>\S+?)\)", said)
    assert match and Path(match["file"]) == rules, said

    refused_file = re.search(r"error: (\S+) has the git filter", said)
    assert refused_file, said
    with rules.open("a", encoding="utf-8") as f:
        f.write(match["line"] + "\n")
    check = _filter_by_git(repo, f"ws/{refused_file[1]}", clean_env)
    assert check.strip().endswith(": unset"), (match["line"], check)
