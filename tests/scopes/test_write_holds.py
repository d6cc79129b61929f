"""The write policy, the deletion guard and the review queue work on a scope's files as on the
shared ones: a private batch replacing a line a person wrote in their scope's USER.md waits for
`dream review`, the held record names the scope file, and accepting it lands it there and nowhere
else; a batch emptying a scope file is held by the deletion guard."""

from __future__ import annotations

from pathlib import Path

from write_scope_helpers import ALICE, ALICE_DIR, ALICE_TEA, git, memory_files_holding, scoped_cli

from dream_memory.core.history import HistoryEntry
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

HAND_WRITTEN = f"# User\n\n## Preferences\n\n- Prefers {ALICE_TEA} tea\n- Reads on a Kobo\n"


def test_replacing_a_persons_line_in_a_scope_file_is_held_and_review_lands_it_there(tmp_path: Path) -> None:
    """Alice's USER.md was written by hand (committed as a manual edit); her correction replaces
    that line, so the change is held, the rest of the batch's commit is made, and `dream review
    accept` puts the new line into scopes/user/alice/USER.md, the shared USER.md untouched."""
    correction = f"- [correction] User prefers green tea (was {ALICE_TEA})"
    history = [HistoryEntry(1, "2026-04-03 09:00", correction, ALICE)]
    dream = scoped_cli(tmp_path, history, **{f"{ALICE_DIR}USER.md": HAND_WRITTEN})
    dream.configure()
    shared_user = (dream.workspace / "USER.md").read_text(encoding="utf-8")
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    assert report["status"] == "held"
    (held,) = report["held"]
    assert held["path"] == f"{ALICE_DIR}USER.md"
    assert report["batches"][0]["scope"] == "user:alice"
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]  # still there
    listed = dream.run("review", "list", "--json")
    assert held["id"] in listed.stdout, listed.stdout
    accepted = dream.run("review", "accept", held["id"])
    assert accepted.exit_code == 0, accepted.stdout + accepted.stderr
    alice = (dream.workspace / ALICE_DIR / "USER.md").read_text(encoding="utf-8")
    assert "green tea" in alice and ALICE_TEA not in alice and "- Reads on a Kobo" in alice
    assert (dream.workspace / "USER.md").read_text(encoding="utf-8") == shared_user
    assert git(dream.workspace, "status", "--porcelain") == ""
    assert held["id"] not in dream.run("review", "list", "--json").stdout  # nothing waits any more


def test_the_deletion_guard_holds_a_batch_emptying_a_scope_file(tmp_path: Path) -> None:
    """With writePolicy.manual "apply" (so only the guard can hold it), a private batch whose
    model cuts 12 of Alice's 14 lines down to one is held by the deletion guard, naming her
    file; her lines stay, and the shared files are untouched."""
    lines = [f"- Alice fact number {i} about the {ALICE_TEA} garden" for i in range(12)]
    original = "# Memory\n\n" + "\n".join(lines) + "\n"
    history = [HistoryEntry(1, "2026-04-03 09:00", "forget most of what you know about me", ALICE)]
    dream = scoped_cli(tmp_path, history, **{f"{ALICE_DIR}MEMORY.md": original})
    cut = Reply(
        tool_calls=[
            tool_call(
                "edit_file", path=f"{ALICE_DIR}MEMORY.md", old_text="\n".join(lines), new_text="- Alice keeps one fact"
            )
        ]
    )
    with ScriptedLLMServer([Reply("[MEMORY] Alice keeps one fact [from 1]"), cut, Reply("Done.")]) as server:
        dream.configure(server=server, dream={"writePolicy": {"manual": "apply"}})
        code, report = dream.run_json("run")
    assert code == 0, report
    (held,) = report["held"]
    assert held["path"] == f"{ALICE_DIR}MEMORY.md"
    assert "would remove" in held["reason"] and f"{ALICE_DIR}MEMORY.md" in held["reason"]
    assert (dream.workspace / ALICE_DIR / "MEMORY.md").read_text(encoding="utf-8") == original
