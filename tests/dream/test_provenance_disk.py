"""`dream why` and `dream blame` against the file on disk: uncommitted edits are said, a line is
mapped through them, a file or line not committed yet is named as such, and paths that land
inside the workspace (absolute, or relative to the current folder) are accepted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dream_helpers import Cli, make_workspace

OFFLINE = {"DREAM_MODEL": "offline"}
ENTRIES = ["- [durable] User lives in Lyon and works as a baker."]


@pytest.fixture
def dreamt(isolated: Cli) -> Cli:
    make_workspace(isolated, ENTRIES)
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0, report
    return isolated


def _lyon_line(cli: Cli) -> int:
    result = cli.run("blame", "USER.md", "--json")
    assert result.exit_code == 0, result.output
    return next(line["line"] for line in json.loads(result.stdout) if "Lyon" in line["text"])


def test_why_maps_a_disk_line_through_uncommitted_edits_and_warns(dreamt: Cli) -> None:
    """A line inserted by hand above the Lyon line shifts it down on disk: `dream why` at the
    disk's number explains the Lyon line, warns on stderr and in --json's `warning`."""
    committed = _lyon_line(dreamt)
    user = dreamt.workspace / "USER.md"
    lines = user.read_text().split("\n")
    lines.insert(committed - 1, "- Name: Ada")
    user.write_text("\n".join(lines))
    result = dreamt.run("why", f"USER.md:{committed + 1}", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert "Lyon" in found["text"]
    assert "uncommitted edits" in found["warning"] and "uncommitted edits" in result.stderr
    blame = dreamt.run("blame", "USER.md")
    assert blame.exit_code == 0 and "uncommitted edits" in blame.stderr


def test_a_line_only_on_disk_is_not_committed_yet(dreamt: Cli) -> None:
    """A line appended by hand: `dream why` says it is not committed yet (exit 2), never that
    the file has no such line or another line's origin."""
    user = dreamt.workspace / "USER.md"
    n = len(user.read_text().split("\n")[:-1])
    user.write_text(user.read_text() + "- Hand-written on disk only\n")
    result = dreamt.run("why", f"USER.md:{n + 1}")
    assert result.exit_code == 2
    assert "not committed yet" in result.stderr


def test_blame_of_an_uncommitted_file_says_not_committed_yet(dreamt: Cli) -> None:
    """entities/bob.md written but never committed: blame says it is not committed yet."""
    (dreamt.workspace / "entities").mkdir(exist_ok=True)
    (dreamt.workspace / "entities" / "bob.md").write_text("# Bob\n")
    result = dreamt.run("blame", "entities/bob.md")
    assert result.exit_code == 1
    assert "not committed yet" in result.stderr and "not a file in commit" not in result.stderr


def test_paths_inside_the_workspace_are_accepted_and_outside_ones_refused(dreamt: Cli, tmp_path: Path) -> None:
    """An absolute path into the workspace, and one relative to the current folder that lands
    in it, explain the line; an absolute path outside it is refused as outside the workspace."""
    line = _lyon_line(dreamt)
    absolute = dreamt.run("why", f"{dreamt.workspace / 'USER.md'}:{line}", "--json")
    assert absolute.exit_code == 0, absolute.output
    assert "Lyon" in json.loads(absolute.stdout)["text"]
    here = os.getcwd()
    os.chdir(dreamt.workspace.parent)
    try:
        relative = dreamt.run("why", f"{dreamt.workspace.name}/USER.md:{line}", "--json")
    finally:
        os.chdir(here)
    assert relative.exit_code == 0, relative.output
    assert "Lyon" in json.loads(relative.stdout)["text"]
    outside = tmp_path / "elsewhere" / "USER.md"
    outside.parent.mkdir()
    outside.write_text("# User\n")
    refused = dreamt.run("why", f"{outside}:1")
    assert refused.exit_code == 2 and "outside the workspace" in refused.stderr


def test_blame_of_a_crlf_file_shows_no_carriage_returns(dreamt: Cli) -> None:
    """A memory file with Windows line endings (committed as such): `dream blame` (a real
    process) shows each line's text without a trailing `\\x0d`; --json keeps the stored bytes,
    the CR included."""
    user = dreamt.workspace / "USER.md"
    user.write_bytes(user.read_bytes().replace(b"\n", b"\r\n"))
    dreamt.run("append", "- [durable] User prefers tea.")
    code, report = dreamt.run_json("run", env=OFFLINE)
    assert code == 0, report
    shown = dreamt.subprocess("dream", "blame", "USER.md")
    assert shown.returncode == 0, shown.stderr
    assert "Lyon" in shown.stdout
    assert "\\x0d" not in shown.stdout and "\r" not in shown.stdout, shown.stdout
    exact = json.loads(dreamt.subprocess("dream", "blame", "USER.md", "--json").stdout)
    assert any(line["text"].endswith("\r") and "Lyon" in line["text"] for line in exact)


def test_why_usage_shows_both_forms(dreamt: Cli) -> None:
    """`dream why --help` (a real process) names both ways to ask: a line by PATH:LINE, or every
    line holding a text with --text."""
    shown = dreamt.subprocess("dream", "why", "--help")
    assert shown.returncode == 0, shown.stderr
    usage = shown.stdout.splitlines()[0]
    assert "PATH:LINE" in usage and "--text TEXT" in usage, usage
