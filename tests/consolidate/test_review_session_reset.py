"""`--update-sessions` and a session reset while its slice is with the model: the watermark counted
in the old session must never land in the new one, or the new session's first messages would
count as consolidated and never reach history."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from consolidate_helpers import Cli, echo_responder, history, markers, session, spoken_markers, turn, turns, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, Step


def _replace_file(path: Path, key: str, messages: list[dict[str, Any]]) -> bytes:
    """What an agent's /new does: a new file (new inode) with the new session, renamed over the old."""
    lines = [{"_type": "metadata", "key": key, "last_consolidated": 0}, *messages]
    data = "".join(json.dumps(m) + "\n" for m in lines).encode("utf-8")
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return data


def test_a_session_reset_during_the_model_call_gets_no_stale_watermark_and_is_consolidated_later(
    isolated: Cli,
) -> None:
    """The session is replaced by a new one (its watermark 0) while the model summarizes the old
    one: the old slice lands in history, the new file is left exactly as the agent wrote it, the
    report says why the watermark was not written, and later runs consolidate every message the
    new session holds."""
    old = turns(6, keep=True)
    new = [m for i in range(10, 16) for m in turn(i, keep=True)]
    path = session(isolated, "cli:direct", old)
    written: list[bytes] = []

    def responder(request: dict[str, Any]) -> Step:
        if not written:  # the first call: the agent resets the session while the model works
            written.append(_replace_file(path, "cli:direct", new))
            return Reply("- OLD session summary")
        return echo_responder(request)

    with ScriptedLLMServer(responder=responder) as server:
        use_server(isolated, server)
        first = isolated.process("consolidate", "--all", "--force", "--update-sessions")
        assert first.returncode == 0, first.stderr
        report = json.loads(first.stdout)
        item = report["sessions"][0]
        assert item["outcome"] == "consolidated"
        assert str(item["session_file"]).startswith("replaced"), item
        assert any("not written back" in w for w in report["warnings"]), report["warnings"]
        assert "not written back" in first.stderr
        assert path.read_bytes() == written[0]
        assert [e["content"] for e in history(isolated.workspace)] == ["- OLD session summary"]

        for _ in range(2):
            code, again = isolated.consolidate("--all", "--force", "--update-sessions")
            assert code == 0, again

    archived = "\n".join(str(e["content"]) for e in history(isolated.workspace))
    tail = 2  # the last turn stays: the last safe cut is before it
    expected = spoken_markers(new[:-tail])
    assert expected and all(archived.count(mk) == 1 for mk in expected), archived
    assert not set(markers(archived)) & set(spoken_markers(new[-tail:]))
    assert json.loads(path.read_bytes().split(b"\n", 1)[0])["last_consolidated"] == len(new) - tail
