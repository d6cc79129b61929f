"""A memory file an editor rewrote with other line ends (CRLF) is a hand edit like any other: its
own `memory: manual edits` commit, never a part of Dream's. Riding inside Dream's commit, the
rewrite made every line of the file Dream's for blame and the write policy, so a later batch
replaced a line a person wrote without holding it for review (found by an adversarial review).
Blame reads a line as the same line whatever its line end, so that commit takes no line from
whoever wrote it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_helpers import git

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]

USER = "# User\n\n## Profile\n\n- User lives in Lyon\n\n## Preferences\n\n- Name: Ada\n"


def _run(dream: Dream, ws: Path, entry: str) -> dict[str, object]:
    assert dream("append", "-w", str(ws), entry).returncode == 0
    proc = dream("run", "-w", str(ws), "--model", "offline", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    return report


def test_a_crlf_rewrite_is_committed_as_a_hand_edit_and_the_persons_lines_stay_held(
    dream: Dream, tmp_path: Path
) -> None:
    ws = build_workspace(tmp_path / "ws", files={"USER.md": USER})
    _run(dream, ws, "- [durable] User prefers dark mode")
    user = ws / "USER.md"
    user.write_bytes(user.read_bytes().replace(b"\n", b"\r\n"))

    report = _run(dream, ws, "- [durable] User prefers tabs")
    sha = report["manual_edits_commit"]
    assert isinstance(sha, str)
    assert git(ws, "show", "--name-only", "--format=%s", sha).split() == ["memory:", "manual", "edits", "USER.md"]
    dream_commit = git(ws, "log", "-1", "--format=%H", "--grep=^dream:").strip()
    assert git(ws, "show", "--numstat", "--format=", dream_commit).split()[:2] == ["1", "0"]  # its own line only

    blame = dream("blame", "-w", str(ws), "USER.md", "--json")
    lines = {row["text"].rstrip("\r"): row for row in json.loads(blame.stdout)}
    assert lines["- User lives in Lyon"]["kind"] != "dream"

    held = _run(dream, ws, "- [correction] User lives in Porto (was Lyon)")
    assert held["held"], held
    assert b"- User lives in Lyon\r\n" in user.read_bytes()


def test_why_shows_a_crlf_line_without_its_carriage_return(dream: Dream, tmp_path: Path) -> None:
    """`dream why` printed a literal `\\x0d` at the end of every CRLF line; blame's text does not."""
    ws = build_workspace(tmp_path / "ws", files={"USER.md": USER})
    user = ws / "USER.md"
    _run(dream, ws, "- [durable] User prefers dark mode")
    user.write_bytes(user.read_bytes().replace(b"\n", b"\r\n"))
    _run(dream, ws, "- [durable] User prefers tabs")
    shown = dream("why", "-w", str(ws), "USER.md:5")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "USER.md:5  - User lives in Lyon"
    exact = json.loads(dream("why", "-w", str(ws), "USER.md:5", "--json").stdout)
    assert exact["text"] == "- User lives in Lyon\r"


def test_a_crlf_file_reads_on_screen_without_a_literal_carriage_return(dream: Dream, tmp_path: Path) -> None:
    """`dream context` and `dream review show` printed a CRLF file (a Windows editor's) with a
    literal `\\x0d` at the end of every line: the terminal guard escaped each carriage return. A
    carriage return that ends a line is now printed as it is; one inside a line, which would let the
    text after it print over the text before, is still shown as an escape."""
    ws = build_workspace(tmp_path / "ws", files={"USER.md": USER})
    user = ws / "USER.md"
    _run(dream, ws, "- [durable] User prefers dark mode")
    user.write_bytes(user.read_bytes().replace(b"\n", b"\r\n").replace(b"Name: Ada", b"Name: Ada\rEve"))
    held = _run(dream, ws, "- [correction] User lives in Porto (was Lyon)")
    assert held["held"], held

    context = dream("context", "-w", str(ws))
    assert context.returncode == 0, context.stderr
    assert "- User lives in Lyon\n" in context.stdout  # CRLF (the capture reads line ends as \n)
    assert "\\x0d" not in context.stdout.replace("Ada\\x0dEve", "")
    assert "Ada\\x0dEve" in context.stdout and "Ada\rEve" not in context.stdout

    listed = json.loads(dream("review", "-w", str(ws), "--json").stdout)
    shown = dream("review", "show", listed["changes"][0]["id"], "-w", str(ws))
    assert shown.returncode == 0, shown.stderr
    assert "Lyon" in shown.stdout and "Porto" in shown.stdout
    assert "\\x0d" not in shown.stdout.replace("Ada\\x0dEve", ""), shown.stdout
