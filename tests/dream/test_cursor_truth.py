"""Which .dream_cursor Dream uses when the file and the committed value disagree."""

from __future__ import annotations

from dream_memory.core.cursor_truth import judge_cursor


def test_a_file_moved_back_is_followed_so_entries_are_dreamt_again_never_skipped() -> None:
    """Moved back by hand (or a restore elsewhere): the lower value wins, and the reason names
    the range that will be dreamt again."""
    check = judge_cursor(3, 7, versioned=True)
    assert (check.value, check.state, check.trouble) == (3, "behind", True)
    assert "4..7" in check.reason


def test_a_missing_file_falls_back_to_the_committed_value() -> None:
    """A deleted or corrupt cursor file does not restart Dream from 0."""
    check = judge_cursor(None, 12, versioned=True)
    assert (check.value, check.state) == (12, "missing")


def test_without_a_committed_cursor_the_file_is_all_there_is() -> None:
    """No repository, or nothing committed yet: the file's value, said as such, and no trouble."""
    assert (judge_cursor(9, None, versioned=False).value, judge_cursor(9, None, versioned=False).state) == (
        9,
        "unversioned",
    )
    uncommitted = judge_cursor(9, None, versioned=True)
    assert (uncommitted.value, uncommitted.state, uncommitted.trouble) == (9, "uncommitted", False)
    assert judge_cursor(5, 5, versioned=True).state == "ok"
