"""Which git filter a memory file has, judged as git's own `git check-attr filter` judges it:
the work tree's .gitattributes from the top down (deeper files and later lines win),
.git/info/attributes over them, and [attr] macros (git-crypt's `[attr]crypt filter=git-crypt`),
which dulwich's reader does not expand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dream_memory.adapters.git.attributes import filter_driver

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
    assert filter_driver(repo, repo / ".git", PATH.encode()) == expected, said
