"""nanobot's sessions as a first-class source of `dream consolidate`: 0.3.5's store outside the
workspace (``~/.nanobot/sessions/<workspace-id>/``, ``last_archived``) and 0.3.0's
``workspace/sessions/`` (``last_consolidated``), written by nanobot's own SessionManager and
read back by nanobot's own archiver afterwards."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nanobot_driver import NEW, OLD, Nanobot

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

pytestmark = pytest.mark.nanobot

Dream = Callable[..., subprocess.CompletedProcess[str]]
MARK = re.compile(r"\bm\d+-(?:user|answer)\b")

# A session written by nanobot's own SessionManager: 12 turns whose texts carry markers m<i>-user
# and m<i>-answer; turns 0-2 already archived by nanobot itself (a summary checkpoint, so
# last_archived points past them); a provider_state record holding a secret-looking blob; a
# /status command turn; a turn with host-only runtime context; a media-only user turn.
WRITE_SESSION = """
import json, sys
from pathlib import Path
import importlib.metadata as md
from nanobot.session.manager import SessionManager
workspace = Path(sys.argv[1])
manager = SessionManager(workspace)
session = manager.get_or_create("telegram:42")
for i in range(12):
    if i == 5:
        session.add_message("user", "/status", _command=True)
        session.add_message("assistant", "status: fine", _command=True)
    if i == 7:
        suffix = "[Runtime Context — metadata only, not instructions]\\nhost secret-ish clock 12:00\\n[/Runtime Context]"
        session.add_message("user", f"m{i}-user asks about weather\\n\\n{suffix}",
                            _runtime_context={"version": 1, "sources": ["clock"], "suffix": suffix})
    elif i == 9:
        session.add_message("user", "", media=["/home/u/photos/cat.png"])
        session.add_message("assistant", f"m{i}-answer a cat picture")
        continue
    else:
        session.add_message("user", f"m{i}-user says something about topic {i}")
    session.add_message("assistant", f"m{i}-answer replies about topic {i}")
    if i == 2 and hasattr(session, "commit_summary_checkpoint"):
        session.commit_summary_checkpoint("nanobot's own summary of m0..m2")
if md.version("nanobot-ai") != "0.3.0":
    from nanobot.providers.base import ProviderConversationState
    session.provider_state = ProviderConversationState(
        kind="responses", provider="openai", model="gpt-x", version=1, payload={"encrypted": "PRIVATE-REASONING-BLOB"}
    )
else:
    session.last_consolidated = 6  # 0.3.0: nanobot consolidated the first 3 turns itself
manager.save(session)
path = manager._jsonl_store.get_session_path(session.key) if hasattr(manager, "_jsonl_store") else manager._get_session_path(session.key)
print(json.dumps({"path": str(path), "messages": len(session.messages), "archived": session.last_consolidated}))
"""

# nanobot's own archiver over the session as it is now: what it archives is what it reads as not
# archived yet (messages[last_archived:]). An input budget of 0 makes it write its raw checkpoint
# without a model, the same slice it would summarize.
NANOBOT_ARCHIVES = """
import asyncio, json, sys
from pathlib import Path
from types import SimpleNamespace
import nanobot.agent.memory as memory
from nanobot.session.manager import SessionManager
workspace = Path(sys.argv[1])
session = SessionManager(workspace).get_or_create("telegram:42")
store = memory.MemoryStore(workspace)
start = session.last_consolidated
if hasattr(memory, "MemoryArchiver"):  # 0.3.5
    archiver = memory.MemoryArchiver(store, lambda **kw: [], lambda: [])
    runtime = SimpleNamespace(generation=SimpleNamespace(max_tokens=4000))
    asyncio.run(archiver.archive_session(session, archive_end=len(session.messages), runtime=runtime, input_token_budget=0))
else:  # 0.3.0: its Consolidator's archive falls back to this when the model fails
    store.raw_archive(session.messages[start:], session_key=session.key)
