"""A secret a model assembles from pieces, each harmless on its own, is redacted in the file it
makes. Before, the guard redacted each edit's own text: half a token per `edit_file` call, or a
private key's body in one call and its BEGIN and END lines in two more, landed whole in the
memory file, the commit and the report's diff, with `redactions` empty. An entity's name was not
redacted at all: it reached the provenance note in git and the report (found by an independent
hunt with a scripted model). A person's own lines are not Dream's to change and stay as they are.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.adapters.secrets import SecretScanner
from dream_memory.testing import build_workspace
from dream_memory.testing.canaries import CANARIES
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

Dream = Callable[..., subprocess.CompletedProcess[str]]
TOKEN = "ghp_" + "aB3dEfGh1jKlMn0pQrStUvWxYz0123456789"
PEM = next(c.value for c in CANARIES if c.kind == "private_key" and c.value.startswith("-----BEGIN RSA"))


def _run(dream: Dream, tmp_path: Path, replies: list[Reply], entry: str) -> tuple[Path, dict[str, object], str]:
    """One `dream run` of a scripted model over HTTP; the workspace, the report, and every byte
    git holds afterwards (objects of every ref, notes included, and messages)."""
    ws = build_workspace(tmp_path / "ws", history=[entry])
    with ScriptedLLMServer([*replies, Reply("Done.")]) as server:
        run = dream("run", "-w", str(ws), "--json", env=server.write_config(tmp_path / "dream.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    git = subprocess.run(["git", "-C", str(ws), "log", "--all", "-p"], capture_output=True, text=True, check=True)
    return ws, json.loads(run.stdout), run.stdout + git.stdout


def _files(ws: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in ws.rglob("*.md") if ".git" not in p.parts)


def test_a_token_sent_in_two_halves_is_redacted_in_the_file_commit_and_report(dream: Dream, tmp_path: Path) -> None:
    head, tail = TOKEN[:20], TOKEN[20:]
    edits = Reply(
        tool_calls=[
            tool_call(
                "edit_file",
                path="USER.md",
                old_text="## Preferences\n",
                new_text=f"## Preferences\n\n- User's GitHub account is alice ({tail})\n",
            ),
            tool_call("edit_file", path="USER.md", old_text="alice (", new_text=f"alice ({head}"),
        ]
    )
    facts = Reply("[USER] User's GitHub account is alice. [from 1]")
    ws, report, everything = _run(dream, tmp_path, [facts, edits], "User's GitHub account is alice.")
    assert TOKEN not in _files(ws) and TOKEN not in everything
    assert "alice ([REDACTED:github_token])" in (ws / "USER.md").read_text(encoding="utf-8")
    assert report["redactions"] == {"github_token": 1}


def test_a_private_key_written_body_first_then_its_begin_and_end_lines_is_redacted(
    dream: Dream, tmp_path: Path
) -> None:
    lines = PEM.split("\n")
    begin, body, end = lines[0], lines[1:-1], lines[-1]
    calls = [
        tool_call("write_file", path="entities/key.md", content="# Key\n\n" + "\n".join(body) + "\n"),
        tool_call("edit_file", path="entities/key.md", old_text="# Key\n\n", new_text=f"# Key\n\n{begin}\n"),
        tool_call("edit_file", path="entities/key.md", old_text=body[-1] + "\n", new_text=f"{body[-1]}\n{end}\n"),
    ]
    facts = Reply("[ENTITY] key: the deploy server's key [from 1]")
    ws, report, everything = _run(dream, tmp_path, [facts, Reply(tool_calls=calls)], "the deploy key is on the box")
    written = (ws / "entities/key.md").read_text(encoding="utf-8")
    assert written == "# Key\n\n[REDACTED:private_key]\n", written
    for line in lines:
        assert line not in everything
    assert report["redactions"] == {"private_key": 1}


def test_an_entity_named_by_a_token_is_redacted_in_the_note_and_the_report(dream: Dream, tmp_path: Path) -> None:
    facts = Reply(f"[USER] User's friend is Bob. [from 1]\n[ENTITY] {TOKEN}: is the user's friend Bob [from 1]")
    edit = tool_call(
        "edit_file", path="USER.md", old_text="## Preferences\n", new_text="## Preferences\n\n- User's friend is Bob.\n"
    )
    ws, report, everything = _run(dream, tmp_path, [facts, Reply(tool_calls=[edit])], "User's friend is Bob.")
    assert TOKEN not in everything and TOKEN not in _files(ws)
    notes = subprocess.run(["git", "-C", str(ws), "log", "--notes=*", "--format=%N"], capture_output=True, text=True)
    assert "[REDACTED:github_token]" in notes.stdout + json.dumps(report)


def test_a_persons_own_line_stays_as_it_is_when_dream_edits_beside_it(dream: Dream, tmp_path: Path) -> None:
    """The person keeps a token in USER.md (their file, their choice): Dream adding a line below
    it neither rewrites nor counts it."""
    ws = build_workspace(tmp_path / "ws", history=["User likes tea."])
    user = ws / "USER.md"
    own = f"- My CI token: {TOKEN}\n"
    user.write_text(user.read_text(encoding="utf-8").replace("## Preferences\n", f"## Preferences\n\n{own}"))
    edit = tool_call("edit_file", path="USER.md", old_text=own, new_text=own + "- User likes tea.\n")
    with ScriptedLLMServer([Reply("[USER] User likes tea. [from 1]"), Reply(tool_calls=[edit]), Reply("Done.")]) as s:
        run = dream("run", "-w", str(ws), "--json", env=s.write_config(tmp_path / "dream.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{own}- User likes tea.\n" in user.read_text(encoding="utf-8")
    assert json.loads(run.stdout)["redactions"] == {}


def test_the_tail_of_a_key_without_its_begin_line_is_redacted() -> None:
    """A key cut across two history entries: the second holds its last lines and its END line."""
    lines = PEM.split("\n")
    tail = "the rest:\n" + "\n".join(lines[-4:]) + "\nthanks"
    clean, counts = SecretScanner().redact(tail)
    assert clean == "the rest:\n[REDACTED:private_key]\nthanks" and counts == {"private_key": 1}


def test_a_value_written_below_a_persons_password_label_is_redacted(dream: Dream, tmp_path: Path) -> None:
    """The person's line `- Home Wi-Fi password:` stays; the model writes the value on the line
    below it. Read alone, the new line held no keyword: it was committed in clear."""
    ws = build_workspace(tmp_path / "ws", history=["The wifi password is on the router sticker."])
    user = ws / "USER.md"
    own = "- Home Wi-Fi password:\n"
    user.write_text(user.read_text(encoding="utf-8").replace("## Preferences\n", f"## Preferences\n\n{own}"))
    edit = tool_call("edit_file", path="USER.md", old_text=own, new_text=own + "  Tr0ub4dor&3xq\n")
    facts = Reply("[USER] User's Wi-Fi password is on the router sticker. [from 1]")
    with ScriptedLLMServer([facts, Reply(tool_calls=[edit]), Reply("Done.")]) as server:
        run = dream("run", "-w", str(ws), "--json", env=server.write_config(tmp_path / "dream.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    text = user.read_text(encoding="utf-8")
    assert "Tr0ub4dor&3xq" not in text and own in text
    assert json.loads(run.stdout)["redactions"] == {"password": 1}
