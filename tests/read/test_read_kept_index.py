"""A long-lived reader (a watched ``ReadStore``, ``dream mcp``) keeps its search index open and
its sources between searches: while nothing changes it answers without redoing that work, and
whatever changes (a file edited in place, the index written or replaced by another process, the
index removed) is answered exactly as a plain scan answers."""

from __future__ import annotations

import os
import sqlite3
import sys
from array import array
from pathlib import Path

import pytest
from read_helpers import plain, rewrite_in_place, watched

import dream_memory.adapters.search_index.match as index_match
from dream_memory.adapters.search_index.files import SCHEMA_VERSION, FileTable
from dream_memory.adapters.store_watch import StoreWatch
from dream_memory.app.read import ReadStore

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
    pytest.mark.usefixtures("no_racy_window"),
]


def same_as_plain(root: Path, cache: Path, watch: StoreWatch, query: str) -> dict[str, int]:
    got, stats = watched(root, cache, watch, query)
    assert got == plain(root, query)
    return stats


def index_file(cache: Path) -> Path:
    (found,) = (cache / f"search-v{SCHEMA_VERSION}").glob("*.sqlite")
    return found


@pytest.fixture
def partitions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the index was asked which files it may answer for (once per search that
    could not reuse the last one's answer)."""
    calls: list[int] = []
    real = index_match.OpenIndex.partition

    def counted(self: index_match.OpenIndex, sources: object, stats: object) -> object:
        calls.append(1)
        return real(self, sources, stats)  # type: ignore[arg-type]

    monkeypatch.setattr(index_match.OpenIndex, "partition", counted)
    return calls


def test_searches_over_an_unchanged_store_reuse_the_last_ones_work(
    root: Path, tmp_path: Path, watch: StoreWatch, partitions: list[int]
) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")  # builds the index
    same_as_plain(root, cache, watch, "filler")  # the index opened and kept
    done = len(partitions)
    for query in ("filler", "number 7", "e3", "nothing"):
        stats = same_as_plain(root, cache, watch, query)
    assert len(partitions) == done  # nothing changed: nothing redone
    assert stats["from_cache"] > 40


def test_an_in_place_edit_after_warm_searches_is_seen(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """Same size, the mtime put back: only the watch's event tells, and it ends the reuse."""
    cache = tmp_path / "cache"
    for _ in range(3):
        same_as_plain(root, cache, watch, "needle")
    target = root / "entities" / "e011.md"
    rewrite_in_place(target, b"filler", b"needle")
    got, _ = watched(root, cache, watch, "needle")
    assert got == ["entities/e011.md:1"] == plain(root, "needle")
    # And back again, twice in a row (the second answered from the kept state).
    rewrite_in_place(target, b"needle", b"filler")
    for _ in range(2):
        got, _ = watched(root, cache, watch, "needle")
        assert got == [] == plain(root, "needle")


def test_the_index_written_by_another_process_is_read_again(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """Another connection empties the recorded file table: the kept one must not answer from
    its old copy (every file is then read from the store, and indexed again)."""
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")
    assert same_as_plain(root, cache, watch, "filler")["from_cache"] > 40
    other = sqlite3.connect(index_file(cache), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        FileTable([], array("q"), {}).write(other)
        other.execute("COMMIT")
    finally:
        other.close()
    stats = same_as_plain(root, cache, watch, "filler")
    assert stats["from_cache"] == 0 and stats["indexed"] > 40
    assert same_as_plain(root, cache, watch, "filler")["from_cache"] > 40


def test_a_removed_or_replaced_index_is_not_answered_from(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")
    same_as_plain(root, cache, watch, "filler")
    path = index_file(cache)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    stats = same_as_plain(root, cache, watch, "filler")
    assert stats["from_cache"] == 0 and stats["rebuilt"] == 1
    # Replaced by a copy (another inode) that records no files: the copy is what is read.
    same_as_plain(root, cache, watch, "filler")
    copy = path.with_name("copy.sqlite")
    db = sqlite3.connect(path)
    try:
        db.execute("VACUUM INTO ?", (str(copy),))
    finally:
        db.close()
    other = sqlite3.connect(copy, isolation_level=None)
    try:
        FileTable([], array("q"), {}).write(other)
    finally:
        other.close()
    os.replace(copy, path)
    stats = same_as_plain(root, cache, watch, "filler")
    assert stats["from_cache"] == 0


def test_a_search_while_another_holds_the_kept_index_opens_its_own(
    root: Path, tmp_path: Path, watch: StoreWatch
) -> None:
    from dream_memory.app.read import store as read_store

    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")
    same_as_plain(root, cache, watch, "filler")
    kept = read_store._KEPT_INDEXES[watch]
    with kept.lock:  # another thread's search, still running
        assert same_as_plain(root, cache, watch, "filler")["from_cache"] > 40
    assert same_as_plain(root, cache, watch, "filler")["from_cache"] > 40


def test_repeated_queries_answer_what_a_scan_answers_at_every_limit(
    root: Path, tmp_path: Path, watch: StoreWatch
) -> None:
    """The kept best candidates of a query serve any limit, phrases and the files read included."""
    cache = tmp_path / "cache"
    for _ in range(3):
        for query in ("filler", '"text number"', "number e1", "nothing", "e"):
            for limit in (1, 3, 50):
                with ReadStore(root, home="/home/u", cache_dir=cache, cache_min_files=10, watch=watch) as r:
                    got = r.search(query, max_results=limit)
                with ReadStore(root, home="/home/u") as r:
                    want = r.search(query, max_results=limit)
                assert got.to_json() == want.to_json()
