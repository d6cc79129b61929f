"""Dream with scope rules, on the offline engine: two private Telegram users and a group take
turns in one history; each private fact lands in its own scope's files, the group's in the shared
ones, and nothing of one person reaches a file or a shared commit another can read."""

from __future__ import annotations

from pathlib import Path

import pytest
from write_scope_helpers import (
    ALICE_DIR,
    ALICE_LAPTOP,
    ALICE_TEA,
    BOB_COFFEE,
    BOB_DIR,
    GROUP_DAY,
    commits_with_shared_changes_holding,
    git,
    memory_files_holding,
    scoped_cli,
    trailers,
)

from dream_memory.core import layout


def test_each_persons_facts_land_in_their_own_scope_and_the_groups_in_the_shared_files(tmp_path: Path) -> None:
    """After `dream run --model offline`, Alice's facts are in scopes/user/alice/ only, Bob's in
    scopes/user/bob/ only, the group's in the shared memory/MEMORY.md; no commit that touches a
    shared file holds a private canary (message or patch)."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    ws = dream.workspace
    assert memory_files_holding(ws, ALICE_TEA) == [f"{ALICE_DIR}USER.md"]
    assert memory_files_holding(ws, ALICE_LAPTOP) == [f"{ALICE_DIR}MEMORY.md"]
    assert memory_files_holding(ws, BOB_COFFEE) == [f"{BOB_DIR}USER.md"]
    assert memory_files_holding(ws, GROUP_DAY) == [layout.MEMORY]
    for canary in (ALICE_TEA, ALICE_LAPTOP, BOB_COFFEE):
        assert commits_with_shared_changes_holding(ws, canary) == []
    # Dream's own state and held records never carry a private fact either.
    assert ALICE_TEA not in (ws / layout.DREAM_STATE).read_text(encoding="utf-8")
    assert not (ws / layout.DREAM_HELD_DIR).exists()


def test_a_private_scope_file_starts_with_a_header_saying_whose_it_is(tmp_path: Path) -> None:
    """A scope's USER.md is created on its first fact, with a short header naming the scope and
    who reads it, then the fact under the section USER.md would put it in."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    text = (dream.workspace / ALICE_DIR / "USER.md").read_text(encoding="utf-8")
    assert text.startswith("# User (user:alice)\n\nPrivate to scope user:alice")
    assert f"## Preferences\n\n- User prefers {ALICE_TEA} tea in the morning\n" in text
    assert "- User prefers dark mode everywhere" in text


def test_interleaved_chats_cost_one_batch_per_run_of_one_scope(tmp_path: Path) -> None:
    """Batches never mix scopes: five entries alternating alice, bob, group, alice, alice are four
    batches (the two last Alice entries share one), each report batch and commit naming its scope."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0
    ranges = [(b["cursor_from"], b["cursor_to"], b["scope"]) for b in report["batches"]]
    assert ranges == [(1, 1, "user:alice"), (2, 2, "user:bob"), (3, 3, "shared"), (4, 5, "user:alice")]
    assert report["scope_refusals"] == 0 and all(b["scope_refusals"] == 0 for b in report["batches"])
    assert trailers(dream.workspace, "Dream-Scope") == ["user:alice", "shared", "user:bob", "user:alice"]
    assert (dream.workspace / layout.DREAM_CURSOR).read_text(encoding="utf-8").strip() == "5"


def test_the_progress_line_names_the_batch_scope(tmp_path: Path) -> None:
    """`dream run`'s progress lines on stderr show each batch's scope beside its range."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    result = dream.run("run", "--model", "offline")
    assert result.exit_code == 0, result.stderr
    assert "dream: batch 2..2 (1 entry, scope user:bob): committed" in result.stderr
    assert "dream: batch 3..3 (1 entry, scope shared): committed" in result.stderr


