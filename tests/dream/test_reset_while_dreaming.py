"""A `git reset --hard HEAD~1` (or a checkout of an older branch) while a batch waits on the model
takes the committed Dream cursor back. The batch used to land on top anyway, writing its own cursor:
the entries between the two were in no memory file, and `dream status` said nothing was pending
(found by an independent review). It now fails, commits nothing, and the next run dreams from the
cursor the repository holds, as it does after a reset made between runs."""

from __future__ import annotations

import subprocess
from typing import Any

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model
from dream_memory.testing.llm_server.steps import Step

FIRST, SECOND = "- [durable] User prefers dark mode", "- [durable] User's name is Maya."


def test_a_reset_while_a_batch_runs_fails_the_batch_and_the_next_run_dreams_both_entries(isolated: Cli) -> None:
    ws = make_workspace(isolated, [FIRST])
    assert isolated.run("init").exit_code == 0
    assert isolated.run("run", "--model", "offline").exit_code == 0
    assert git(ws, "show", "HEAD:memory/.dream_cursor").strip() == "1"
    assert isolated.run("append", SECOND).exit_code == 0

    offline, calls = from_chat_model(OfflineModel()), []

    def resetting(request: dict[str, Any]) -> Step:
        calls.append(1)
        if len(calls) == 2:  # the person resets while the batch waits on the model
            subprocess.run(["git", "-C", str(ws), "reset", "-q", "--hard", "HEAD~1"], check=True)
        return offline(request)

    with ScriptedLLMServer(responder=resetting) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
    assert code == 1 and report["status"] == "failed", report
    assert "went back from 1 to 0" in report["errors"][0], report["errors"]
    assert report["commits"] == [] and report["batches"][0]["outcome"] == "failed"
    assert git(ws, "show", "HEAD:memory/.dream_cursor").strip() == "0"

    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0 and report["cursor_before"] == 0 and report["cursor_after"] == 2, report
    user = (ws / "USER.md").read_text(encoding="utf-8")
    assert "dark mode" in user and "Maya" in user
    assert git(ws, "status", "--porcelain") == ""
