"""Workspace.search answers like `dream search --json`, with the same search index for large stores."""

from __future__ import annotations

import os
from pathlib import Path

from dream_memory import Workspace
from dream_memory.app.read import search_store


def test_api_search_keeps_the_index_under_the_users_cache_folder(tmp_path: Path) -> None:
    """On a store of 500+ files the API builds the index in $XDG_CACHE_HOME/dream-memory (never in
    the workspace) and answers exactly as a search without it."""
    cache = tmp_path / "xdg"
    ws = Workspace(tmp_path / "ws", env={"HOME": str(tmp_path), "XDG_CACHE_HOME": str(cache)})
    ws.init()
    sections = ws.path / "sections"
    sections.mkdir(exist_ok=True)
    for i in range(520):
        page = sections / f"s{i:03}.md"
        page.write_text(f"# s{i}\n- filler {i}\n" + ("- the needle is here\n" if i % 100 == 7 else ""))
        os.utime(page, (1_000_000_000, 1_000_000_000))
    expected = search_store(ws.path, "needle", max_results=10).to_json()
    assert ws.search("needle").to_json() == expected
    assert len(list(cache.rglob("*.sqlite"))) == 1
    assert not list(ws.path.rglob("*.sqlite"))
    assert ws.search("needle").to_json() == expected
