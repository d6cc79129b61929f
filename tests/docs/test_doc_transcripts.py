"""Docs that cannot drift: every console transcript in README.md and docs/ runs against a fresh
folder and must print what the page shows (the convention: docs/doc-transcripts.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_transcripts import PAGES, REPO, blocks_with_prompts, output_matches, parse_steps, run_page
from sybil.example import SybilFailure

PAGE_IDS = [str(page.relative_to(REPO)) for page in PAGES]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_transcript_of_the_page_prints_what_it_shows(page: Path, tmp_path: Path) -> None:
    """Each ``$`` command of the page, run in order in one shell on a clean machine (an empty
    HOME, no DREAM_* variables, no API key), prints the lines the page shows under it."""
    root = tmp_path / "demo"
    root.mkdir()
    run_page(page, root)


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_transcript_is_a_console_block_that_runs_or_says_why_not(page: Path) -> None:
    """A block holding ``$ `` prompt lines is a ```console block (so it runs), or is preceded by
    ``<!-- skip: next "reason" -->`` naming why it cannot run on a test machine."""
    unmarked = [
        f"{page.name}:{line} (```{language})"
        for line, language, skipped in blocks_with_prompts(page.read_text(encoding="utf-8"))
        if language != "console" and not skipped
    ]
    assert not unmarked, f"transcripts that never run: {unmarked}"


@pytest.mark.slow
def test_the_test_fails_when_a_documented_output_line_is_edited(tmp_path: Path) -> None:
    """A copy of a page with one output line changed (a word of `dream init`'s output) fails,
    naming the command and showing both versions; the unedited copy passes."""
    page = REPO / "docs" / "integration.md"
    text = page.read_text(encoding="utf-8")
    assert "  created USER.md\n" in text
    good = tmp_path / "good.md"
    good.write_text(text, encoding="utf-8")
    (tmp_path / "a").mkdir()
    assert run_page(good, tmp_path / "a") >= 2

    edited = tmp_path / "edited.md"
    edited.write_text(text.replace("  created USER.md\n", "  created USERS.md\n", 1), encoding="utf-8")
    (tmp_path / "b").mkdir()
    with pytest.raises(SybilFailure) as failure:
        run_page(edited, tmp_path / "b")
    message = str(failure.value)
    assert "`$ dream init`" in message
    assert "created USERS.md" in message.split("--- it printed", maxsplit=1)[0]
    assert "created USER.md" in message.split("--- it printed")[1]


@pytest.mark.slow
def test_a_changed_number_in_a_report_line_fails(tmp_path: Path) -> None:
    """Numbers are exact (only SHAs, timestamps and ``...`` are loose): a token count edited in
    the copy of a page fails."""
    page = REPO / "docs" / "integration.md"
    text = page.read_text(encoding="utf-8")
    match = re.search(r"1 commit\(s\), (\d+) tokens", text)
    assert match
    edited = tmp_path / "edited.md"
    edited.write_text(text.replace(match.group(0), f"1 commit(s), {int(match.group(1)) + 1} tokens"), encoding="utf-8")
    (tmp_path / "b").mkdir()
    with pytest.raises(SybilFailure, match="dream run --model offline"):
        run_page(edited, tmp_path / "b")


def test_volatile_parts_match_loosely_and_nothing_else() -> None:
    """SHAs and timestamps match any other SHA or timestamp, ``...`` any text in a line and a
    ``...`` line any lines; the rest of a line is exact."""
    assert output_matches(["committed 5f6450dad0 memory: init"], ["committed 8298c38c30 memory: init"])
    assert not output_matches(["committed 5f6450dad0 memory: init"], ["committed 8298c38c30 memory: edit"])
    assert output_matches(['"at": "2026-04-03T09:00:00"'], ['"at": "2026-12-01T12:51:44.120+00:00"'])
    assert output_matches(["took ... s"], ["took 0.42 s"])
    assert output_matches(["a", "...", "z"], ["a", "z"])
    assert output_matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert not output_matches(["a", "...", "z"], ["a", "b"])
    assert not output_matches(["cursor 0 -> 45"], ["cursor 0 -> 44"])
    assert not output_matches(["12345678 entries"], ["12345679 entries"])  # plain numbers are not SHAs
    # A short SHA drawn with no digit (about one in 800) is still a SHA: versioning.md failed once on "aadbcba".
    assert output_matches(["restored 5f6450d"], ["restored aadbcba"])
    assert not output_matches(["the deadbeef entry"], ["the beefdead entry"])  # 8 letters: a word
    # dream blame's 8-character SHA column can be all digits (one in 43): provenance.md failed once on "22640933".
    blame = "322ba440 2026-12-01 16:16 init                      1| # User"
    assert output_matches([blame], ["22640933 2026-12-02 06:23 init                      1| # User"])
    assert not output_matches([blame], ["22640933 2026-12-02 06:23 init                      1| # Usr"])


def test_a_transcript_is_commands_and_their_output() -> None:
    """``$ `` starts a command; a trailing backslash and a here-document continue it; the lines up
    to the next prompt are its output."""
    steps = parse_steps("$ echo a \\\n  b\na b\n\n$ cat <<'EOF'\n$ not a prompt\nEOF\n$ not a prompt\n")
    assert [s.command for s in steps] == ["echo a \\\n  b", "cat <<'EOF'\n$ not a prompt\nEOF", "not a prompt"]
    assert steps[0].expected == ("a b",) and steps[0].blank_after
    assert steps[1].expected == ()
    with pytest.raises(ValueError, match="output before any"):
        parse_steps("output\n$ echo\n")
