"""The search index holds each file as pieces cut at whitespace (a smaller index: a word's
position in a short piece takes one byte). Cutting must never change an answer: no word is cut,
no piece is lost, and a word's count in a file is the sum over its pieces."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from read_helpers import index_answer_and_plain

import dream_memory.adapters.search_index.match as index_match
import dream_memory.adapters.search_index.write as index_write
from dream_memory.adapters.search_index.files import DOCS_PER_FILE

_WHITESPACE = [" ", "\n", "\t", "\r\n", "\x0b", "\x0c", "   ", "\xa0", "\u2028"]
_word = st.text(min_size=1, max_size=12).map(
    lambda w: b"".join(w.encode("utf-8", "surrogatepass").split()).decode("utf-8", "surrogatepass") or "w"
)
_text = st.lists(st.tuples(_word, st.sampled_from(_WHITESPACE)), max_size=300).map(
    lambda parts: "".join(w + sep for w, sep in parts)
)


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files in these tests are seconds old; the 2 s racy-git window would keep them out."""
    monkeypatch.setattr(index_match, "RACY_NS", 0)


@contextmanager
def piece_chars(size: int) -> Iterator[None]:
    """Pieces of ``size`` bytes and more, so that small texts are cut too (hypothesis runs many
    examples in one test call, which a function-scoped monkeypatch would not see through)."""
    kept = index_write.PIECE_CHARS
    index_write.PIECE_CHARS = size
    try:
        yield
    finally:
        index_write.PIECE_CHARS = kept


def _index_words(text: str) -> Counter[bytes]:
    """The words as the index sees them: split at ASCII whitespace only."""
    return Counter(text.encode("utf-8", "surrogatepass").split())


@settings(max_examples=200, deadline=None)
@given(text=_text, size=st.sampled_from([1, 5, 40, index_write.PIECE_CHARS]))
def test_pieces_cut_only_between_words_and_lose_nothing(text: str, size: int) -> None:
    with piece_chars(size):
        found = index_write.pieces(text)
    assert "".join(found) == text
    assert 1 <= len(found) <= DOCS_PER_FILE
    assert sum((_index_words(piece) for piece in found), Counter()) == _index_words(text)
    # Every piece but the last is longer than the piece size and ends on ASCII whitespace.
    for piece in found[:-1]:
        assert len(piece) > size and piece[-1] in " \t\n\r\x0b\x0c"


def test_a_text_without_whitespace_is_one_piece() -> None:
    text = "x\xa0" * (10 * index_write.PIECE_CHARS)
    assert index_write.pieces(text) == [text]


_words = st.text("aAbB:-.ßİΣσς", min_size=1, max_size=5)
_files = st.lists(st.tuples(_words, st.sampled_from([" ", "\n", "\t", "\xa0"])), min_size=1, max_size=60)


@settings(max_examples=30, deadline=None)
@given(
    texts=st.lists(_files, min_size=12, max_size=12),
    query=st.lists(_words, min_size=1, max_size=3),
    size=st.sampled_from([1, 8, 30]),
)
def test_a_file_cut_into_pieces_answers_like_the_file(
    texts: list[list[tuple[str, str]]], query: list[str], size: int
) -> None:
    """Same sources, order, counts and lines from the index (files cut into many pieces, up to
    the cap, so one file's counts are summed over pieces) as from reading the files."""
    with tempfile.TemporaryDirectory() as tmp, piece_chars(size):
        root, cache = Path(tmp) / "store", Path(tmp) / "cache"
        (root / "sections").mkdir(parents=True)
        for i, words in enumerate(texts):
            (root / "sections" / f"s{i:02}.md").write_text("".join(w + sep for w, sep in words), encoding="utf-8")
        with_index, from_files, from_cache = index_answer_and_plain(root, cache, " ".join(query))
        assert from_cache == 12
        assert with_index == from_files


def test_a_word_repeated_through_a_long_file_is_counted_whole(tmp_path: Path) -> None:
    """A 40 KB file holds the word in all of its pieces: the index's count is the file's."""
    root, cache = tmp_path / "store", tmp_path / "cache"
    (root / "sections").mkdir(parents=True)
    for i in range(12):
        body = "".join(f"- line {n} about the Needle, needle-work and {i}\n" for n in range(800 if i == 3 else 3))
        (root / "sections" / f"s{i:02}.md").write_text(body, encoding="utf-8")
    assert len(index_write.pieces((root / "sections" / "s03.md").read_text())) == DOCS_PER_FILE
    with_index, from_files, from_cache = index_answer_and_plain(root, cache, "needle")
    assert from_cache == 12
    assert with_index == from_files
    assert with_index["results"][0]["path"] == "sections/s03.md"
