"""The edit rules and the path policy that bound what Dream's tools can do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dream_memory.core import policy
from dream_memory.core.edits import apply_edit, create_file, minimal_edit
from dream_memory.errors import EditRejected, ToolDenied


def test_unique_match_is_replaced() -> None:
    """An old_text found exactly once is replaced, and nothing else changes."""
    assert apply_edit("a\nb\nc\n", "b\n", "B\n", "USER.md") == "a\nB\nc\n"


def test_ambiguous_match_is_an_error_naming_the_lines() -> None:
    """Text occurring twice is refused (never a warning), with the line numbers and what to do."""
    with pytest.raises(EditRejected) as caught:
        apply_edit("- x\n- y\n- x\n", "- x", "- z", "USER.md")
    assert "appears 2 times" in caught.value.message
    assert "lines 1, 3" in caught.value.message
    assert "surrounding lines" in caught.value.message


def test_missing_match_shows_the_closest_lines() -> None:
    """A failed match tells the model which lines are closest, so it can retry exactly."""
    text = "# User\n\n- Prefers dark mode in the editor\n- Lives in Lagos\n"
    with pytest.raises(EditRejected) as caught:
        apply_edit(text, "- Prefers dark mode in editors", "- x", "USER.md")
    assert "not found" in caught.value.message
    assert "3: - Prefers dark mode in the editor" in caught.value.message


def test_noop_edit_is_refused() -> None:
    """An edit that changes nothing is an error: no-op edits once fed a 10M-token loop."""
    with pytest.raises(EditRejected, match="no-op"):
        apply_edit("a\n", "a", "a", "USER.md")


def test_new_file_needs_empty_old_text_and_write_never_overwrites() -> None:
    """edit_file creates only with an empty old_text; write_file refuses an existing file."""
    assert apply_edit(None, "", "# New\n", "entities/x.md") == "# New\n"
    with pytest.raises(EditRejected, match="does not exist"):
        apply_edit(None, "something", "x", "entities/x.md")
    with pytest.raises(EditRejected, match="already exists"):
        create_file("old\n", "new\n", "USER.md")
    assert create_file(None, "body", "entities/x.md") == "body\n"


@given(
    st.lists(st.sampled_from(["# T\n", "\n", "- a\n", "- b\n", "- a\n", "text\n"]), max_size=12),
    st.lists(st.sampled_from(["# T\n", "\n", "- a\n", "- c\n", "more\n"]), max_size=12),
)
def test_minimal_edit_always_applies_and_reproduces_the_target(before: list[str], after: list[str]) -> None:
    """The single edit the offline engine derives from two texts always applies and yields the target."""
    old, new = "".join(before), "".join(after)
    if old == new:
        return
    old_text, new_text = minimal_edit(old, new)
    assert apply_edit(old, old_text, new_text, "memory/MEMORY.md") == new


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "~/.ssh/id_rsa",
        "memory/history.jsonl",
        "memory/.dream_cursor",
        "memory/.dream_state.json",
        "memory/.dream_held/x/held.json",
        "prompts/dream.md",
        "skills/a/run.sh",
        "memory\\MEMORY.md",
        "",
        "memory/../../x.md",
    ],
)
def test_paths_outside_memory_content_are_denied(path: str) -> None:
    """Only memory content files may be written; history, cursors, state and the rest are refused."""
    with pytest.raises(ToolDenied):
        policy.check_writable(path)


@pytest.mark.parametrize(
    "path",
    [
        "USER.md",
        "./SOUL.md",
        "memory/MEMORY.md",
        "skills/release/SKILL.md",
        "entities/ledger-api.md",
        "sections/notes.md",
        "index.md",
        "observations.md",
    ],
)
def test_memory_content_paths_are_allowed(path: str) -> None:
    """The durable files, skills, entities, sections, the index and observations are writable."""
    assert policy.check_writable(path) == path.removeprefix("./")


def test_overlapping_occurrences_count_as_ambiguous() -> None:
    """Text that overlaps itself ("\\n\\n" in "\\n\\n\\n") occurs twice: refused, not edited at a guess."""
    with pytest.raises(EditRejected, match="appears 2 times"):
        apply_edit("\n\n\n", "\n\n", "x", "USER.md")
