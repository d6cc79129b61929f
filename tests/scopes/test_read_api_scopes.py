"""The Python API and the read library in scopes: `Workspace.context/search/entity/section/
resolve` take `scope=` or `session_key=`, and read the past (`--at`, `--as-of`) by the same rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scope_helpers import (
    ALICE_CANARIES,
    ALICE_HISTORY,
    ALICE_USER,
    ALICE_USER_FILE,
    BOB_USER,
    holds_any,
    scoped_workspace,
)

from dream_memory import Workspace
from dream_memory.app.read import ReaderScope, ReadStore, search_store
from dream_memory.errors import NotFound, Refused, UsageError
from dream_memory.testing.invariants import git


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return scoped_workspace(tmp_path / "ws")


def test_api_read_methods_take_a_scope_or_a_session_key(ws: Path) -> None:
    """Bob's calls never return Alice's text; Alice's return it; no scope is the shared view."""
    api = Workspace(ws, env={"HOME": str(ws.parent)})
    bob = {"session_key": "telegram:bob"}
    assert holds_any(api.context(**bob).text, ALICE_CANARIES) == []
    assert BOB_USER in api.context(**bob).text
    assert holds_any(json.dumps(api.search("locker", history=True, **bob).to_json()), ALICE_CANARIES) == []
    assert BOB_USER in api.section("private-user", **bob).text
    with pytest.raises(Refused):
        api.entity("leak", **bob)
    assert api.resolve("/home/u/team/alice/x", **bob).entity == "standup"
    assert ALICE_USER in api.section("private-user", scope="user:alice").text
    assert ALICE_HISTORY in api.context(scope="user:alice").text
    assert ALICE_USER in api.entity("alice-notes", session_key="telegram:alice").text
    assert holds_any(json.dumps(api.search("locker", history=True).to_json()), ALICE_CANARIES) == []
    with pytest.raises(NotFound):
        api.section("private-user")
    with pytest.raises(UsageError):
        api.search("locker", scope="user:bob", session_key="telegram:bob")


def test_the_library_takes_a_scope_name(ws: Path) -> None:
    """`search_store(..., scope="user:bob")` and `ReadStore(scope=ReaderScope(...))`: the same view."""
    found = search_store(ws, "locker", max_results=50, scope="user:bob")
    assert holds_any(json.dumps(found.to_json()), ALICE_CANARIES) == []
    assert "scopes/user/bob/USER.md" in {item.path for item in found.results}
    with ReadStore(ws, scope=ReaderScope("user:alice")) as alice:
        assert ALICE_USER in alice.section("private-user").text
        assert "private-user" in alice.section_names()
    with pytest.raises(UsageError):
        search_store(ws, "locker", scope="Not A Scope")


def test_reading_the_past_follows_the_same_rule(tmp_path: Path, dream) -> None:
    """`--at` and `--as-of` read as committed then, with the reader's scope: Bob reads his file
    at HEAD, never Alice's (by the index row or by search), and Alice reads hers. (git keeps
    contents, not links: a committed hard link is a copy, docs/read-side.md#scopes.)"""
    ws = scoped_workspace(tmp_path / "ws", links=False)
    git(ws, "init", "-q")
    git(ws, "add", "-A", "-f")
    git(ws, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-qm", "by hand")
    for when in (("--at", "HEAD"), ("--as-of", "2999-01-01")):
        refused = dream("entity", "alice-notes", "-w", str(ws), "--session-key", "telegram:bob", *when)
        assert refused.returncode == 1 and ALICE_USER not in refused.stdout + refused.stderr
        own = dream("section", "private-user", "-w", str(ws), "--session-key", "telegram:bob", *when)
        assert own.returncode == 0 and BOB_USER in own.stdout
        mine = dream("section", "private-user", "-w", str(ws), "--scope", "user:alice", *when)
        assert ALICE_USER in mine.stdout
    found = dream("search", "locker", "-w", str(ws), "--session-key", "telegram:bob", "--at", "HEAD", "--json")
    assert found.returncode == 0 and holds_any(found.stdout + found.stderr, ALICE_CANARIES) == []
    assert ALICE_USER_FILE not in found.stdout and BOB_USER in found.stdout
