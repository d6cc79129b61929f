"""Lines applied by `dream review accept` have a provenance note of their own: `dream why` on
them names the fact the held change carried and its history entry, instead of falling back to
key-word matching. Through the CLI, with the scripted model server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

HAND_LINE = "- Drinks tea every morning"
USER = "# User\n\n## Profile\n\n- Name: Ada\n" + HAND_LINE + "\n\n## Preferences\n\n- Editor: vim\n"
EDITS = [
    {"path": "USER.md", "old_text": "- Editor: vim", "new_text": "- Editor: vim\n- Uses Rust at work"},
    {"path": "USER.md", "old_text": HAND_LINE, "new_text": "- Drinks coffee every morning"},
]


def _respond(request: dict[str, Any]) -> Reply:
    if not request.get("tools"):
        return Reply("[USER] Uses Rust at work [from 2]\n[USER] Drinks coffee every morning (was tea) [from 1]")
    if any(m.get("role") == "tool" for m in request.get("messages") or []):
        return Reply("Done.")
    return Reply(tool_calls=[tool_call("edit_file", **e) for e in EDITS])


def _why(isolated: Cli, target: str) -> dict[str, Any]:
    result = isolated.run("why", target, "--json")
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _accepted(isolated: Cli) -> Path:
    ws = make_workspace(isolated, ["- The user switched from tea to coffee.", "- The user writes Rust at work."])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(USER, encoding="utf-8")
    with ScriptedLLMServer(responder=_respond) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "held", report
    [held] = report["held"]
    accepted = isolated.run("review", "accept", held["id"])
    assert accepted.exit_code == 0, accepted.output
    return ws


def test_a_line_accepted_in_review_names_its_fact_and_entry(isolated: Cli) -> None:
    """The accepted rewrite's line: `dream why` shows the accept commit, the fact the held change
    carried (coffee, cursor 1) and entry 1's content, with no "records no provenance" note; the
    note on the accept commit also says the hand-written line was replaced by that fact."""
    ws = _accepted(isolated)
    lines = (ws / "USER.md").read_text(encoding="utf-8").splitlines()
    number = lines.index("- Drinks coffee every morning") + 1
    why = _why(isolated, f"USER.md:{number}")
    assert why["subject"].startswith("dream: apply held ")
    assert why["kind"] == "dream" and why["note"] is None
    assert [f["text"] for f in why["facts"]] == ["Drinks coffee every morning (was tea)"]
    assert [(s["cursor"], s["content"]) for s in why["sources"]] == [(1, "- The user switched from tea to coffee.")]
    note = json.loads(git(ws, "notes", "--ref", "dream", "show", "HEAD"))
    assert [(r["text"], r["facts"]) for r in note["removed"]] == [(HAND_LINE, [1])]
    text = isolated.run("why", f"USER.md:{number}").stdout
    assert "fact 1  [USER] Drinks coffee every morning (was tea)  (entries: 1)" in text
    assert "source  entry 1" in text

    rust = _why(isolated, f"USER.md:{lines.index('- Uses Rust at work') + 1}")  # landed with its batch
    assert [s["cursor"] for s in rust["sources"]] == [2] and rust["subject"].startswith("dream: 1..2")
