"""Search as values (core.search): query terms, ranking, previews and relevant sections."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dream_memory.app.read.search import PLAIN_FILE
from dream_memory.core.index_table import safe_relative
from dream_memory.core.paths import serve_problem
from dream_memory.core.search import (
    Query,
    Score,
    check_max_results,
    fold_bytes,
    parse_query,
    preview_lines,
    relevant_sections,
    score,
    split_sections,
    term_counts,
    top,
)
from dream_memory.errors import InputError


def test_query_terms() -> None:
    """Words are matched case-insensitively, "quoted phrases" stay whole, repeats count once."""
    q = parse_query('Nix  "Flake Lock" nix  Über')
    assert q.terms == ("nix", "flake lock", "über")


@pytest.mark.parametrize("bad", ["", "   ", '""', "x" * 1001, " ".join(f"w{i}" for i in range(17))])
def test_unusable_queries_are_input_errors(bad: str) -> None:
    """An empty, overlong or too-wide query is bad usage (exit 2), not an empty result."""
    with pytest.raises(InputError):
        parse_query(bad)


def test_max_results_outside_1_to_50_is_refused() -> None:
    """How many sources a search returns is 1..50; anything else is bad input (exit 2), never
    quietly changed to something the caller did not ask for."""
    assert [check_max_results(n) for n in (1, 10, 50)] == [1, 10, 50]
    for bad in (-3, 0, 51, 1000, True):
        with pytest.raises(InputError, match=r"1\.\.50"):
            check_max_results(bad)


def docs() -> list[tuple[str, str, str]]:
    """(path, text, name) of six sources."""
    return [
        ("entities/c.md", "alpha\nbeta\n", "c"),
        ("entities/a.md", "alpha beta alpha\n", "a"),
        ("entities/b.md", "alpha beta alpha\n", "b"),
        ("sections/alpha.md", "alpha only\n", "alpha"),
        ("sections/h.md", "# Beta notes\nalpha\n", "h"),
        ("entities/z.md", "nothing here\n", "z"),
    ]


def score_of(text: str, name: str, query: Query) -> Score | None:
    """The file path's score: the one rule fed by the text's own counts."""
    return score(*term_counts(fold_bytes(text.encode("utf-8")), query), name, query)


def search_texts(sources: list[tuple[str, str, str]], text: str, max_results: int = 10) -> list[str]:
    """The paths of the best sources, best first, as search ranks them."""
    query = parse_query(text)
    scored = [(s, path, None) for path, body, name in sources if (s := score_of(body, name, query)) is not None]
    return [path for _, path, _ in top(scored, check_max_results(max_results))]


def test_ranking_order() -> None:
    """Sources rank by terms covered, then name/heading hits, then hits, then path."""
    hits = search_texts(docs(), "alpha beta")
    assert hits == [
        "sections/h.md",
        "entities/a.md",
        "entities/b.md",
        "entities/c.md",
        "sections/alpha.md",
    ]
    assert "entities/z.md" not in hits


def test_ranking_is_deterministic_whatever_the_input_order() -> None:
    """The same sources and query give the same answer, however the sources are listed."""
    expected = search_texts(docs(), "alpha beta")
    rng = random.Random(7)
    for _ in range(20):
        shuffled = docs()
        rng.shuffle(shuffled)
        assert search_texts(shuffled, "alpha beta") == expected


def test_limit_applies_after_ranking() -> None:
    """max_results keeps the best sources, not the first ones listed."""
    assert search_texts(docs(), "alpha beta", max_results=1) == ["sections/h.md"]


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=400),
    st.lists(st.text("abcdefgKkßİı #", min_size=1, max_size=5).filter(lambda s: s.strip()), min_size=1, max_size=4),
)
def test_score_from_bytes_agrees_with_the_decoded_text(text: str, words: list[str]) -> None:
    """Scoring raw bytes (the fast path for big stores, and the search index's folding) gives
    the score the decoded text's own rule gives, for any text and any query."""
    query = parse_query(" ".join(f'"{w.strip()}"' for w in words))
    folded = fold_bytes(text.encode("utf-8"))
    assert folded == text.casefold().encode("utf-8")
    lowered = text.casefold()
    covered = [t for t in query.terms if t in lowered]
    headings = "\n".join(line for line in lowered.split("\n") if _is_heading(line))
    expected = (
        Score(
            len(covered),
            sum(t in "name" for t in query.terms) + sum(t in headings for t in covered),
            sum(lowered.count(t) for t in covered),
        )
        if covered
        else None
    )
    assert score_of(text, "name", query) == expected


def _is_heading(line: str) -> bool:
    marks = len(line) - len(line.lstrip("#"))
    return 1 <= marks <= 6 and (len(line) == marks or line[marks] in " \t")


def test_previews_prefer_lines_with_more_terms() -> None:
    """At most three lines per source: those holding most terms, shown in file order with numbers."""
    text = "alpha\nbeta\nalpha beta\nalpha\nalpha beta again\n"
    lines = preview_lines(text, parse_query("alpha beta"))
    assert [(h.line_no, h.text) for h in lines] == [(1, "alpha"), (3, "alpha beta"), (5, "alpha beta again")]


def test_long_lines_are_clipped_around_the_hit() -> None:
    """A long matching line is shown as a window around the match, not whole."""
    line = "x" * 1000 + " needle " + "y" * 1000
    (hit,) = preview_lines(line, parse_query("needle"))
    assert "needle" in hit.text
    assert len(hit.text) <= 242
    assert hit.text.startswith("…") and hit.text.endswith("…")


def test_headings_count_as_name_hits() -> None:
    """A term in a heading lifts a source above one that only mentions it."""
    heading = score_of("# Colmena\nuse it\n", "x", parse_query("colmena"))
    mention = score_of("we use colmena\n", "x", parse_query("colmena"))
    assert heading is not None and mention is not None
    assert heading.name_hits == 1 and mention.name_hits == 0
    assert score_of("#hashtag colmena\n", "x", parse_query("hashtag")) is not None


MARKDOWN = """\
Intro mentions flakes once.

# Hosts
laptop and server

## Flakes
flakes pinned; flakes updated weekly

```
# not a heading: flakes
```

# Deploys
colmena deploys the flakes
"""


def test_split_sections_by_headings() -> None:
    """Every heading starts a section; a # line inside a code fence does not."""
    sections = split_sections(MARKDOWN)
    assert [(s.heading, s.level, s.start_line) for s in sections] == [
        ("", 0, 1),
        ("Hosts", 1, 3),
        ("Flakes", 2, 6),
        ("Deploys", 1, 13),
    ]
    assert sections[2].end_line == 12


def test_relevant_sections_of_one_text() -> None:
    """The sections of a text that hold query terms, best first (Dream and context use this)."""
    found = relevant_sections(MARKDOWN, "flakes colmena")
    assert [s.heading for s in found] == ["Deploys", "Flakes", ""]
    assert found[0].terms_covered == 2
    assert relevant_sections(MARKDOWN, "flakes", max_sections=1)[0].heading == "Flakes"
    assert relevant_sections(MARKDOWN, "absent") == []


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.from_regex(PLAIN_FILE, fullmatch=True),
        st.sampled_from(["entities/a.md", "sections/x/y-z_1.md", "entities/GIT.md", "entities/git~1.md"]),
    )
)
def test_a_plain_file_cell_is_one_the_read_side_serves_as_it_is(cell: str) -> None:
    """search's fast path for the usual File cell agrees with the full rules it skips."""
    if PLAIN_FILE.fullmatch(cell):
        assert safe_relative(cell) == cell
        assert serve_problem(cell) is None
