"""`dream why` names the session file and the message range of an entry `dream consolidate`
wrote: the consolidator records each appended entry's origin in memory/.consolidation.json with
the progress that moved past it. End to end through the CLI, litellm over real HTTP to the scripted
server answering with the offline engine, and real session files."""

from __future__ import annotations

import json
from typing import Any

from consolidate_helpers import Cli, history, progress, session, turn, use_server

from dream_memory.adapters.sessions import ConsolidationStore
from dream_memory.testing.llm_server import ScriptedLLMServer


def _why_sources(cli: Cli, needle: str) -> list[dict[str, Any]]:
    result = cli.run("why", "--text", needle, "--json")
    assert result.exit_code == 0, result.output
    return [s for found in json.loads(result.stdout) for s in found["sources"]]


def test_why_names_the_session_file_and_messages_of_each_consolidated_entry(
    isolated: Cli, offline_server: ScriptedLLMServer
) -> None:
    """Two consolidations of one growing session (its first turns, then the next ones), then `dream run`:
    `dream why` on the lines learnt from each slice prints the session file and that slice's
    message range, in the text view and in --json; the ranges survive in .consolidation.json."""
    use_server(isolated, offline_server)
    assert isolated.run("init").exit_code == 0
    first = [m for i in (0, 1) for m in turn(i, keep=True)]
    path = session(isolated, "telegram:7", first)
    code, report = isolated.consolidate("--session", str(path), "--force")
    assert code == 0, report
    rel = "sessions/" + path.name
    upto = progress(isolated.workspace)["sessions"][rel]["messages"]  # --force keeps the last turn
    path = session(isolated, "telegram:7", first + [m for i in (2, 3) for m in turn(i, keep=True)])
    code, report = isolated.consolidate("--session", str(path), "--force")
    assert code == 0, report
    state = progress(isolated.workspace)
    last = state["sessions"][rel]["messages"]
    assert 0 < upto < last
    recorded = state["entries"]
    assert set(recorded) == {str(e["cursor"]) for e in history(isolated.workspace)}
    ranges = sorted({tuple(v["messages"]) for v in recorded.values()})
    assert ranges == [(1, upto), (upto + 1, last)]
    assert {v["session"] for v in recorded.values()} == {rel}
    expected = {(rel, f"1..{upto}"), (rel, f"{upto + 1}..{last}")}

    run = isolated.run("run", "--json")
    assert run.exit_code == 0, run.output
    shown = {(s["session_file"], s["messages"]) for s in _why_sources(isolated, "user prefers this")}
    assert shown and shown <= expected
    text = isolated.run("why", "--text", "user prefers this").stdout
    assert f"from {rel}, messages " in text


def test_a_slice_finished_after_a_crash_records_its_range_too(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A run killed after the slice's pending record was saved: the next run finishes it without
    the model and records the same session file and message range for its entries."""
    use_server(isolated, offline_server)
    assert isolated.run("init").exit_code == 0
    path = session(isolated, "cli:direct", [m for i in (0, 1, 2) for m in turn(i, keep=True)])
    killed = isolated.process("consolidate", "--session", str(path), "--force", kill_at="consolidation.progress")
    assert killed.returncode != 0
    state = ConsolidationStore(isolated.workspace).load()
    assert state.pending is not None and state.pending.origin() is not None
    assert state.origins == {}
    code, report = isolated.consolidate("--session", str(path), "--force")
    assert code == 0, report
    assert report["recovered"][0]["outcome"] == "finished"
    recorded = progress(isolated.workspace)["entries"]
    upto = progress(isolated.workspace)["sessions"]["sessions/" + path.name]["messages"]
    assert recorded and all(v["messages"] == [1, upto] for v in recorded.values())
    assert {int(c) for c in recorded} == {e["cursor"] for e in history(isolated.workspace)}
