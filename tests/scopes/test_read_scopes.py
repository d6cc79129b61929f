"""The read side in scopes (docs/read-side.md#scopes): every read command serves its caller's
scope only. Alice's private files and history never reach Bob's reader (or a reader who names no
scope), through any command, flag, link or index row; Alice's own reader sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scope_helpers import (
    ALICE_CANARIES,
    ALICE_HISTORY,
    ALICE_MEMORY,
    ALICE_USER,
    BOB_CANARIES,
    BOB_HISTORY,
    BOB_USER,
    GROUP_NOTE,
    holds_any,
    scoped_workspace,
)

BOB = ("--session-key", "telegram:bob")
ALICE = ("--session-key", "telegram:alice")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return scoped_workspace(tmp_path / "ws")


def everything(result: object) -> str:
    return getattr(result, "stdout", "") + getattr(result, "stderr", "")


@pytest.mark.slow
def test_bobs_context_holds_his_files_and_never_alices(ws: Path, dream_process) -> None:
    """`dream context --session-key telegram:bob` (a real process): Bob's own USER.md under a
    heading saying it is private to him, his history, the group's; nothing of Alice's, in text
    or JSON."""
    text = dream_process("context", "-w", str(ws), *BOB)
    assert text.returncode == 0, text.stderr
    assert holds_any(everything(text), ALICE_CANARIES) == []
    assert BOB_USER in text.stdout and BOB_HISTORY in text.stdout
    assert "## scopes/user/bob/USER.md (private to user:bob" in text.stdout
    as_json = dream_process("context", "-w", str(ws), *BOB, "--json")
    assert holds_any(everything(as_json), ALICE_CANARIES) == []
    assert (
        "scopes/user/bob/USER.md (private to user:bob: only this person's or chat's sessions see it)"
        in (json.loads(as_json.stdout)["parts"])
    )


def test_alices_context_holds_her_files_and_history(ws: Path, dream) -> None:
    """Alice's own scope sees her USER.md, her MEMORY.md and her history entry, and no canary of Bob's."""
    block = dream("context", "-w", str(ws), *ALICE)
    assert block.returncode == 0, block.stderr
    assert ALICE_USER in block.stdout and ALICE_MEMORY in block.stdout and ALICE_HISTORY in block.stdout
    assert holds_any(everything(block), BOB_CANARIES) == []
    by_scope = dream("context", "-w", str(ws), "--scope", "user:alice")
    assert ALICE_USER in by_scope.stdout and ALICE_HISTORY in by_scope.stdout
    assert holds_any(by_scope.stdout, BOB_CANARIES) == []


def test_a_caller_naming_no_scope_reads_only_shared_files_and_entries(ws: Path, dream) -> None:
    """No scope flag: the shared files and the group's history only; no private file or entry."""
    block = dream("context", "-w", str(ws))
    assert block.returncode == 0, block.stderr
    assert GROUP_NOTE in block.stdout
    assert holds_any(everything(block), ALICE_CANARIES + BOB_CANARIES) == []
    assert "private to" not in block.stdout


@pytest.mark.parametrize("query", ["locker", "ALICE", "canary code", '"locker code"'])
def test_search_in_bobs_scope_never_returns_alices_text(ws: Path, dream, query: str) -> None:
    """`dream search` as Bob (text and --json, with and without --history): no source, line or
    skip note holds Alice's canaries; Bob's own file is among the sources."""
    for extra in ((), ("--history",), ("--no-cache",)):
        for fmt in ((), ("--json",)):
            found = dream("search", query, "-w", str(ws), *BOB, *extra, *fmt)
            assert found.returncode == 0, found.stderr
            assert holds_any(everything(found), ALICE_CANARIES) == [], (query, extra, fmt)
            assert "scopes/user/alice" not in found.stdout
    mine = json.loads(dream("search", "locker", "-w", str(ws), *BOB, "--json", "--history").stdout)
    paths = {item["path"] for item in mine["results"]}
    assert "scopes/user/bob/USER.md" in paths and "memory/history.jsonl" in paths
    assert {item["kind"] for item in mine["results"] if item["path"].startswith("scopes/")} == {"private"}


