"""Write-side scope edges an adversarial review found leaking or losing an entry: a run without
the rules in a workspace that keeps private scopes, and a session key too long for a scope name."""

from __future__ import annotations

from pathlib import Path

from write_scope_helpers import ALICE, ALICE_DIR, ALICE_TEA, git, memory_files_holding, scoped_cli

from dream_memory.core.history import HistoryEntry


def test_a_run_without_the_rules_in_a_workspace_with_private_scopes_is_exit_2(tmp_path: Path) -> None:
    """The scheduled job lost DREAM_CONFIG: every entry would be shared, and Alice's next private
    entry would land in the shared MEMORY.md every reader is served. The run refuses, naming a
    private file and where the rules are looked for, and commits nothing."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]
    head = git(dream.workspace, "rev-parse", "HEAD")
    assert (
        dream.run("append", "--session-key", ALICE, "- [durable] Decision: my door code is heron-4471").exit_code == 0
    )

    del dream.env["DREAM_CONFIG"]
    result = dream.run("run", "--model", "offline")
    assert result.exit_code == 2, result.output
    assert "keeps private scopes (scopes/user/" in result.output
    assert "no scope rules are configured" in result.output
    assert git(dream.workspace, "rev-parse", "HEAD") == head
    assert memory_files_holding(dream.workspace, "heron-4471") == []

    dream.configure()  # the rules found again: Alice's entry goes to her own files
    assert dream.run("run", "--model", "offline").exit_code == 0
    assert memory_files_holding(dream.workspace, "heron-4471") == [f"{ALICE_DIR}MEMORY.md"]


def test_an_entry_with_a_session_key_too_long_for_a_scope_name_lands_in_its_scope(tmp_path: Path) -> None:
    """Its facts used to have nowhere to go: the batch ended `nothing_new` ("every fact is already
    in memory"), the cursor passed it, and the fact was in no file."""
    key = "telegram:" + "x" * 230
    entry = HistoryEntry(1, "2026-04-03 09:00", "- [durable] User's locker code is heron-4471", key)
    dream = scoped_cli(tmp_path, history=[entry])
    dream.configure()
    code, report = dream.run_json("run", "--model", "offline", "--json")
    assert code == 0, report
    assert [b["outcome"] for b in report["batches"]] == ["committed"]
    (holder,) = memory_files_holding(dream.workspace, "heron-4471")
    assert holder.startswith("scopes/user/xxxx") and holder.endswith("/USER.md")


def test_a_private_reader_without_the_rules_is_exit_2_not_served_everyones_history(tmp_path: Path) -> None:
    """Without rules every entry counts as shared: `--scope user:bob` was served Alice's undreamt
    entries in `dream context`, `dream search --history` and the MCP server's context."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("context", "--scope", "user:bob").exit_code == 0
    assert ALICE_TEA not in dream.run("context", "--scope", "user:bob").output  # the rules found: hidden
    del dream.env["DREAM_CONFIG"]
    for args in (("context", "--scope", "user:bob"), ("search", "--history", "--scope", "user:bob", "oolong")):
        result = dream.run(*args)
        assert result.exit_code == 2, result.output
        assert "no scope rules are configured" in result.output
        assert ALICE_TEA not in result.output
    dream.env["DREAM_MEMORY_SCOPE"] = "user:bob"
    assert dream.run("context").exit_code == 2


def test_a_dry_runs_batches_each_list_only_the_files_they_change(tmp_path: Path) -> None:
    """A dry run's batches share one staging copy: each batch's files_changed listed the earlier
    batches' files too (Bob's batch named Alice's USER.md)."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    code, report = dream.run_json("run", "--model", "offline", "--dry-run", "--json")
    assert code == 0, report
    assert len(report["batches"]) >= 3  # Alice, Bob, the group, taking turns
    for batch in report["batches"]:
        paths = [change["path"] for change in batch["files_changed"]]
        scope = batch["scope"] or "shared"
        if scope == "shared":
            assert not any(p.startswith("scopes/") for p in paths), batch
        else:
            assert all(p.startswith("scopes/" + scope.replace(":", "/") + "/") for p in paths), batch
    assert all(batch["files_changed"] for batch in report["batches"]), report["batches"]