print(json.dumps({"from": start, "to": len(session.messages)}))
"""


def _summarizer(request: dict[str, Any]) -> Reply:
    """A model that summarizes a transcript as the markers it was shown (so tests see exactly
    which messages were sent)."""
    text = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    return Reply(content="- summary of " + " ".join(dict.fromkeys(MARK.findall(text))))


@pytest.fixture
def summarizer() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(responder=_summarizer) as server:
        yield server


def _use(server: ScriptedLLMServer, ws: Path) -> None:
    preset = {
        "model": "openai/scripted-model",
        "apiBase": server.base_url,
        "apiKeyEnv": "SCRIPTED_API_KEY",
        "maxRetries": 0,
        "timeout": 10,
    }
    config = {"agents": {"defaults": {"model": "scripted"}}, "modelPresets": {"scripted": preset}}
    (ws / "dream.json").write_text(json.dumps(config), encoding="utf-8")


def _sent(server: ScriptedLLMServer) -> str:
    return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in server.requests)


def _history_text(ws: Path) -> list[str]:
    log = HistoryLog(ws, clock=FrozenClock())
    return [e.content for e in log.archive_entries() + log.scan().entries]


@pytest.mark.parametrize("version", ["0.3.5", OLD])
def test_consolidate_all_finds_nanobots_sessions_and_its_archiver_archives_nothing_twice(
    nanobot_of: Callable[[str], Nanobot],
    dream: Dream,
    summarizer: ScriptedLLMServer,
    tmp_path: Path,
    version: str,
) -> None:
    """nanobot (0.3.5: session store outside the workspace; 0.3.0: workspace/sessions/) writes a
    session whose first three turns it archived itself. `dream consolidate --all --force
    --update-sessions` finds it, sends the model only turns 3.. up to the last safe cut (never
    the provider_state blob, the /status command turn or the runtime-context suffix; the
    media-only turn as its [image: path] breadcrumb) and writes back the field that release
    reads. nanobot's own archiver run afterwards archives only what is left: every message
    reaches history.jsonl exactly once."""
    nanobot = nanobot_of(version)
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    _use(summarizer, ws)
    written = nanobot.run(WRITE_SESSION, str(ws))
    path = Path(written["path"])
    if version == OLD:
        assert path.parent == ws / "sessions"
    else:
        assert not path.is_relative_to(ws) and path.parent.parent == tmp_path / "home/.nanobot/sessions"
        assert path.parent.name == (ws / ".nanobot/workspace-id").read_text(encoding="utf-8").strip()

    proc = dream(
        "consolidate",
        "--all",
        "--force",
        "--update-sessions",
        "--workspace",
        str(ws),
        env={"SCRIPTED_API_KEY": "test-key-not-secret"},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    [item] = report["sessions"]
    assert (item["outcome"], item["key"]) == ("consolidated", "telegram:42")
    assert Path(item["path"]) == path.resolve() if version != OLD else item["path"].startswith("sessions/")

    sent = _sent(summarizer)
    assert MARK.findall(sent), "the model saw the slice"
    assert not {"m0-user", "m1-answer", "m2-answer"} & set(MARK.findall(sent)), "nanobot had archived turns 0-2"
    assert "m11-user" not in sent  # the last turn stays unconsolidated (the last safe cut is before it)
    for private in ("PRIVATE-REASONING-BLOB", "provider_state", "/status", "status: fine", "Runtime Context"):
        assert private not in sent, private
    assert "[image: /home/u/photos/cat.png]" in sent
    history = "\n".join(_history_text(ws))
    for private in ("PRIVATE-REASONING-BLOB", "provider_state", "/status", "Runtime Context", "unreadable"):
        assert private not in history, private

    meta = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])
    read_field = "last_consolidated" if version == OLD else "last_archived"
    assert meta[read_field] == item["last_consolidated"] > written["archived"]
    if version != OLD:
        assert meta["last_consolidated"] == meta["last_archived"]  # 0.3.5 writes both; keep them equal

    archived = nanobot.run(NANOBOT_ARCHIVES, str(ws))
    assert archived["from"] == item["last_consolidated"]
    entries = _history_text(ws)
    for n in range(3, 12):
        for role in ("user", "answer"):
            marker = f"m{n}-{role}"
            if n == 9 and role == "user":
                continue  # media only: no text marker
            holding = [e for e in entries if re.search(rf"\b{marker}\b", e)]
            assert len(holding) == 1, (marker, holding)


# A gateway that died mid-turn, as nanobot 0.3.5's AgentLoop leaves it: the session saved, then
# its in-flight turn (a tool call and its finished result) in the <key>.checkpoint.json sidecar.
DIES_MID_TURN = """
import json, sys
from pathlib import Path
from nanobot.session.manager import SessionManager
manager = SessionManager(Path(sys.argv[1]))
session = manager.get_or_create("cli:direct")
for i in range(6):
    session.add_message("user", f"m{i}-user says something about topic {i}")
    session.add_message("assistant", f"m{i}-answer replies about topic {i}")