def test_a_second_run_finds_nothing_new_and_a_new_private_fact_updates_only_its_scope(tmp_path: Path) -> None:
    """Scope files are memory like any other: a later entry of Bob's correcting his coffee edits
    his USER.md in place (the old line replaced), and nothing else changes."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    assert dream.run_json("run", "--model", "offline")[1]["status"] == "nothing_to_do"
    dream.run("append", "--session-key", "telegram:bob", f"- [correction] User prefers green tea (was {BOB_COFFEE})")
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    assert [f["path"] for f in report["files_changed"]] == [f"{BOB_DIR}USER.md"]
    bob = (dream.workspace / BOB_DIR / "USER.md").read_text(encoding="utf-8")
    assert "green tea" in bob and BOB_COFFEE not in bob


def test_a_dry_run_shows_each_scope_writing_its_own_files_and_writes_nothing(tmp_path: Path) -> None:
    """`dream run --dry-run`: the batches share one staging copy, yet each writes only its own
    scope's files; the would-be diff shows them, and nothing below scopes/ exists afterwards."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    code, report = dream.run_json("run", "--model", "offline", "--dry-run")
    assert code == 0, report
    assert report["status"] == "dry_run"
    assert [f["path"] for f in report["files_changed"]] == [
        layout.MEMORY,
        f"{ALICE_DIR}MEMORY.md",
        f"{ALICE_DIR}USER.md",
        f"{BOB_DIR}USER.md",
    ]
    assert not (dream.workspace / layout.SCOPES_DIR).exists()


def test_without_scope_rules_a_run_is_what_it_always_was(tmp_path: Path) -> None:
    """No `scopes` key: every entry is shared, the five entries are one batch, facts go to the
    shared files, nothing is written below scopes/, and commits carry no Dream-Scope trailer."""
    dream = scoped_cli(tmp_path)
    dream.configure(rules=None)
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    assert [(b["cursor_from"], b["cursor_to"], b["scope"]) for b in report["batches"]] == [(1, 5, "shared")]
    assert not (dream.workspace / layout.SCOPES_DIR).exists()
    assert memory_files_holding(dream.workspace, ALICE_TEA) == [layout.USER]
    assert memory_files_holding(dream.workspace, GROUP_DAY) == [layout.MEMORY]
    assert trailers(dream.workspace, "Dream-Scope") == []
    assert "Dream-Range: 1..5" in git(dream.workspace, "log", "-1", "--format=%B")


def test_a_scope_file_written_by_hand_is_versioned_like_any_memory_file(tmp_path: Path) -> None:
    """A person creates scopes/user/carol/USER.md by hand: git's own `status` lists it (the
    repository's .gitignore block lets scopes/ through), and the next run commits it as
    `memory: manual edits` before its batches."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    carol = dream.workspace / "scopes" / "user" / "carol" / "USER.md"
    carol.parent.mkdir(parents=True)
    carol.write_text("# User\n\n- Prefers letters to email\n", encoding="utf-8")
    assert git(dream.workspace, "status", "--porcelain") == "?? scopes/user/carol/\n"
    dream.run("append", "--session-key", "telegram:carol", "- [durable] User prefers fountain pens")
    code, report = dream.run_json("run", "--model", "offline")
    assert code == 0, report
    assert report["manual_edits_commit"] is not None
    assert git(dream.workspace, "show", "--format=%s", "--name-only", report["manual_edits_commit"]).split("\n")[
        :3
    ] == [
        "memory: manual edits",
        "",
        "scopes/user/carol/USER.md",
    ]
    assert "fountain pens" in carol.read_text(encoding="utf-8")


@pytest.mark.parametrize("shared_name", ["sections/notes.md", "scopes/user/bob/USER.md"])
def test_a_hard_link_to_a_private_file_is_never_committed_under_another_scopes_name(
    tmp_path: Path, shared_name: str
) -> None:
    """A person hard-links Alice's USER.md as a shared section (or as Bob's USER.md): the next
    run exits 2 naming both files and commits nothing. It committed the link as "memory: manual
    edits", and `search --at HEAD`, `why` and `blame` then served Alice's lines to Bob from
    history, though the read side refuses that link on disk."""
    dream = scoped_cli(tmp_path)
    dream.configure()
    assert dream.run("run", "--model", "offline").exit_code == 0
    alice = dream.workspace / ALICE_DIR / "USER.md"
    assert ALICE_TEA in alice.read_text(encoding="utf-8")
    link = dream.workspace / shared_name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.hardlink_to(alice)
    head = git(dream.workspace, "rev-parse", "HEAD")
    result = dream.run("run", "--model", "offline")
    assert result.exit_code == 2, result.output
    assert f"{shared_name} is the same file as {ALICE_DIR}USER.md (a hard link)" in result.output
    assert git(dream.workspace, "rev-parse", "HEAD") == head
    assert ALICE_TEA not in git(dream.workspace, "log", "-p", "--all", "--", shared_name)
    link.unlink()
    assert dream.run("run", "--model", "offline").exit_code == 0
