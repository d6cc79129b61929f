"""A pinned section and the placement rules: a fact whose section is pinned goes under the next
fitting section that is not, with the offline engine and with the `facts` edit protocol, so the
batch lands instead of failing three times and being set aside; the pinned section is untouched."""

from __future__ import annotations

import json
from typing import Any

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

PIN = {"files": {"USER.md": {"sections": {"Profile": {"pin": True}}}}}


def _profile(text: str) -> str:
    start = text.index("## Profile")
    return text[start : text.index("\n## ", start + 1)]


def test_the_offline_engine_files_a_fact_of_a_pinned_section_under_another_one(isolated: Cli) -> None:
    """USER.md's Profile pinned, `--model offline`: "User lives in Oslo." (a Profile fact) lands in
    another section of USER.md in one run, exit 0, one batch commit; Profile is as it was and
    nothing is set aside."""
    ws = make_workspace(isolated, ["- [durable] User lives in Oslo."])
    assert isolated.run("init").exit_code == 0
    config = isolated.home / "dream.json"
    config.write_text(json.dumps({"agents": {"defaults": {"dream": {"writePolicy": PIN}}}}), encoding="utf-8")
    isolated.env["DREAM_CONFIG"] = str(config)
    profile = _profile((ws / "USER.md").read_text(encoding="utf-8"))

    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0, report
    assert [b["outcome"] for b in report["batches"]] == ["committed"] and report["set_aside"] == []
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- User lives in Oslo." in text
    assert _profile(text) == profile
    assert git(ws, "log", "-1", "--format=%s").startswith("dream: 1..1: USER.md")


def test_the_facts_protocol_files_a_fact_of_a_pinned_section_under_another_one(isolated: Cli) -> None:
    """The same with a real model on `editProtocol: facts` (the placement rules edit): the refused
    edit of Profile is retried in another section, the batch commits, and the report counts both
    edits (the refused one and the one that landed)."""
    ws = make_workspace(isolated, ["- [durable] User lives in Oslo."])
    assert isolated.run("init").exit_code == 0
    profile = _profile((ws / "USER.md").read_text(encoding="utf-8"))

    def respond(request: dict[str, Any]) -> Reply:
        return Reply("[USER] User lives in Oslo.")

    with ScriptedLLMServer(responder=respond) as server:
        config = use_server(isolated, server)
        data = json.loads(config.read_text(encoding="utf-8"))
        data["modelPresets"]["scripted"]["editProtocol"] = "facts"
        data["agents"]["defaults"]["dream"] = {"writePolicy": PIN}
        config.write_text(json.dumps(data), encoding="utf-8")
        code, report = isolated.run_json("run")
    assert code == 0, report
    batch = report["batches"][0]
    assert batch["outcome"] == "committed" and batch["edit_protocol"] == "facts", batch
    assert batch["tool_calls"] == 2, batch
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- User lives in Oslo." in text and _profile(text) == profile
    assert report["set_aside"] == []
