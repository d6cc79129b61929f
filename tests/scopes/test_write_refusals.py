"""A batch's tools are confined to its scope: a model writing a private fact into a shared file
(or a shared fact into a private one) gets the edit refused with where the fact may go, the
rest of the batch lands, and the report counts the refusal; reads of another scope's files are
refused too, and no prompt ever shows a file of a scope other than the batch's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from write_scope_helpers import (
    ALICE,
    ALICE_DIR,
    ALICE_LAPTOP,
    ALICE_TEA,
    BOB,
    BOB_COFFEE,
    GROUP,
    GROUP_DAY,
    memory_files_holding,
    scoped_cli,
)

from dream_memory.adapters.offline import OfflineModel
from dream_memory.core import layout, policy
from dream_memory.core.history import HistoryEntry
from dream_memory.errors import ToolDenied
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, from_chat_model, tool_call

ALICE_ONLY = [HistoryEntry(1, "2026-04-03 09:00", f"I drink {ALICE_TEA} tea and travel with my {ALICE_LAPTOP}", ALICE)]
FACTS = f"[USER] Drinks {ALICE_TEA} tea [from 1]\n[MEMORY] Travels with the {ALICE_LAPTOP} [from 1]"


def _tool_results(server: ScriptedLLMServer) -> list[str]:
    return [m["content"] for m in server.completion_requests()[-1].messages if m["role"] == "tool"]


def test_a_private_fact_written_to_the_shared_user_md_is_refused_and_the_rest_lands(tmp_path: Path) -> None:
    """Alice's batch: the model puts her tea into the shared USER.md and her laptop into her own
    MEMORY.md. The first edit is refused with a message naming scopes/user/alice/USER.md, the
    second lands in the batch's commit, USER.md is untouched, and the report counts one refusal
    (per batch and for the run); the refused fact waits for review in her own USER.md."""
    dream = scoped_cli(tmp_path, ALICE_ONLY)
    shared_user = (dream.workspace / layout.USER).read_bytes()
    edits = Reply(
        tool_calls=[
            tool_call(
                "edit_file", path="USER.md", old_text="## Preferences", new_text=f"## Preferences\n\n- {ALICE_TEA}"
            ),
            tool_call(
                "write_file", path=f"{ALICE_DIR}MEMORY.md", content=f"# Memory\n\n- Travels with {ALICE_LAPTOP}\n"
            ),
        ]
    )
    with ScriptedLLMServer([Reply(FACTS), edits, Reply("Done.")]) as server:
        dream.configure(server=server)
        code, report = dream.run_json("run")
        refused, landed = _tool_results(server)
    assert code == 0, report
    assert refused.startswith("Error: USER.md is a shared file's; these entries are private to scope user:alice")
    assert "scopes/user/alice/USER.md and scopes/user/alice/MEMORY.md" in refused
    assert landed == f"created {ALICE_DIR}MEMORY.md"
    (batch,) = report["batches"]
    assert (batch["outcome"], batch["scope"], batch["scope_refusals"], report["scope_refusals"]) == (
        "committed",
        "user:alice",
        1,
        1,
    )
    assert any("refused 1 edit(s) of another scope's file (USER.md)" in note for note in batch["notes"])
    # The tea fact is not dropped: it waits for review in her own USER.md, as the rules would add it.
    assert report["status"] == "held", report
    (waiting,) = report["held"]
    assert waiting["path"] == f"{ALICE_DIR}USER.md" and "did not apply 1 fact(s)" in waiting["reason"], waiting
    assert (dream.workspace / layout.USER).read_bytes() == shared_user
    assert memory_files_holding(dream.workspace, ALICE_TEA) == []
    assert dream.run("review", "accept", waiting["id"]).exit_code == 0
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]
    assert memory_files_holding(dream.workspace, ALICE_LAPTOP) == [f"{ALICE_DIR}MEMORY.md"]
    tea, laptop = batch["provenance"]["facts"]  # provenance names the scope's files
    assert (tea["target"], tea["lines"]) == (f"{ALICE_DIR}USER.md", [])
    assert laptop["target"] == f"{ALICE_DIR}MEMORY.md"
    assert {line["path"] for line in laptop["lines"]} == {f"{ALICE_DIR}MEMORY.md"}


def test_a_model_told_where_the_fact_goes_files_it_there(tmp_path: Path) -> None:
    """After the refusal the model follows its text: the fact goes to scopes/user/alice/USER.md,
    and the refusal stays counted."""
    dream = scoped_cli(tmp_path, ALICE_ONLY)
    wrong = Reply(tool_calls=[tool_call("edit_file", path="USER.md", old_text="## Preferences", new_text="x")])
    right = Reply(
        tool_calls=[
            tool_call("write_file", path=f"{ALICE_DIR}USER.md", content=f"# User\n\n- Drinks {ALICE_TEA} tea\n"),
            tool_call("write_file", path=f"{ALICE_DIR}MEMORY.md", content=f"# Memory\n\n- {ALICE_LAPTOP}\n"),
        ]
    )
    with ScriptedLLMServer([Reply(FACTS), wrong, right, Reply("Done.")]) as server:
        dream.configure(server=server)
        code, report = dream.run_json("run")
    assert code == 0, report
    assert report["batches"][0]["scope_refusals"] == 1
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]


def test_the_text_protocol_is_confined_the_same_way(tmp_path: Path) -> None:
    """editProtocol "text": a SEARCH/REPLACE block for the shared USER.md is refused with the
    same message (the model reads it in the results), a block creating Alice's file applies, and
    the refusal is counted."""
    dream = scoped_cli(tmp_path, ALICE_ONLY)
    shared_user = (dream.workspace / layout.USER).read_bytes()
    blocks = (
        f"USER.md\n<<<<<<< SEARCH\n## Preferences\n=======\n## Preferences\n\n- {ALICE_TEA}\n>>>>>>> REPLACE\n\n"
        f"{ALICE_DIR}USER.md\n<<<<<<< SEARCH\n=======\n# User\n\n- Drinks {ALICE_TEA} tea\n>>>>>>> REPLACE\n\n"
        f"{ALICE_DIR}MEMORY.md\n<<<<<<< SEARCH\n=======\n# Memory\n\n- {ALICE_LAPTOP}\n>>>>>>> REPLACE\n"
    )
    with ScriptedLLMServer([Reply(FACTS), Reply(blocks), Reply("DONE")]) as server:
        dream.configure(server=server, protocol="text")
        code, report = dream.run_json("run")
        results = server.completion_requests()[-1].messages[-1]["content"]
    assert code == 0, report
    assert "1. USER.md: Error: USER.md is a shared file's; these entries are private to scope user:alice" in results
    assert f"2. {ALICE_DIR}USER.md: applied" in results
    assert report["batches"][0]["scope_refusals"] == 1 and report["batches"][0]["edit_protocol"] == "text"
    assert (dream.workspace / layout.USER).read_bytes() == shared_user
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]


def test_a_shared_batch_may_not_write_or_read_a_private_scopes_files(tmp_path: Path) -> None:
    """The group's batch: writing into scopes/user/alice/USER.md and reading Bob's file are both
    refused (the shared facts go to the shared files; private files are nobody else's to read),
    and Bob's line never reaches the model."""
    bob_file = {"scopes/user/bob/USER.md": f"# User\n\n- Drinks {BOB_COFFEE}\n"}
    history = [HistoryEntry(1, "2026-04-03 09:00", f"we meet on {GROUP_DAY}", GROUP)]
    dream = scoped_cli(tmp_path, history, **bob_file)
    edits = Reply(
        tool_calls=[
            tool_call("read_file", path="scopes/user/bob/USER.md"),
            tool_call("write_file", path=f"{ALICE_DIR}USER.md", content=f"- {GROUP_DAY}\n"),
            tool_call(
                "edit_file", path="memory/MEMORY.md", old_text="## Decisions", new_text=f"## Decisions\n\n- {GROUP_DAY}"
            ),
        ]
    )
    with ScriptedLLMServer([Reply(f"[MEMORY] The group meets on {GROUP_DAY} [from 1]"), edits, Reply("ok")]) as server:
        dream.configure(server=server)
        code, report = dream.run_json("run")
        read, write, landed = _tool_results(server)
        every_prompt = "".join(str(r.body) for r in server.completion_requests())
    assert code == 0, report
    assert read.startswith("Error: scopes/user/bob/USER.md belongs to another scope; the shared scope reads only")
    assert write.startswith(f"Error: {ALICE_DIR}USER.md belongs to a private scope; these entries are shared")
    assert landed.startswith("edited memory/MEMORY.md")
    assert BOB_COFFEE not in every_prompt
    assert report["batches"][0]["scope"] == "shared" and report["scope_refusals"] == 1  # reads are not edits
    assert memory_files_holding(dream.workspace, GROUP_DAY) == [layout.MEMORY]


def test_no_prompt_shows_another_scopes_files(tmp_path: Path) -> None:
    """Over a whole interleaved run on the offline engine (every request recorded), a batch's
    prompts hold its own scope's facts and the shared ones, never another private scope's:
    Bob's batch never sees Alice's tea (already in her USER.md by then), the group's batch sees
    neither person's, Alice's second batch never sees Bob's coffee."""
    dream = scoped_cli(tmp_path)
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        dream.configure(server=server)
        code, report = dream.run_json("run")
        requests = server.completion_requests()
    assert code == 0, report
    private = {"user:alice": (ALICE_TEA, ALICE_LAPTOP), "user:bob": (BOB_COFFEE,)}
    seen_scopes = set()
    for request in requests:
        text = "\n".join(str(m.get("content") or "") for m in request.messages)
        scope = re.search(r"^## Scope: (\S+)$", text, re.MULTILINE)
        assert scope is not None, "with scope rules every prompt names its scope"
        seen_scopes.add(scope.group(1))
        for owner, canaries in private.items():
            if owner != scope.group(1):
                assert not any(c in text for c in canaries), (scope.group(1), owner)
    assert seen_scopes == {"user:alice", "user:bob", "shared"}


@pytest.mark.parametrize(
    ("scope", "path", "allowed"),
    [
        ("user:alice", "scopes/user/alice/USER.md", True),
        ("user:alice", "scopes/user/alice/MEMORY.md", True),
        ("user:alice", "USER.md", False),
        ("user:alice", "entities/nix.md", False),
        ("user:alice", "scopes/user/bob/USER.md", False),
        ("shared", "USER.md", True),
        ("shared", "scopes/user/alice/USER.md", False),
        (None, "scopes/user/alice/USER.md", True),  # no scope given: any file Dream could write
    ],
)
def test_the_write_policy_per_scope(scope: str | None, path: str, allowed: bool) -> None:
    """check_writable with the batch's scope lets through only that scope's files."""
    if allowed:
        assert policy.check_writable(path, scope) == path
    else:
        with pytest.raises(policy.ScopeDenied):
            policy.check_writable(path, scope)


def test_paths_below_scopes_that_are_no_scopes_file_are_not_memory_files() -> None:
    """Only a scope's USER.md and MEMORY.md are memory: anything else below scopes/ is refused
    as not a memory file, whatever the scope."""
    for path in ("scopes/user/alice/notes.md", "scopes/USER.md", "scopes/User/Alice/USER.md"):
        with pytest.raises(ToolDenied, match="not a memory file"):
            policy.check_writable(path, "user:alice")


def test_a_private_batch_reads_the_shared_files_and_its_own_only() -> None:
    """check_readable with a private scope: the shared files and its own two, never another's."""
    assert policy.check_readable("memory/MEMORY.md", "user:alice") == "memory/MEMORY.md"
    assert policy.check_readable("scopes/user/alice/USER.md", "user:alice") == "scopes/user/alice/USER.md"
    with pytest.raises(policy.ScopeDenied, match="belongs to another scope"):
        policy.check_readable("scopes/user/bob/USER.md", "user:alice")
    assert BOB  # the key the other scope's entries carry in these tests
