"""The compact search index (issue 21): it keeps the words and how often each file holds them,
never a copy of the texts; a file changed in place leaves its old words behind unreferenced,
never answering, until leftovers outnumber the files and the next search builds it anew; the
index of the previous version is removed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_read_search_cache import big_store, cache_bytes, indexes, plain, search

import dream_memory.adapters.search_index.match as index_match
from dream_memory.adapters.search_index import SCHEMA_VERSION


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files in these tests are seconds old; the 2 s racy-git window would keep them out."""
    monkeypatch.setattr(index_match, "RACY_NS", 0)


def test_the_index_holds_words_not_texts(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """A sentence of an indexed file is found through the index, yet the cache folder holds its
    words only, never the sentence as written."""
    root = big_store(make_store)
    (root / "entities" / "e020.md").write_text("# e20\n\n- zebra quokka narwhal graze together\n")
    cache = tmp_path / "cache"
    assert search(root, cache, "quokka")[0] == ["entities/e020.md"]
    paths, stats = search(root, cache, "narwhal zebra")
    assert paths == ["entities/e020.md"] and stats["from_cache"] >= 60
    held = cache_bytes(cache)
    assert b"quokka" in held  # the vocabulary
    assert b"zebra quokka narwhal" not in held


def test_old_words_of_a_changed_file_never_answer(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """A file edited twice in place: its old words stay in the index unreferenced, and a search
    for them finds nothing, exactly as reading the files does."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "needle")
    path = root / "entities" / "e007.md"
    path.write_text("# e7\n\n- the magnet is here\n")
    assert search(root, cache, "magnet")[0] == ["entities/e007.md"]
    path.write_text("# e7\n\n- only hay now\n")
    for query in ("needle", "magnet", "hay", "e7"):
        paths, stats = search(root, cache, query)
        assert paths == plain(root, query), query
        assert stats["rebuilt"] == 0
    assert len(indexes(cache)) == 1


def test_an_index_mostly_of_leftovers_is_built_anew(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """Once more documents belong to no file than there are files (every file rewritten twice),
    the next search reads the store and builds the index anew, answering as the files do; the
    search after that answers from the new index."""
    root, cache = big_store(make_store, count=40), tmp_path / "cache"
    search(root, cache, "needle")
    for round_ in range(2):
        for i in range(40):
            (root / "entities" / f"e{i:03}.md").write_text(f"# e{i}\n\n- round {round_} text {i}\n")
        paths, stats = search(root, cache, "round")
        assert paths == plain(root, "round") and stats["rebuilt"] == 0
    paths, stats = search(root, cache, "text")  # 80 leftovers, fewer than 80 files: built anew
    assert stats["rebuilt"] == 1 and stats["from_cache"] == 0 and paths == plain(root, "text")
    paths, stats = search(root, cache, "round 1")
    assert stats["rebuilt"] == 0 and stats["from_cache"] >= 40 and paths == plain(root, "round 1")


@pytest.mark.parametrize("version", range(2, SCHEMA_VERSION))
def test_the_previous_versions_index_of_the_store_is_removed(
    make_store: Callable[..., Path], tmp_path: Path, version: int
) -> None:
    """Building the index removes this store's index of an earlier version (search-v2, -v3), with
    its write-ahead log and its record; another store's stays."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "x")
    (index,) = indexes(cache)
    old = cache / f"search-v{version}"
    old.mkdir()
    (old / index.name).write_bytes(b"needle text copy")
    (old / f"{index.name}-wal").write_bytes(b"needle")
    (old / f"{index.name}.written").write_bytes(b"its record")
    (old / "another-store.sqlite").write_bytes(b"theirs")
    index.unlink()
    search(root, cache, "x")
    assert sorted(p.name for p in old.iterdir()) == ["another-store.sqlite"]
