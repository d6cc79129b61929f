"""core.merge.merge_texts: the three-way merge a restore (and an accepted held change) uses.

A change on other lines merges cleanly; a conflict only where both sides changed the same lines,
named as a 1-based line range in ours; prefer="theirs" takes theirs for those lines only. Line
ends (CRLF, a last line without a newline) survive the merge."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dream_memory.core.merge import Merged, merge_texts

TEMPLATE = "# User\n\n## Preferences\n- Likes tea\n"


def test_undoing_lines_keeps_the_lines_appended_right_after_them() -> None:
    """Undoing batch 1's line (base: after batch 1, theirs: before it) keeps batch 2's and 3's
    lines and a hand-added line written right after it, although the changes touch."""
    b1 = TEMPLATE + "- Uses vim\n"
    now = b1 + "- Works nights\n- Has a cat\nmy own line\n"
    assert merge_texts(b1, now, TEMPLATE) == Merged(TEMPLATE + "- Works nights\n- Has a cat\nmy own line\n", ())


def test_lines_inserted_inside_a_removed_run_stay() -> None:
    """Dream's layout: batch 1 added its facts and a blank line under a heading, batch 2 inserted
    its facts after batch 1's last one (before that blank line). Undoing batch 1 removes exactly
    its lines (the blank line git's diff counts as its own included) and keeps batch 2's."""
    base = "## Decisions\n\n- tool 1\n- tool 2\n\n## Solutions\n"
    ours = "## Decisions\n\n- tool 1\n- tool 2\n- tool 3\n- tool 4\n\n## Solutions\n"
    theirs = "## Decisions\n\n## Solutions\n"
    assert merge_texts(base, ours, theirs) == Merged("## Decisions\n\n- tool 3\n- tool 4\n## Solutions\n", ())


def test_changes_that_only_touch_both_apply() -> None:
    """Neighbouring runs dropped on each side (two restores in a row: the first took the blank
    line after the facts), and a rewrite next to a removal, both apply: no line changed on both
    sides, so no conflict (git calls each a conflict)."""
    base = "## Decisions\n\n- tool 1\n- tool 2\n\n## Solutions\n"
    ours = "## Decisions\n\n- tool 1\n- tool 2\n## Solutions\n"
    assert merge_texts(base, ours, "## Decisions\n\n\n## Solutions\n") == Merged("## Decisions\n\n## Solutions\n", ())
    rewritten = "## Decisions\n\n- tool one, renamed\n- tool 2\n\n## Solutions\n"
    dropped = "## Decisions\n\n- tool 1\n\n## Solutions\n"
    assert merge_texts(base, rewritten, dropped).text == "## Decisions\n\n- tool one, renamed\n\n## Solutions\n"
    assert merge_texts(base, dropped, rewritten).text == "## Decisions\n\n- tool one, renamed\n\n## Solutions\n"


def test_a_change_to_the_same_lines_is_a_conflict_in_ours_line_numbers() -> None:
    """When ours changed a line theirs removes, the conflict names that line of ours (1-based,
    inclusive), the text keeps ours; prefer="theirs" removes it and keeps every other line."""
    b1 = TEMPLATE + "- Uses vim\n- Works nights\n"
    now = "intro\n" + TEMPLATE + "- Uses neovim\n- Works nights\n- Has a cat\n"
    merged = merge_texts(b1, now, TEMPLATE)
    assert merged.conflicts == ((6, 7),)
    assert merged.text == now
    forced = merge_texts(b1, now, TEMPLATE, prefer="theirs")
    assert forced == Merged("intro\n" + TEMPLATE + "- Has a cat\n", ((6, 7),))


def test_lines_added_right_after_a_rewritten_line_are_not_part_of_its_conflict() -> None:
    """Ours rewrote the line theirs removes and appended lines right after it: only the rewritten
    line is the conflict, and prefer="theirs" removes it but keeps the appended lines. A rewrite
    into unrelated text is one change with what follows it (no guess which line replaced which)."""
    base = "- Uses vim\n"
    ours = "- Uses neovim\n- Works on the billing service\n"
    assert merge_texts(base, ours, "") == Merged(ours, ((1, 1),))
    assert merge_texts(base, ours, "", prefer="theirs") == Merged("- Works on the billing service\n", ((1, 1),))
    two = "# User\n- Prefers tea\n- Uses vim\n"
    now = "# User\n- Prefers tea\n- Uses neovim\n- Works on the billing service\n"
    assert merge_texts(two, now, "# User\n").conflicts == ((2, 3),)
    unrelated = "- Emacs for everything\n- Works on the billing service\n"
    assert merge_texts(base, unrelated, "", prefer="theirs") == Merged("", ((1, 2),))


def test_both_sides_adding_at_the_same_place_is_a_conflict() -> None:
    """Two different additions at one place are a conflict (which goes first is a choice), even
    with the base line around them unchanged; prefer="theirs" takes theirs there."""
    merged = merge_texts("a\nz\n", "a\nmine\nz\n", "a\ntheirs\nz\n")
    assert merged == Merged("a\nmine\nz\n", ((2, 2),))
    assert merge_texts("a\nz\n", "a\nmine\nz\n", "a\ntheirs\nz\n", prefer="theirs").text == "a\ntheirs\nz\n"


def test_ours_removing_what_theirs_changes_is_a_conflict_before_a_line() -> None:
    """Ours deleted the line theirs rewrites: a conflict with no line of ours, reported as
    (n, n - 1): just before ours' line n."""
    merged = merge_texts("a\nb\nc\n", "a\nc\n", "a\nB\nc\n")
    assert merged == Merged("a\nc\n", ((2, 1),))


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def test_crlf_files_merge_line_by_line_and_stay_crlf() -> None:
    """A CRLF file merges as lines, and lines from theirs take ours' CRLF; a file an editor turned
    into CRLF since the base (LF) still merges cleanly."""
    b1 = TEMPLATE + "- Uses vim\n"
    now = b1 + "- Has a cat\n"
    assert merge_texts(crlf(b1), crlf(now), crlf(TEMPLATE)).text == crlf(TEMPLATE + "- Has a cat\n")
    assert merge_texts(b1, crlf(now), TEMPLATE).text == crlf(TEMPLATE + "- Has a cat\n")
    assert merge_texts(crlf("a\nb\nc\n"), crlf("a\nB\nc\n"), crlf("x\na\nb\nc\n")).text == crlf("x\na\nB\nc\n")


def test_a_last_line_without_newline_stays_so() -> None:
    """A file without a trailing newline keeps that: unchanged in ours, an undo elsewhere leaves
    the last line bare; theirs adding the newline is a change like git's."""
    assert merge_texts("x\na\nb", "x\na\nb\nc", "a\nb") == Merged("a\nb\nc", ())
    assert merge_texts("a\nb", "z\na\nb", "a\nb\n") == Merged("z\na\nb\n", ())
    assert merge_texts("a\n", "a\n", "a") == Merged("a", ())


def test_lines_are_counted_as_git_counts_them() -> None:
    """Only "\\n" ends a line: a form feed or U+2028 inside a line does not shift the line
    numbers of a conflict after it, and a bare "\\r" stays part of its line."""
    base = "a\x0cpage\nb\u2028c\nold\n"
    merged = merge_texts(base, base.replace("old", "mine"), base.replace("old", "theirs"))
    assert merged.conflicts == ((3, 3),)
    assert merge_texts("x\ry\nz\n", "x\ry\nz\nmine\n", "top\nx\ry\nz\n") == Merged("top\nx\ry\nz\nmine\n", ())


def test_unchanged_sides_give_the_other_side_byte_for_byte() -> None:
    """ours == base gives theirs; theirs == base gives ours, mixed line ends included."""
    mixed = "a\r\nb\nc"
    assert merge_texts("q\n", "q\n", mixed).text == mixed
    assert merge_texts("q\n", mixed, "q\n").text == mixed


def test_a_bad_prefer_is_refused() -> None:
    """prefer is "none" or "theirs"; anything else is a programming error, said so."""
    with pytest.raises(ValueError, match="prefer"):
        merge_texts("a", "b", "c", prefer="ours")  # type: ignore[arg-type]


@st.composite
def _edited(draw: st.DrawFn, base: list[str], side: str) -> list[str]:
    """``base`` with lines kept, dropped, rewritten and added: as memory files change, every line
    distinct (repeated lines make the alignment a coin toss, in git as in any diff)."""
    out: list[str] = []
    for n, line in enumerate([*base, None]):
        out += [f"{side}{n}.{k}\n" for k in range(draw(st.sampled_from([0, 0, 0, 0, 0, 1, 2])))]
        if line is not None:
            fate = draw(st.sampled_from(["keep"] * 6 + ["drop", "rewrite"]))
            out += [line] if fate == "keep" else [f"{line.strip()}-{side}\n"] if fate == "rewrite" else []
    return out


@st.composite
def _three(draw: st.DrawFn) -> tuple[str, str, str]:
    base = [f"line {i}\n" for i in draw(st.lists(st.integers(0, 30), unique=True, max_size=12))]
    return "".join(base), "".join(draw(_edited(base, "o"))), "".join(draw(_edited(base, "t")))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@settings(max_examples=200, deadline=None)
@given(texts=_three())
def test_where_git_merges_cleanly_the_result_is_gits(
    tmp_path_factory: pytest.TempPathFactory, texts: tuple[str, str, str]
) -> None:
    """The real client: for random edits of a file on both sides, whenever `git merge-file`
    merges without a conflict, merge_texts gives the same text without a conflict."""
    base, ours, theirs = texts
    folder = Path(tmp_path_factory.mktemp("m"))
    for name, text in {"o": ours, "b": base, "t": theirs}.items():
        (folder / name).write_text(text, encoding="utf-8", newline="")
    proc = subprocess.run(["git", "merge-file", "-p", "o", "b", "t"], cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        return
    assert merge_texts(base, ours, theirs) == Merged(proc.stdout, ())
