"""Building the search index: a build killed at its last step leaves no index under the index's
name (the next search answers from the files and builds it), and a built index answers as the
files do through many later write-backs (which merge the index's segments as they go)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from test_read_search_cache import big_store, indexes, plain, search

import dream_memory.adapters.search_index.match as index_match


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files in these tests are seconds old; the 2 s racy-git window would keep them out."""
    monkeypatch.setattr(index_match, "RACY_NS", 0)


# A search in its own process whose index build is killed (SIGKILL) just before the build's one
# transaction commits: every row is written, nothing is committed or moved into place.
_KILLED_BUILD = textwrap.dedent(
    """
    import os, signal, sys
    import dream_memory.adapters.search_index.location as location
    from dream_memory.app.read import ReadStore

    real_fill = location.fill_new

    class DiesAtCommit:
        def __init__(self, db):
            self.db = db
        def execute(self, sql, *args):
            if sql == "COMMIT":
                os.kill(os.getpid(), signal.SIGKILL)
            return self.db.execute(sql, *args)
        def executemany(self, sql, rows):
            return self.db.executemany(sql, rows)

    location.fill_new = lambda db, *args: real_fill(DiesAtCommit(db), *args)
    root, cache = sys.argv[1], sys.argv[2]
    with ReadStore(root, home="/home/u", cache_dir=cache, cache_min_files=10) as reader:
        reader.search("needle", max_results=50)
    """
)


def test_a_build_killed_midway_leaves_no_index(make_store: Callable[..., Path], tmp_path: Path) -> None:
    root, cache = big_store(make_store), tmp_path / "cache"
    killed = subprocess.run([sys.executable, "-c", _KILLED_BUILD, str(root), str(cache)], check=False)
    assert killed.returncode == -signal.SIGKILL
    assert indexes(cache) == []
    assert [p.name for p in cache.rglob("*.tmp")]  # what it left: pruned by a later build once old
    paths, stats = search(root, cache, "needle")
    assert paths == plain(root, "needle") == ["entities/e007.md"]
    assert stats["rebuilt"] == 1 and len(indexes(cache)) == 1
    again, stats = search(root, cache, "needle")
    assert again == paths and stats["from_cache"] >= 60 and stats["rebuilt"] == 0


def test_many_write_backs_keep_answering_like_the_files(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """Forty-eight searches each after one edit, each writing one file back into the same index
    (FTS5 adds a segment per write and merges 16 at a time): every answer is the files' own."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "needle")
    for round_ in range(48):
        i = round_ + 10
        (root / "entities" / f"e{i:03}.md").write_text(f"# e{i}\n\n- round {round_} word w{round_ % 7}x\n")
        for query in (f"w{round_ % 7}x", "round", "needle"):
            paths, stats = search(root, cache, query)
            assert paths == plain(root, query), (round_, query)
            assert stats["rebuilt"] == 0