def test_search_in_alices_scope_finds_her_files_and_entries(ws: Path, dream) -> None:
    """Alice's reader finds her own files and her history entry, never Bob's."""
    found = dream("search", "locker", "-w", str(ws), *ALICE, "--history", "--json")
    assert ALICE_USER in found.stdout and ALICE_HISTORY in found.stdout
    assert holds_any(everything(found), BOB_CANARIES) == []


def test_search_history_without_a_scope_shows_only_shared_entries(ws: Path, dream) -> None:
    """`dream search --history` with no scope: the group's entry, no private one."""
    found = dream("search", "locker", "-w", str(ws), "--history")
    assert GROUP_NOTE in found.stdout
    assert holds_any(everything(found), ALICE_CANARIES + BOB_CANARIES) == []


def test_search_through_the_index_answers_bob_without_alices_files(tmp_path: Path, dream) -> None:
    """A store large enough to keep a search index, shared by every reader: after Alice's
    searches (which read her files, the hard link to one included), Bob's searches over the same
    index return none of her text, and the index file never holds any private text."""
    files = {f"entities/e{i}.md": f"# e{i}\n\n- locker row {i}\n" for i in range(520)}
    ws = scoped_workspace(tmp_path / "ws")
    for rel, text in files.items():
        (ws / rel).write_text(text, encoding="utf-8")
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}

    def index_holds_no_private_text() -> None:
        databases = list(cache.rglob("*.sqlite*"))
        assert databases, "the search index was not built"
        for db in databases:
            data = db.read_bytes().lower()
            assert all(c.lower().encode() not in data for c in ALICE_CANARIES + BOB_CANARIES), db

    for _ in range(2):
        mine = dream("search", "locker code", "-w", str(ws), *ALICE, "--json", "--max-results", "50", env=env)
        assert ALICE_USER in mine.stdout and ALICE_MEMORY in mine.stdout  # her file, and the link to it
        index_holds_no_private_text()
    for _ in range(2):
        found = dream("search", "locker code", "-w", str(ws), *BOB, "--json", "--max-results", "50", env=env)
        assert found.returncode == 0, found.stderr
        assert holds_any(everything(found), ALICE_CANARIES) == []
        assert BOB_USER in found.stdout
        index_holds_no_private_text()


def test_entity_section_and_resolve_refuse_alices_files_to_bob(ws: Path, dream) -> None:
    """Bob cannot reach Alice's files by an index row, a symlink or a hard link: entity and
    resolve refuse, the message names no content; his own private sections are served."""
    for name in ("alice-notes", "leak", "hard"):
        page = dream("entity", name, "-w", str(ws), *BOB)
        assert page.returncode == 1, (name, page.stdout, page.stderr)
        assert holds_any(everything(page), ALICE_CANARIES) == []
    resolved = dream("resolve", "/home/u/team/alice/x", "-w", str(ws), *BOB, "--json")
    assert resolved.returncode == 0 and json.loads(resolved.stdout)["entity"] == "standup"  # the broader root
    own = dream("section", "private-user", "-w", str(ws), *BOB)
    assert own.returncode == 0 and BOB_USER in own.stdout
    assert holds_any(everything(dream("section", "user", "-w", str(ws), *BOB)), ALICE_CANARIES) == []


@pytest.mark.parametrize("name", ["Cafe\u0301-notes", "\u01f0-notes", "\u0130-notes"])
def test_resolve_withholds_another_scopes_row_whatever_its_names_unicode_form(ws: Path, dream, name: str) -> None:
    """Alice's row named in decomposed form (NFD), or with a letter whose case folding is not in
    normal form: Bob's resolve still answers with the broader root and never names her entity."""
    index = ws / "index.md"
    index.write_text(index.read_text(encoding="utf-8").replace("| alice-notes |", f"| {name} |"), encoding="utf-8")
    resolved = dream("resolve", "/home/u/team/alice/x", "-w", str(ws), *BOB, "--json")
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["entity"] == "standup"
    assert name not in resolved.stdout + resolved.stderr


