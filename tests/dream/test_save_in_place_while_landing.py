"""A person's editor (or nanobot) saving USER.md in place, in two writes with a pause between,
while a batch lands. Dream read the file between the two writes: it committed the cut file as
the person's edit, merged its fact onto it and renamed its version over USER.md, so the rest of
the save went to the unlinked file. Their profile was gone from disk, and the report read ok
(found by an independent review). An edited file is now taken once it has stopped changing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model
from dream_memory.testing.llm_server.steps import Step

PROFILE = "# User\n\n## Profile\n\n- User lives in Lyon\n- User works at Acme\n\n## Preferences\n\n- Likes tea\n"
SAVED = PROFILE.replace("## Profile\n\n", "## Profile\n\n- HAND: User's name is Ada\n")


def _save_in_two_writes(path: Path, text: str, pause: float) -> threading.Thread:
    """Truncate, write the first 40 bytes, and the rest ``pause`` seconds later, on one handle."""
    handle = path.open("w", encoding="utf-8")
    handle.write(text[:40])
    handle.flush()

    def rest() -> None:
        time.sleep(pause)
        handle.write(text[40:])
        handle.close()

    thread = threading.Thread(target=rest)
    thread.start()
    return thread


def test_a_save_in_two_writes_during_the_landing_is_kept_whole(isolated: Cli) -> None:
    ws = make_workspace(isolated, ["- [durable] User prefers dark mode"])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(PROFILE, encoding="utf-8")
    offline, calls, saving = from_chat_model(OfflineModel()), [], []

    def saving_meanwhile(request: dict[str, Any]) -> Step:
        calls.append(1)
        if len(calls) == 3:  # Dream's last model call: it lands as soon as this answers
            saving.append(_save_in_two_writes(ws / "USER.md", SAVED, pause=0.15))
        return offline(request)

    with ScriptedLLMServer(responder=saving_meanwhile) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
    for thread in saving:
        thread.join()
    assert saving, "the save was never made: the run made fewer model calls"
    assert code == 0 and report["status"] == "ok", report

    user = (ws / "USER.md").read_text(encoding="utf-8")
    assert user == SAVED.replace("- Likes tea\n", "- Likes tea\n- User prefers dark mode\n"), user
    assert git(ws, "status", "--porcelain") == ""
    assert git(ws, "show", "HEAD:USER.md") == user