session.add_message("user", "m6-user asks for the long job")
manager.save(session)
session.metadata["runtime_checkpoint"] = {
    "phase": "awaiting_tools",
    "assistant_message": {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]},
    "completed_tool_results": [{"role": "tool", "tool_call_id": "c1", "name": "exec", "content": "TOOL-RESULT-KEPT"}],
    "pending_tool_calls": [],
}
manager.save_runtime_checkpoint(session)
print(json.dumps({"sidecar": str(manager._get_runtime_checkpoint_path(session.key))}))
"""

# The gateway starts again and finishes the turn from the sidecar, as its AgentLoop does.
RESTARTS = """
import json, sys
from pathlib import Path
from nanobot.session.manager import SessionManager
from nanobot.session.recovery import restore_runtime_checkpoint
session = SessionManager(Path(sys.argv[1])).get_or_create("cli:direct")
restored = restore_runtime_checkpoint(session)
print(json.dumps({"restored": restored, "kept": any(m.get("content") == "TOOL-RESULT-KEPT" for m in session.messages)}))
"""


def test_update_sessions_leaves_a_dead_gateways_unfinished_turn_for_nanobot_to_restore(
    nanobot_of: Callable[[str], Nanobot], dream: Dream, tmp_path: Path
) -> None:
    """nanobot 0.3.5 drops a runtime checkpoint older than its session file unread. Rewriting the
    session's metadata line while a dead gateway's checkpoint waits would lose that turn, so
    --update-sessions leaves such a file alone and says why; the slice is consolidated all the
    same, and the restarted gateway still restores its turn."""
    nanobot = nanobot_of(NEW)
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    sidecar = Path(nanobot.run(DIES_MID_TURN, str(ws))["sidecar"])
    proc = dream("consolidate", "--all", "--force", "--update-sessions", "--model", "offline", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    [item] = json.loads(proc.stdout)["sessions"]
    assert (item["outcome"], item["messages_archived"]) == ("consolidated", 12)
    assert item["session_file"].startswith("skipped") and sidecar.name in item["session_file"]
    assert any(sidecar.name in note for note in item["notes"])
    assert nanobot.run(RESTARTS, str(ws)) == {"restored": True, "kept": True}


# nanobot 0.3.5's first start beside a 0.3.0 workspace: it moves sessions/*.jsonl into its store
# (same file names) and, not loading the moved file as the session, goes on in a file of its own.
UPGRADED_CHATS_ON = """
import sys
from pathlib import Path
from nanobot.session.manager import SessionManager
manager = SessionManager(Path(sys.argv[1]))
session = manager.get_or_create("telegram:42")
session.add_message("user", "n1-user hello after the upgrade")
session.add_message("assistant", "n1-answer hi again")
manager.save(session)
"""


def test_after_the_upgrade_to_0_3_5_the_moved_file_keeps_its_progress_and_nothing_is_archived_twice(
    nanobot_of: Callable[[str], Nanobot], dream: Dream, tmp_path: Path
) -> None:
    """A 0.3.0 session partly consolidated, then moved into 0.3.5's store by nanobot, which chats
    on in a new file with the same key: the recorded progress goes to the moved file (same name),
    not to the new one, so no message reaches history twice."""
    nanobot = nanobot_of(NEW)
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    lines = [{"_type": "metadata", "key": "telegram:42", "created_at": "2026-04-03T09:58:12", "metadata": {}}]
    for i in range(10):
        lines.append(
            {"role": "user", "content": f"m{i}-user I prefer blue {i}", "timestamp": f"2026-04-03T10:{i:02d}:00"}
        )
        lines.append(
            {"role": "assistant", "content": f"m{i}-answer noted blue {i}", "timestamp": f"2026-04-03T10:{i:02d}:03"}
        )
    (ws / "sessions").mkdir()
    (ws / "sessions/telegram_42.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    consolidate = ("consolidate", "--all", "--budget", "100", "--model", "offline", "--workspace", str(ws))
    first = dream(*consolidate)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["sessions"][0]["outcome"] == "consolidated"

    nanobot.run(UPGRADED_CHATS_ON, str(ws))
    assert not (ws / "sessions/telegram_42.jsonl").exists()
    second = dream(*consolidate)
    assert second.returncode == 0, second.stderr
    by_name = {Path(s["path"]).name: s for s in json.loads(second.stdout)["sessions"]}
    assert any("progress moved with it" in n for n in by_name["telegram_42.jsonl"]["notes"])
    assert not any("moved" in n for s in by_name.values() if s is not by_name["telegram_42.jsonl"] for n in s["notes"])
    seen = [m for entry in _history_text(ws) for m in MARK.findall(entry)]
    assert seen and len(seen) == len(set(seen)), sorted(m for m in seen if seen.count(m) > 1)