def test_alice_reads_her_own_files_by_every_door(ws: Path, dream) -> None:
    """Alice's scope: her private sections, the index row naming her file, the links to it."""
    assert ALICE_USER in dream("section", "private-user", "-w", str(ws), *ALICE).stdout
    assert ALICE_MEMORY in dream("section", "private-memory", "-w", str(ws), "--scope", "user:alice").stdout
    assert ALICE_USER in dream("entity", "alice-notes", "-w", str(ws), *ALICE).stdout
    assert ALICE_USER in dream("entity", "leak", "-w", str(ws), *ALICE).stdout
    resolved = dream("resolve", "/home/u/team/alice/x", "-w", str(ws), *ALICE, "--json")
    assert json.loads(resolved.stdout)["entity"] == "alice-notes"


def test_no_scope_means_shared_only_on_every_read_command(ws: Path, dream) -> None:
    """A reader naming no scope gets no private file from entity, section or search."""
    for args in (("entity", "alice-notes"), ("entity", "leak"), ("entity", "hard"), ("section", "private-user")):
        page = dream(*args, "-w", str(ws))
        assert page.returncode == 1, (args, page.stdout)
        assert holds_any(everything(page), ALICE_CANARIES + BOB_CANARIES) == []
    found = dream("search", "locker", "-w", str(ws), "--json")
    assert holds_any(everything(found), ALICE_CANARIES + BOB_CANARIES) == []
    assert "standup" in found.stdout


def test_the_environment_names_the_scope_for_agents_and_servers(ws: Path, dream) -> None:
    """DREAM_MEMORY_SESSION_KEY / DREAM_MEMORY_SCOPE set the reader's scope; a flag wins."""
    as_bob = dream("section", "private-user", "-w", str(ws), env={"DREAM_MEMORY_SESSION_KEY": "telegram:bob"})
    assert as_bob.returncode == 0 and BOB_USER in as_bob.stdout
    as_alice = dream("section", "private-user", "-w", str(ws), env={"DREAM_MEMORY_SCOPE": "user:alice"})
    assert ALICE_USER in as_alice.stdout
    flag_wins = dream("section", "private-user", "-w", str(ws), *BOB, env={"DREAM_MEMORY_SCOPE": "user:alice"})
    assert BOB_USER in flag_wins.stdout and ALICE_USER not in flag_wins.stdout


@pytest.mark.parametrize("command", ["context", "search", "entity", "section", "resolve", "why", "blame"])
def test_scope_and_session_key_together_or_a_bad_scope_name_are_exit_2(ws: Path, dream, command: str) -> None:
    """Both --scope and --session-key, or a scope name that is not one: exit 2 naming the problem."""
    args = {"context": (), "search": ("x",), "entity": ("x",), "section": ("x",), "resolve": ("/x",)}.get(
        command, ("USER.md:1",) if command == "why" else ("USER.md",)
    )
    both = dream(command, *args, "-w", str(ws), "--scope", "user:bob", *BOB)
    assert both.returncode == 2 and "not both" in both.stderr and "Traceback" not in both.stderr
    bad = dream(command, *args, "-w", str(ws), "--scope", "User/../alice")
    assert bad.returncode == 2 and "scope name" in bad.stderr and "Traceback" not in bad.stderr


def test_both_scope_variables_set_is_exit_2(ws: Path, dream) -> None:
    """DREAM_MEMORY_SCOPE and DREAM_MEMORY_SESSION_KEY together are ambiguous: exit 2 naming both."""
    env = {"DREAM_MEMORY_SCOPE": "user:bob", "DREAM_MEMORY_SESSION_KEY": "telegram:alice"}
    result = dream("search", "locker", "-w", str(ws), env=env)
    assert (
        result.returncode == 2 and "DREAM_MEMORY_SCOPE" in result.stderr and "DREAM_MEMORY_SESSION_KEY" in result.stderr
    )


def test_without_rules_or_a_scope_history_and_shared_files_read_as_before(tmp_path: Path, dream) -> None:
    """A workspace with no scope rules and a caller with no scope: every history entry counts as
    shared (as before scopes existed), and files below scopes/ are still nobody's to read."""
    ws = scoped_workspace(tmp_path / "ws", rules=None, links=False)
    block = dream("context", "-w", str(ws))
    assert ALICE_HISTORY in block.stdout and BOB_HISTORY in block.stdout and GROUP_NOTE in block.stdout
    assert ALICE_USER not in block.stdout
    found = dream("search", "locker", "-w", str(ws), "--history")
    assert ALICE_HISTORY in found.stdout and ALICE_USER not in found.stdout


