"""A workspace of three people, built by hand for the read side's scope tests: Alice and Bob talk
to the agent in private Telegram chats, the group chat is shared. Each private file and each
private history entry holds a canary that must never reach another scope's reader."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dream_memory.core.history import HistoryEntry
from dream_memory.testing.workspace import build_workspace

RULES = {"telegram:-100*": "shared", "telegram:*": "user:{id}"}

ALICE_USER = "ALICE-USER-CANARY-5521"
ALICE_MEMORY = "ALICE-MEMORY-CANARY-8812"
ALICE_HISTORY = "ALICE-HISTORY-CANARY-1107"
BOB_USER = "BOB-USER-CANARY-3310"
BOB_HISTORY = "BOB-HISTORY-CANARY-2290"
GROUP_NOTE = "GROUP-STANDUP-NOTE-0915"
ALICE_CANARIES = (ALICE_USER, ALICE_MEMORY, ALICE_HISTORY)
BOB_CANARIES = (BOB_USER, BOB_HISTORY)

ALICE_USER_FILE = "scopes/user/alice/USER.md"
ALICE_MEMORY_FILE = "scopes/user/alice/MEMORY.md"
BOB_USER_FILE = "scopes/user/bob/USER.md"

INDEX = """\
# Index

| Entity | File | Repos |
|---|---|---|
| standup | entities/standup.md | /home/u/team |
| alice-notes | scopes/user/alice/USER.md | /home/u/team/alice |
"""

FILES = {
    "index.md": INDEX,
    "entities/standup.md": f"# standup\n\n- the group standup is at 9:15 ({GROUP_NOTE})\n- lockers are in room 4\n",
    "USER.md": "# User\n\n## Profile\n\n- the group chat speaks English; lockers are shared\n",
    ALICE_USER_FILE: f"# Alice\n\n- Alice's locker code is {ALICE_USER}\n",
    ALICE_MEMORY_FILE: f"# Alice's memory\n\n- Alice's project codename is {ALICE_MEMORY} (locker talk)\n",
    BOB_USER_FILE: f"# Bob\n\n- Bob's bike locker code is {BOB_USER}\n",
}

HISTORY = (
    HistoryEntry(1, "2026-04-03 10:00", f"Alice: my locker code is {ALICE_HISTORY}", "telegram:alice"),
    HistoryEntry(2, "2026-04-03 10:01", f"Bob: my locker code is {BOB_HISTORY}", "telegram:bob"),
    HistoryEntry(3, "2026-04-03 10:02", f"Group: standup moves to 9:15, lockers too ({GROUP_NOTE})", "telegram:-1001"),
)


def scoped_workspace(root: Path, *, rules: dict[str, str] | None = RULES, links: bool = True) -> Path:
    """The three-person workspace at ``root``: rules in dream.json (None: no rules at all), the
    private files by hand, three undreamt history entries; with ``links``, an entity symlinked
    and one hard-linked to Alice's files (a second name must not serve them either)."""
    build_workspace(root, history=HISTORY, files=FILES)
    if rules is not None:
        (root / "dream.json").write_text(json.dumps({"agents": {"defaults": {"scopes": rules}}}), encoding="utf-8")
    if links:
        (root / "entities" / "leak.md").symlink_to("../scopes/user/alice/USER.md")
        os.link(root / ALICE_MEMORY_FILE, root / "entities" / "hard.md")
    return root


def holds_any(text: str, canaries: tuple[str, ...]) -> list[str]:
    """The canaries found in ``text``."""
    return [c for c in canaries if c in text]
