"""Scopes through the rest of the write side: the Consolidator keeps each entry's session key (a
slice is one session, never two people's), so the entries of two private chats dream into two
scopes; and `dream forget` reaches the scope files and their git history."""

from __future__ import annotations

import json
from pathlib import Path

from write_scope_helpers import (
    ALICE,
    ALICE_DIR,
    ALICE_LAPTOP,
    ALICE_TEA,
    BOB,
    BOB_COFFEE,
    BOB_DIR,
    GROUP,
    GROUP_DAY,
    git,
    memory_files_holding,
    scoped_cli,
)

from dream_memory.core.history import HistoryEntry
from dream_memory.testing import read_history, write_session


def _chat(lines: list[str]) -> list[dict[str, str]]:
    """A session of these user lines, each answered, then a last turn the Consolidator keeps."""
    messages = []
    for i, line in enumerate([*lines, "thanks, that's all"]):
        messages.append({"role": "user", "content": line, "timestamp": f"2026-04-03T10:{i:02d}:00"})
        messages.append({"role": "assistant", "content": "Noted.", "timestamp": f"2026-04-03T10:{i:02d}:30"})
    return messages


def test_consolidated_sessions_keep_their_keys_and_dream_into_their_own_scopes(tmp_path: Path) -> None:
    """Three nanobot-style sessions (Alice, Bob, the group) consolidated with --force: every
    history entry carries its session's key and only that session's facts; Dream then files
    Alice's in scopes/user/alice/, Bob's in scopes/user/bob/ and the group's in the shared files."""
    dream = scoped_cli(tmp_path, history=[])
    dream.configure()
    write_session(dream.workspace, ALICE, _chat([f"I prefer {ALICE_TEA} tea", f"I travel with my {ALICE_LAPTOP}"]))
    write_session(dream.workspace, BOB, _chat([f"I prefer the {BOB_COFFEE} coffee"]))
    write_session(dream.workspace, GROUP, _chat([f"We decided to meet on {GROUP_DAY}"]))
    result = dream.run("consolidate", "--all", "--force", "--model", "offline")
    assert result.exit_code == 0, result.stdout
    entries = read_history(dream.workspace)
    owners = {ALICE: (ALICE_TEA, ALICE_LAPTOP), BOB: (BOB_COFFEE,), GROUP: (GROUP_DAY,)}
    assert {e["session_key"] for e in entries} == set(owners)
    for entry in entries:
        others = [c for key, canaries in owners.items() if key != entry["session_key"] for c in canaries]
        assert not any(c in str(entry["content"]) for c in others), entry
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    assert set(memory_files_holding(dream.workspace, ALICE_TEA)) <= {f"{ALICE_DIR}USER.md", f"{ALICE_DIR}MEMORY.md"}
    assert memory_files_holding(dream.workspace, ALICE_TEA)
    assert memory_files_holding(dream.workspace, BOB_COFFEE) == [f"{BOB_DIR}USER.md"]
    assert memory_files_holding(dream.workspace, GROUP_DAY) == ["memory/MEMORY.md"]


def test_forget_purge_reaches_the_scope_files_and_their_history(tmp_path: Path) -> None:
    """`dream forget --purge` of Alice's canary, after it was dreamt into her scope: it is in no
    file, no history line and no commit (message or blob) reachable from any ref; the rest of
    her file and Bob's scope are untouched."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    assert ALICE_TEA in git(dream.workspace, "log", "-p", "--all")
    result = dream.run("forget", "--purge", ALICE_TEA)
    assert result.exit_code == 0, result.stdout
    alice = (dream.workspace / ALICE_DIR / "USER.md").read_text(encoding="utf-8")
    assert ALICE_TEA not in alice and "[forgotten]" in alice and "dark mode" in alice
    assert BOB_COFFEE in (dream.workspace / BOB_DIR / "USER.md").read_text(encoding="utf-8")
    assert ALICE_TEA not in (dream.workspace / "memory" / "history.jsonl").read_text(encoding="utf-8")
    assert ALICE_TEA not in git(dream.workspace, "log", "-p", "--all")
    assert ALICE_TEA not in json.dumps(read_history(dream.workspace))


def test_forget_entity_reaches_its_mentions_in_a_scope_file(tmp_path: Path) -> None:
    """An entity Alice talked about is filed as a line of her MEMORY.md (a private scope has no
    entities/ of its own); `dream forget --entity` replaces that mention there too."""
    history = [HistoryEntry(1, "2026-04-03 09:00", "- [durable] Decision: Zephyrine-api runs on port 8443", ALICE)]
    dream = scoped_cli(tmp_path, history)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    assert "Zephyrine-api" in (dream.workspace / ALICE_DIR / "MEMORY.md").read_text(encoding="utf-8")
    result = dream.run("forget", "--entity", "zephyrine-api")
    assert result.exit_code == 0, result.stdout
    assert "zephyrine" not in (dream.workspace / ALICE_DIR / "MEMORY.md").read_text(encoding="utf-8").casefold()
    assert "zephyrine" not in git(dream.workspace, "log", "-p", "--all").casefold()


def test_a_session_without_a_key_is_not_consolidated_while_scope_rules_are_set(tmp_path: Path) -> None:
    """An older nanobot's file, `telegram_111222333.jsonl` with no key in its metadata: its key was
    guessed from the name (`telegram_111222333`), no `telegram:*` rule matched it, and Alice's
    private chat was dreamt into the shared MEMORY.md. Now the session fails, saying what to add;
    without scope rules it is consolidated as before."""
    dream = scoped_cli(tmp_path, history=[])
    dream.configure()
    path = write_session(dream.workspace, ALICE, _chat([f"I prefer {ALICE_TEA} tea"]))
    lines = path.read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])
    del meta["key"]
    path.unlink()
    keyless = path.with_name("telegram_111222333.jsonl")
    keyless.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n", encoding="utf-8")

    result = dream.run("consolidate", "--all", "--force", "--model", "offline")
    assert result.exit_code != 0
    assert "has no session key in its metadata line, and scope rules are configured" in result.output
    assert read_history(dream.workspace) == []

    dream.configure(rules=None)
    assert dream.run("consolidate", "--all", "--force", "--model", "offline").exit_code == 0
    assert [e["session_key"] for e in read_history(dream.workspace)] == ["telegram_111222333"]