def test_a_session_key_on_a_workspace_with_a_bad_rule_is_exit_2(tmp_path: Path, dream) -> None:
    """--session-key needs the rules: a config whose rule is not a scope is exit 2 naming it."""
    ws = scoped_workspace(tmp_path / "ws", rules={"telegram:*": "User:{id}"}, links=False)
    result = dream("search", "locker", "-w", str(ws), *BOB)
    assert result.returncode == 2 and "telegram:*" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "link",
    ["USER.md hard-linked", "memory/MEMORY.md symlinked", "bob's folder symlinked"],
)
def test_context_never_serves_alices_file_under_a_shared_or_bobs_name(ws: Path, dream, link: str) -> None:
    """`dream context` follows the read side's rule that a private file is served under no other
    name: a shared file linked to Alice's USER.md, or Bob's folder made a symlink to hers, is left
    out of Bob's block and of a shared reader's, with a note saying why. Section and search
    refused these links already; context served Alice's canary through each."""
    alice = ws / "scopes/user/alice/USER.md"
    if link == "USER.md hard-linked":
        (ws / "USER.md").unlink()
        (ws / "USER.md").hardlink_to(alice)
    elif link == "memory/MEMORY.md symlinked":
        (ws / "memory/MEMORY.md").unlink()
        (ws / "memory/MEMORY.md").symlink_to("../scopes/user/alice/USER.md")
    else:
        bob = ws / "scopes/user/bob"
        for child in bob.iterdir():
            child.unlink()
        bob.rmdir()
        bob.symlink_to("alice")
    for reader in (BOB, ()):
        block = dream("context", "-w", str(ws), *reader)
        assert block.returncode == 0, block.stderr
        assert holds_any(everything(block), ALICE_CANARIES[:2]) == [], (reader, block.stdout)
        if reader or link != "bob's folder symlinked":  # a shared reader never reads Bob's files
            assert "is the same file as one of another scope (a link to it); not included" in block.stderr
    mine = dream("context", "-w", str(ws), *ALICE)
    assert ALICE_USER in mine.stdout


@pytest.mark.parametrize(("scope", "shown"), [("user:bob", False), ("shared", False), ("user:alice", True)])
def test_the_index_as_served_names_another_scopes_entity_to_nobody_else(ws: Path, scope: str, shown: bool) -> None:
    """memory://index (ReadStore.index_page): the row whose File is Alice's USER.md is removed
    for every reader but her, as resolve already withholds it; its name alone says whom the
    scope is about. The shared rows stay."""
    from dream_memory.app.read.scoping import ReaderScope
    from dream_memory.app.read.store import ReadStore

    with ReadStore(ws, home="/home/u", scope=ReaderScope(scope)) as store:
        text = store.index_page().text
    assert ("alice-notes" in text) is shown, text
    assert "standup" in text


@pytest.mark.parametrize("scope", ["user:bob", "shared"])
def test_an_index_row_naming_a_link_to_another_scopes_file_is_withheld_whole(ws: Path, scope: str) -> None:
    """Rows whose File is a hard link or a symlink to Alice's file (entities/hard.md, leak.md):
    resolve answered with them, memory://index listed them, and the "known entities" hint of a
    missing entity named them and Alice's own row (found by an independent review). They are
    withheld like the file itself: resolve answers with the broader root."""
    from dream_memory.app.read.scoping import ReaderScope
    from dream_memory.app.read.store import ReadStore
    from dream_memory.errors import NotFound

    index = ws / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8")
        + "| viahard | entities/hard.md | /home/u/team/hard |\n| viasym | entities/leak.md | /home/u/team/sym |\n",
        encoding="utf-8",
    )
    with ReadStore(ws, home="/home/u", scope=ReaderScope(scope)) as store:
        for root in ("/home/u/team/hard/x", "/home/u/team/sym/x"):
            assert store.resolve(root).entity == "standup"
        served = store.index_page().text
        with pytest.raises(NotFound) as missing:
            store.entity("nosuch")
    assert "viahard" not in served and "viasym" not in served and "standup" in served
    hint = str(missing.value)
    assert "standup" in hint, hint
    for name in ("alice-notes", "viahard", "viasym", "hard", "leak"):
        assert name not in hint.replace("standup", ""), hint
