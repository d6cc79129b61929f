"""The search cache: kept outside the store, used only while files are unchanged, refreshed from
the changed files, never holding excluded entities, and never able to change an answer."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from read_helpers import snapshot

import dream_memory.app.read as read_module
from dream_memory.app.read import ReadStore


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files in these tests are seconds old; the 2 s racy-git window would keep them out."""
    monkeypatch.setattr(read_module, "_RACY_NS", 0)


def big_store(make_store: Callable[..., Path], count: int = 60) -> Path:
    extra = {f"entities/e{i:03}.md": f"# e{i}\n\n- filler text number {i}\n" for i in range(count)}
    extra["entities/e007.md"] = "# e7\n\n- the needle is here\n"
    return make_store(extra)


def search(root: Path, cache: Path, query: str, *excluded: str) -> tuple[list[str], dict[str, int]]:
    with ReadStore(root, excludes=frozenset(excluded), home="/home/u", cache_dir=cache, cache_min_files=10) as r:
        result = r.search(query, max_results=50)
        return [h.path for h in result.results], r.last_search_stats


def plain(root: Path, query: str, *excluded: str) -> list[str]:
    with ReadStore(root, excludes=frozenset(excluded), home="/home/u") as r:
        return [h.path for h in r.search(query, max_results=50).results]


def blobs(cache: Path) -> list[Path]:
    return sorted(cache.rglob("blob-*.bin"))


def test_cache_is_built_outside_the_store_then_used(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """The first search on a large store builds the cache in the cache folder; the next one answers
    from it without reading the files again, with the same results as no cache."""
    root, cache = big_store(make_store), tmp_path / "cache"
    before = snapshot(root)
    first, stats1 = search(root, cache, "needle")
    assert stats1["rebuilt"] == 1 and stats1["from_cache"] == 0
    assert len(blobs(cache)) == 1
    second, stats2 = search(root, cache, "needle filler")
    assert stats2["from_cache"] >= 60 and stats2["rebuilt"] == 0
    assert first == plain(root, "needle")
    assert second == plain(root, "needle filler")
    for query in ("needle filler", "e7 the", "flakes colmena", '"filler text"'):
        with ReadStore(root, home="/home/u", cache_dir=cache, cache_min_files=10) as r:
            with_cache = r.search(query, max_results=50).to_json()
            assert r.last_search_stats["from_cache"] >= 60
        with ReadStore(root, home="/home/u") as r:
            assert with_cache == r.search(query, max_results=50).to_json()
    assert snapshot(root) == before  # nothing written in the store


def test_changed_added_and_removed_files_are_seen(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """An edit, a new file and a deletion are reflected at once, without waiting for a rebuild."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "needle")
    (root / "entities" / "e007.md").write_text("# e7\n\n- the haystack only\n")
    (root / "entities" / "e010.md").unlink()
    (root / "sections" / "fresh.md").write_text("# fresh\n- a new needle\n")
    paths, stats = search(root, cache, "needle")
    assert paths == ["sections/fresh.md"]
    assert stats["read"] >= 2
    assert search(root, cache, "haystack")[0] == ["entities/e007.md"]
    assert "entities/e010.md" not in search(root, cache, "filler")[0]


def test_same_size_edit_with_mtime_put_back_is_seen(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """An edit that keeps the size and restores the old mtime is still caught (ctime changes)."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "needle")
    path = root / "entities" / "e007.md"
    st = path.stat()
    path.write_text(path.read_text().replace("needle", "magnet"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert search(root, cache, "magnet")[0] == ["entities/e007.md"]
    assert search(root, cache, "needle")[0] == []


def test_many_changes_rebuild_from_changed_files(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """When many files changed, the cache is rebuilt; the old blob is replaced, not accumulated."""
    root, cache = big_store(make_store, count=120), tmp_path / "cache"
    search(root, cache, "needle")
    old = blobs(cache)
    for i in range(40, 80):
        (root / "entities" / f"e{i:03}.md").write_text(f"# e{i}\n\n- changed {i}\n")
    paths, stats = search(root, cache, "changed")
    assert stats["rebuilt"] == 1 and len(paths) == 40
    assert blobs(cache) != old and len(blobs(cache)) == 1
    assert search(root, cache, "changed")[1]["from_cache"] >= 120


def test_excluded_entities_never_reach_the_cache(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """An excluded entity's text is not copied into the cache folder, and is not found."""
    root, cache = big_store(make_store), tmp_path / "cache"
    paths, _ = search(root, cache, "vault", "secret")
    assert paths == []
    (blob,) = blobs(cache)
    assert b"vault" not in blob.read_bytes()
    assert search(root, cache, "vault")[0] == ["entities/secret.md"]  # found once no longer excluded


def test_broken_cache_falls_back(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """A corrupt manifest or a truncated blob is ignored and replaced; answers stay right."""
    root, cache = big_store(make_store), tmp_path / "cache"
    search(root, cache, "needle")
    (manifest,) = cache.rglob("manifest.json")
    manifest.write_text("{not json")
    assert search(root, cache, "needle")[0] == ["entities/e007.md"]
    (blob,) = blobs(cache)
    blob.write_bytes(blob.read_bytes()[:100])
    assert search(root, cache, "needle")[0] == ["entities/e007.md"]
    data = json.loads(manifest.read_text())
    assert data["version"] == 1


def test_unwritable_cache_folder_is_not_an_error(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """When the cache folder cannot be created, search still answers, from the files."""
    root = big_store(make_store)
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x")
    paths, stats = search(root, blocker / "cache", "needle")
    assert paths == ["entities/e007.md"]
    assert stats["rebuilt"] == 0


def test_cache_folder_inside_the_store_is_never_used(make_store: Callable[..., Path]) -> None:
    """A cache folder pointing into the store is ignored, so the store stays read-only."""
    root = big_store(make_store)
    before = snapshot(root)
    assert search(root, root / ".cache", "needle")[0] == ["entities/e007.md"]
    assert snapshot(root) == before


def test_small_stores_keep_no_cache(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """Below the size where it helps, no cache is written at all."""
    root, cache = make_store(), tmp_path / "cache"
    with ReadStore(root, cache_dir=cache) as r:
        r.search("flakes")
    assert not cache.exists()


def test_non_ascii_queries_use_the_cache_too(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """Case-insensitive matching of non-ASCII words gives the same answer with the cache."""
    root, cache = big_store(make_store), tmp_path / "cache"
    (root / "sections" / "cafe.md").write_text("# Café\n- ÜBER straße\n")
    search(root, cache, "x")
    paths, stats = search(root, cache, "über STRASSE")
    assert paths == plain(root, "über STRASSE") == ["sections/cafe.md"]
    assert stats["from_cache"] > 0
