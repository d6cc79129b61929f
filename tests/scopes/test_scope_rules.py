"""The scope rules (core.scopes): which scope a session key falls into, where a scope's lines
live, and what a batch or a reader in one scope may read and write."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dream_memory.core import scopes
from dream_memory.core.scopes import SHARED, ScopeRules

TELEGRAM = ScopeRules.parse({"telegram:-100*": "shared", "telegram:*": "user:{id}", "slack:*": "team:{channel}"})


def test_no_rules_keep_every_entry_shared_as_before() -> None:
    rules = ScopeRules.parse({})
    assert not rules.configured
    assert {rules.scope_of(k) for k in ("telegram:1", "cli:direct", None, "")} == {SHARED}


def test_first_matching_rule_wins_and_unmatched_keys_are_shared() -> None:
    assert TELEGRAM.scope_of("telegram:-1001234") == SHARED  # the group, before the catch-all
    assert TELEGRAM.scope_of("telegram:42") == "user:42"
    assert TELEGRAM.scope_of("slack:C01") == "team:slack"
    assert TELEGRAM.scope_of("cli:direct") == SHARED
    assert TELEGRAM.scope_of(None) == SHARED


def test_a_catch_all_makes_unmatched_keys_private() -> None:
    rules = ScopeRules.parse({"telegram:-100*": "shared", "*": "user:{key}"})
    assert rules.scope_of("cli:direct") == "user:cli%3Adirect"
    assert rules.scope_of(None) == "user:%"  # no key: one scope of its own, not the shared one


def test_filled_in_values_cannot_collide_or_escape_their_folder() -> None:
    rules = ScopeRules.parse({"*": "user:{id}"})
    names = {rules.scope_of(k) for k in ("x:alice@example.com", "x:alice_example.com", "x:a/b", "x:a:b", "x:..", "x:")}
    assert len(names) == 6
    for name in names:
        assert scopes.scope_name_problem(name) is None
        path = scopes.scope_files(name)[0]
        assert scopes.scope_of_path(path) == name
        assert path.count("/") == 3  # scopes/user/<one component>/USER.md: no value adds a level
        assert "/." not in path


def test_case_is_folded_so_a_case_insensitive_disk_cannot_merge_two_scopes() -> None:
    rules = ScopeRules.parse({"*": "user:{id}"})
    assert rules.scope_of("slack:U01ABC") == rules.scope_of("slack:u01abc") == "user:u01abc"
    assert rules.scope_of("x:ÄRGER") == rules.scope_of("x:ärger") == "user:%C3%A4rger"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("straße", "strasse"),  # casefold makes ß "ss"
        ("ﬁnn", "finn"),  # a ligature
        ("\u212aate", "kate"),  # the Kelvin sign lowers to ASCII k
        ("ſam", "sam"),  # long s
        ("oδυσσευς", "oδυσσευσ"),  # final sigma
        ("İlker", "ilker"),  # capital I with dot: two characters in lower case
    ],
)
def test_two_values_that_differ_in_more_than_case_are_two_scopes(one: str, other: str) -> None:
    """Different people: their private files must not be one folder (they were, case-folded)."""
    rules = ScopeRules.parse({"*": "user:{id}"})
    assert rules.scope_of(f"x:{one}") != rules.scope_of(f"x:{other}")


@given(st.text(max_size=12), st.text(max_size=12))
def test_values_share_a_scope_only_when_they_differ_in_case_alone(one: str, other: str) -> None:
    rules = ScopeRules.parse({"*": "user:{id}"})
    if rules.scope_of(f"x:{one}") == rules.scope_of(f"x:{other}"):
        assert len(one) == len(other)
        assert all(a == b or a.lower() == b.lower() or a.upper() == b.upper() for a, b in zip(one, other, strict=True))


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        ({"": "user:{id}"}, "empty session-key pattern"),
        ({"x:*": "user:{name}"}, "{name}"),
        ({"x:*": "User:{id}"}, "lower-case"),
        ({"x:*": "user:{id"}, "brace"),
        ({"x:*": "user::{id}"}, "lower-case"),
        ({"x:*": ""}, "empty scope name"),
        ({"x:*": 3}, "a string"),
    ],
)
def test_a_bad_rule_is_refused_naming_it(mapping: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=r"x:\*|empty session-key") as caught:
        ScopeRules.parse(mapping)  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_where_each_scope_writes() -> None:
    assert scopes.scope_files(SHARED) == ("USER.md", "memory/MEMORY.md")
    assert scopes.scope_files("user:alice") == ("scopes/user/alice/USER.md", "scopes/user/alice/MEMORY.md")
    assert scopes.scope_of_path("entities/nix.md") == SHARED
    assert scopes.scope_of_path("scopes/user/alice/MEMORY.md") == "user:alice"
    assert scopes.scope_of_path("scopes/user/alice/notes.md") is None  # below scopes/, nobody's
    assert scopes.scope_of_path("scopes/USER.md") is None


def test_a_private_scope_sees_itself_and_the_shared_files_and_nothing_else() -> None:
    assert scopes.can_see("user:alice", "USER.md")
    assert scopes.can_see("user:alice", "scopes/user/alice/USER.md")
    assert not scopes.can_see("user:bob", "scopes/user/alice/USER.md")
    assert not scopes.can_see(SHARED, "scopes/user/alice/USER.md")
    assert not scopes.can_see("user:alice", "scopes/user/alice/stray.md")
    problem = scopes.read_problem(SHARED, "scopes/user/alice/USER.md")
    assert problem is not None and "another scope" in problem


def test_writes_go_only_to_the_scope_the_entries_came_from() -> None:
    assert scopes.write_problem("user:alice", "scopes/user/alice/USER.md") is None
    assert scopes.write_problem(SHARED, "USER.md") is None
    assert scopes.write_problem(SHARED, "entities/nix.md") is None
    to_shared = scopes.write_problem("user:alice", "USER.md")
    assert to_shared is not None and "private to scope user:alice" in to_shared
    assert "scopes/user/alice/USER.md" in to_shared  # the model is told where the fact may go
    to_other = scopes.write_problem("user:alice", "scopes/user/bob/USER.md")
    assert to_other is not None and "another scope" in to_other
    from_shared = scopes.write_problem(SHARED, "scopes/user/bob/USER.md")
    assert from_shared is not None and "private scope" in from_shared


def test_a_long_value_still_makes_a_scope_name_one_of_its_own() -> None:
    """A scope name longer than 200 characters is no scope at all: the entries of a session key
    that long (or of 22 CJK characters, 9 characters each once encoded) had their facts go
    nowhere. Each value is bounded with a digest of the whole, so two long keys stay two scopes."""
    rules = ScopeRules.parse({"*": "user:{key}"})
    keys = ["telegram:" + "x" * 230, "telegram:" + "x" * 229 + "y", "telegram:" + "数" * 40]
    names = [rules.scope_of(k) for k in keys]
    assert len(set(names)) == 3
    for name in names:
        assert scopes.scope_name_problem(name) is None
        assert scopes.scope_of_path(scopes.scope_files(name)[0]) == name
    repeated = ScopeRules.parse({"*": "{key}:{key}:{key}:{key}"})
    assert scopes.scope_name_problem(repeated.scope_of("x:" + "y" * 60)) is None


def test_a_value_that_reads_shared_is_a_persons_scope_not_the_shared_files() -> None:
    rules = ScopeRules.parse({"mail:*": "{id}"})
    assert rules.scope_of("mail:Shared") != SHARED
    assert scopes.scope_name_problem(rules.scope_of("mail:Shared")) is None
    assert rules.scope_of("mail:Shared") != rules.scope_of("mail:%73hared")


def test_a_colon_inside_a_folder_name_is_no_scopes_file() -> None:
    assert scopes.scope_of_path("scopes/user/alice/USER.md") == "user:alice"
    assert scopes.scope_of_path("scopes/user:alice/USER.md") is None
    assert scopes.write_problem("user:alice", "scopes/user:alice/USER.md") is not None
