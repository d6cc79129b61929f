"""A `.git` that cannot be opened: a `.git/config` that does not parse (a line `[core`), a `.git`
FILE without its `gitdir:` line, or one naming a repository folder that is gone. Every command
that opens the repository (run, status, log, restore, blame, search --at) stops with one line
naming the path and what is wrong with it, and a hint to repair it: exit 1, as a damaged
repository is (docs/reference/files.md, "Repository states"), never a traceback.

What a user would notice if this failed: a dulwich traceback (`ValueError: expected trailing ]`)
from every command; or, for a `.git` file naming a folder that is gone, "no versions yet" from
`dream log` and `dream status`, as if the workspace had never been versioned, while `dream run`
tried to write its commit into that missing folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.core import layout
from dream_memory.testing.hostile import Outcome, cli


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}


def _config_unparsable(ws: Path, tmp_path: Path) -> tuple[str, str]:
    with (ws / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write("[core\n")
    return f"{ws / '.git' / 'config'} does not parse", "git config --list --file"


def _gitfile_without_gitdir(ws: Path, tmp_path: Path) -> tuple[str, str]:
    shutil.move(ws / ".git", tmp_path / "moved-git")
    (ws / ".git").write_text("this is not a gitdir line\n", encoding="utf-8")
    return f"{ws / '.git'} is a file without the `gitdir: <path>` line", "gitdir"


def _gitfile_naming_a_missing_folder(ws: Path, tmp_path: Path) -> tuple[str, str]:
    shutil.rmtree(ws / ".git")
    gone = tmp_path / "gone" / "repo.git"
    (ws / ".git").write_text(f"gitdir: {gone}\n", encoding="utf-8")
    return f"{ws / '.git'} names the repository {gone}, which does not exist", "correct the path"


BREAKS: dict[str, Callable[[Path, Path], tuple[str, str]]] = {
    "config that does not parse": _config_unparsable,
    ".git file without gitdir": _gitfile_without_gitdir,
    ".git file naming a missing folder": _gitfile_naming_a_missing_folder,
}

COMMANDS = [
    ("status",),
    ("log",),
    ("restore",),
    ("blame", "USER.md"),
    ("search", "--at", "HEAD", "User"),
    ("run", "--model", "offline"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_broken_dot_git_is_a_one_line_error_naming_it(tmp_path: Path, case: str, command: tuple[str, ...]) -> None:
    ws = tmp_path / "ws"
    env = _env(tmp_path)

    def run(*args: str) -> Outcome:
        return cli(*args, "--workspace", str(ws), env=env)

    assert run("init").code == 0
    assert run("append", "- [durable] User lives in Lyon.").code == 0
    message, hint = BREAKS[case](ws, tmp_path)
    before = {p: (ws / p).read_bytes() for p in (layout.HISTORY, "USER.md", layout.DREAM_CURSOR)}
    dot_git = (ws / ".git").read_bytes() if (ws / ".git").is_file() else None

    outcome = run(*command)
    assert outcome.crash is None and "Traceback" not in outcome.err + outcome.out, outcome
    if command[0] == "run":
        assert outcome.code == 1, outcome
        report = json.loads(outcome.out)
        assert report["status"] == "failed" and report["commits"] == [], report
        assert message in report["errors"][0] and hint in report["errors"][0], report["errors"]
    else:
        assert outcome.refused(1), outcome
        assert message in outcome.err and "hint:" in outcome.err and hint in outcome.err, outcome.err
    assert "no versions yet" not in (outcome.out + outcome.err).lower()

    # Nothing was written: no new repository in place of the broken one, the memory untouched.
    assert {p: (ws / p).read_bytes() for p in before} == before
    if dot_git is not None:
        assert (ws / ".git").is_file() and (ws / ".git").read_bytes() == dot_git
    assert not (tmp_path / "gone").exists()


def test_a_dot_git_file_naming_a_moved_repository_still_works(tmp_path: Path) -> None:
    """The check refuses only what is broken: a `.git` file naming (by a relative path) a
    repository moved elsewhere, as `git init --separate-git-dir` leaves it, opens as before."""
    ws = tmp_path / "ws"
    env = _env(tmp_path)

    def run(*args: str) -> Outcome:
        return cli(*args, "--workspace", str(ws), env=env)

    assert run("init").code == 0
    shutil.move(ws / ".git", tmp_path / "separate.git")
    (ws / ".git").write_text("gitdir: ../separate.git\n", encoding="utf-8")
    assert run("append", "- [durable] User lives in Lyon.").code == 0
    outcome = run("run", "--model", "offline")
    assert outcome.code == 0, outcome
    assert json.loads(outcome.out)["commits"], outcome.out
    assert run("log").code == 0 and run("status").code == 0
