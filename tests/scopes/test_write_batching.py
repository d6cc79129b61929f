"""Dream's batches never mix scopes: a batch ends where the scope of its entries' session keys
changes, the batches stay consecutive runs of the history (so the one .dream_cursor still says
what is dreamt, and a crash anywhere is continued by the next run), and each batch knows its
scope."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from write_scope_helpers import ALICE, ALICE_DIR, ALICE_TEA, BOB, BOB_COFFEE, GROUP, RULES, git, scoped_cli

from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry, plan_batches
from dream_memory.core.scopes import ScopeRules

SCOPES = ScopeRules.parse(RULES)


def _entries(keys: list[str | None]) -> list[HistoryEntry]:
    return [HistoryEntry(i, "2026-04-03 09:00", f"entry {i}", key) for i, key in enumerate(keys, start=1)]


def _plan(entries: list[HistoryEntry], size: int = 10, scoped: bool = True) -> list[tuple[int, int, str]]:
    batches = plan_batches(
        entries,
        max_entries=size,
        max_tokens=10_000,
        count_tokens=len,
        scope_of=SCOPES.scope_of if scoped else None,
    )
    return [(b.cursor_from, b.cursor_to, b.scope) for b in batches]


def test_a_batch_ends_where_the_scope_changes() -> None:
    """alice, alice, bob, group, group, alice: four batches, each of one scope, in history order."""
    keys: list[str | None] = [ALICE, ALICE, BOB, GROUP, GROUP, ALICE]
    assert _plan(_entries(keys)) == [
        (1, 2, "user:alice"),
        (3, 3, "user:bob"),
        (4, 5, "shared"),
        (6, 6, "user:alice"),
    ]


def test_the_size_limits_still_apply_inside_one_scope() -> None:
    """Five Alice entries with a batch size of two: 1..2, 3..4, 5..5, all Alice's."""
    assert _plan(_entries([ALICE] * 5), size=2) == [(1, 2, "user:alice"), (3, 4, "user:alice"), (5, 5, "user:alice")]


def test_entries_without_a_key_or_unmatched_are_shared_with_the_group() -> None:
    """A missing key and a key no rule matches are shared: they batch with the group's entries."""
    assert _plan(_entries([GROUP, None, "cli:direct", GROUP])) == [(1, 4, "shared")]


def test_without_rules_batching_is_what_it_was() -> None:
    """No scope_of: the same batches as before scopes existed, every one shared."""
    keys: list[str | None] = [ALICE, BOB, GROUP, ALICE, BOB]
    assert _plan(_entries(keys), size=2, scoped=False) == [(1, 2, "shared"), (3, 4, "shared"), (5, 5, "shared")]


@given(st.lists(st.sampled_from([ALICE, BOB, GROUP, None, "slack:x"]), min_size=1, max_size=40), st.integers(1, 6))
def test_batches_tile_the_history_and_never_mix_scopes(keys: list[str | None], size: int) -> None:
    """Whatever the keys: the batches cover every entry once, in order (consecutive cursor
    ranges), none is larger than the batch size, and every entry of a batch is of its scope."""
    entries = _entries(keys)
    batches = plan_batches(entries, max_entries=size, max_tokens=10_000, count_tokens=len, scope_of=SCOPES.scope_of)
    assert [e for b in batches for e in b.entries] == entries
    for batch in batches:
        assert len(batch.entries) <= size
        assert {SCOPES.scope_of(e.session_key) for e in batch.entries} == {batch.scope}


# --- a crash mid-run ---------------------------------------------------------------------------

RUNNER = r"""
import os, signal, sys
from dream_memory.testing.faults import fault_hook
site, nth = sys.argv[1], int(sys.argv[2])
seen = [0]
def inject(name, path):
    if name == site:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
with fault_hook(inject):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", "run", "--model", "offline"]
    main()
"""


def _tree(workspace: Path) -> dict[str, str]:
    return {
        p.relative_to(workspace).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(workspace.rglob("*.md"))
        if ".git" not in p.parts and layout.is_content(p.relative_to(workspace).as_posix())
    }


@pytest.mark.parametrize(("site", "nth"), [("git.lock.ref", 2), ("git.lock.ref", 3), ("journal.write", 3)])
def test_a_run_killed_mid_way_is_continued_by_the_next_to_the_same_memory(tmp_path: Path, site: str, nth: int) -> None:
    """SIGKILL at a write of the second or third batch; the next run finishes or redoes that
    batch and the rest. The memory files end exactly as after an uninterrupted run, every
    private fact in its own scope, and the cursor is past the last entry."""
    clean = scoped_cli(tmp_path / "clean")
    clean.configure()
    assert clean.run("run", "--model", "offline").exit_code == 0

    crashed = scoped_cli(tmp_path / "crashed")
    crashed.configure()
    env = {**crashed.env, "PATH": str(Path(sys.executable).parent)}
    killed = subprocess.run([sys.executable, "-c", RUNNER, site, str(nth)], env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert crashed.run("run", "--model", "offline").exit_code == 0

    assert _tree(crashed.workspace) == _tree(clean.workspace)
    assert ALICE_TEA in _tree(crashed.workspace)[f"{ALICE_DIR}USER.md"]
    assert BOB_COFFEE not in "".join(
        t for p, t in _tree(crashed.workspace).items() if not p.startswith("scopes/user/bob/")
    )
    assert (crashed.workspace / layout.DREAM_CURSOR).read_text(encoding="utf-8").strip() == "5"
    assert git(crashed.workspace, "status", "--porcelain") == ""
