"""Scopes beside a real nanobot: the session keys nanobot's own classes make for Telegram chats
(``InboundMessage.session_key``: ``telegram:<chat_id>``, a private chat's id positive, a
supergroup's ``-100...``), appended by its own ``MemoryStore``, dream into one scope per person
under the rules docs/scopes.md gives for nanobot."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from nanobot_driver import Nanobot

from dream_memory.entrypoints.cli import cli
from dream_memory.testing import build_workspace

pytestmark = pytest.mark.nanobot

# The rules of docs/scopes.md's nanobot example.
RULES = {"telegram:-*": "shared", "telegram:*": "user:{id}", "cli:*": "shared"}

APPEND = """
import json, sys
from pathlib import Path
from nanobot.agent.memory import MemoryStore
from nanobot.bus.events import InboundMessage
from nanobot.session.keys import session_key_for_channel
store = MemoryStore(Path(sys.argv[1]))
chats = [
    ("telegram", "111222333", "- [durable] User prefers Marigold-ink fountain pens"),
    ("telegram", "-1001234567890", "- [durable] Decision: the reading club meets on Tuesdays"),
    ("telegram", "444555666", "- [durable] User prefers Saltmarsh-blue notebooks"),
]
keys = []
for channel, chat_id, text in chats:
    message = InboundMessage(channel=channel, sender_id=chat_id, chat_id=chat_id, content=text)
    assert message.session_key == session_key_for_channel(channel, chat_id)
    store.append_history(text, session_key=message.session_key)
    keys.append(message.session_key)
print(json.dumps(keys))
"""


def test_two_private_telegram_chats_written_by_nanobot_land_in_two_scopes(nanobot: Nanobot, tmp_path: Path) -> None:
    """nanobot's MemoryStore appends entries of two private Telegram chats and a supergroup
    under the keys its InboundMessage makes; `dream run --model offline` with the documented
    rules files each person's fact in scopes/user/<chat id>/USER.md and the group's decision in
    the shared memory/MEMORY.md, and no person's fact is in another's or a shared file."""
    ws = build_workspace(tmp_path / "ws")
    keys = nanobot.run(APPEND, str(ws))
    assert keys == ["telegram:111222333", "telegram:-1001234567890", "telegram:444555666"]
    config = tmp_path / "dream.json"
    config.write_text(json.dumps({"agents": {"defaults": {"scopes": RULES}}}), encoding="utf-8")
    home = tmp_path / "home-dream"
    home.mkdir()
    env = {"HOME": str(home), "DREAM_CONFIG": str(config), "DREAM_WORKSPACE": str(ws), "DREAM_MODEL": ""}
    env["GIT_CONFIG_GLOBAL"] = str(home / "gitconfig")
    result = CliRunner().invoke(cli, ["run", "--model", "offline"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    assert [b["scope"] for b in report["batches"]] == ["user:111222333", "shared", "user:444555666"]
    first = (ws / "scopes/user/111222333/USER.md").read_text(encoding="utf-8")
    second = (ws / "scopes/user/444555666/USER.md").read_text(encoding="utf-8")
    assert "Marigold-ink" in first and "Saltmarsh-blue" not in first
    assert "Saltmarsh-blue" in second and "Marigold-ink" not in second
    shared = (ws / "USER.md").read_text(encoding="utf-8") + (ws / "memory/MEMORY.md").read_text(encoding="utf-8")
    assert "reading club meets on Tuesdays" in shared
    assert "Marigold-ink" not in shared and "Saltmarsh-blue" not in shared
    log = subprocess.run(
        ["git", "-C", str(ws), "log", "--format=%(trailers:key=Dream-Scope,valueonly)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert log == ["user:444555666", "shared", "user:111222333"]
