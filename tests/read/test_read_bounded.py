"""Bounded reads (core.bounded): the 200-line / 16 KiB limits, the marker, and reading on."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dream_memory.core.bounded import MARKER_PREFIX, MAX_BYTES, MAX_LINES, bound_lines, bound_text, utf8_prefix

# Text as it comes out of a UTF-8 decode (no lone surrogates), with wide characters mixed in.
chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r")
lines_strategy = st.lists(st.text(chars, max_size=300), max_size=60)
limits = st.tuples(st.integers(min_value=3, max_value=40), st.integers(min_value=300, max_value=4000))


def output_lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text else []


def read_all(lines: list[str], max_lines: int, max_bytes: int, header: str = "") -> tuple[list[str], list[int]]:
    """Follow the markers page after page; returns the content lines seen and the offsets used."""
    seen: list[str] = []
    offsets: list[int] = []
    offset = 1
    for _ in range(len(lines) + 2):
        offsets.append(offset)
        page = bound_lines(lines, offset_line=offset, max_lines=max_lines, max_bytes=max_bytes, header=header)
        body = output_lines(page.text)[len([h for h in header.split("\n") if h]) :]
        if page.truncated:
            body = body[:-1]
        seen += body
        if page.next_line is None:
            break
        offset = page.next_line
    return seen, offsets


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lines_strategy, lim=limits, offset=st.integers(min_value=1, max_value=70), provisional=st.booleans())
def test_never_over_either_limit(lines: list[str], lim: tuple[int, int], offset: int, provisional: bool) -> None:
    """Whatever the file holds, an answer never has more lines or bytes than the limits allow."""
    max_lines, max_bytes = lim
    header = "> Provisional: unverified" if provisional else ""
    page = bound_lines(lines, offset_line=offset, max_lines=max_lines, max_bytes=max_bytes, header=header)
    assert len(output_lines(page.text)) <= max_lines
    assert len(page.text.encode("utf-8")) <= max_bytes
    page.text.encode("utf-8").decode("utf-8")  # valid UTF-8, no split character


@settings(max_examples=300, deadline=None)
@given(lines=lines_strategy, lim=limits, offset=st.integers(min_value=1, max_value=70))
def test_marker_exactly_when_truncated(lines: list[str], lim: tuple[int, int], offset: int) -> None:
    """The [truncated] line appears exactly when something from the offset on is not shown."""
    max_lines, max_bytes = lim
    page = bound_lines(lines, offset_line=offset, max_lines=max_lines, max_bytes=max_bytes)
    rest = lines[offset - 1 :]
    fits = len(rest) <= max_lines and sum(len(x.encode()) + 1 for x in rest) <= max_bytes
    shown = output_lines(page.text)
    assert page.truncated == (not fits)
    assert (bool(shown) and shown[-1].startswith(MARKER_PREFIX)) == page.truncated
    if page.truncated:
        assert f"--offset-line {page.next_line}" in shown[-1]


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.text(chars, max_size=60), max_size=80),
    lim=st.tuples(st.integers(min_value=3, max_value=30), st.integers(min_value=400, max_value=3000)),
)
def test_offset_line_continues_where_it_stopped(lines: list[str], lim: tuple[int, int]) -> None:
    """Following each marker's --offset-line reads every line exactly once, in order."""
    seen, offsets = read_all(lines, *lim)
    assert seen == lines
    assert offsets == sorted(set(offsets))


def test_untruncated_text_is_returned_as_is() -> None:
    """A small file comes back whole, without a marker."""
    page = bound_text("a\r\nb\n")
    assert page.text == "a\nb\n"
    assert not page.truncated and page.next_line is None and page.last_line == 2


def test_exactly_200_lines_is_not_truncated() -> None:
    """A file of exactly 200 short lines fits: no marker is added."""
    page = bound_lines([f"line {i}" for i in range(MAX_LINES)])
    assert not page.truncated
    assert len(output_lines(page.text)) == MAX_LINES


def test_201_lines_shows_199_and_the_marker() -> None:
    """One line too many: the marker takes the last slot and says where to go on."""
    page = bound_lines([f"line {i}" for i in range(1, 202)])
    shown = output_lines(page.text)
    assert len(shown) == MAX_LINES
    assert shown[-1] == "[truncated] showing lines 1-199; read on with --offset-line 200"
    assert page.next_line == 200


def test_byte_limit_with_wide_characters() -> None:
    """16 KiB is counted in UTF-8 bytes: multibyte text is cut earlier and never mid-character."""
    page = bound_lines(["é" * 100] * 200)  # 201 bytes per line
    assert page.truncated
    assert len(page.text.encode("utf-8")) <= MAX_BYTES
    assert page.last_line == 81  # 81 x 201 bytes + the marker fit; an 82nd line would not


def test_one_huge_line_is_cut_and_reading_goes_on() -> None:
    """A single line longer than 16 KiB is shown cut, and the next read starts after it."""
    page = bound_lines(["x" * 50_000, "after"])
    assert page.truncated and page.line_cut
    assert len(page.text.encode()) <= MAX_BYTES
    assert "line 1 is longer than the limit" in page.text
    assert bound_lines(["x" * 50_000, "after"], offset_line=page.next_line or 0).text == "after\n"


def test_offset_past_the_end_is_empty() -> None:
    """Asking for a line after the end gives an empty, untruncated answer."""
    page = bound_lines(["a"], offset_line=5)
    assert page.text == "" and not page.truncated and page.last_line == 0


def test_lines_are_pulled_lazily() -> None:
    """A huge file is never read whole: at most one line past the answer is consumed."""
    pulled = 0

    def endless():
        nonlocal pulled
        while True:
            pulled += 1
            yield "x"

    bound_lines(endless())
    assert pulled == MAX_LINES + 1


def test_utf8_prefix_never_splits_a_character() -> None:
    """Cutting a string to a byte budget keeps whole characters only."""
    assert utf8_prefix("aé€😀", 4) == "aé"
    assert utf8_prefix("aé€😀", 100) == "aé€😀"
