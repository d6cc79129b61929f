"""Fixtures for the read-side tests (helpers live in read_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from read_helpers import FILES, write_store

import dream_memory.adapters.search_index.match as index_match
from dream_memory.adapters.store_watch import StoreWatch


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., Path]:
    """make_store(extra files..., base=True): a store folder with the sample files plus extras."""
    counter = [0]

    def build(extra: Mapping[str, str | bytes] | None = None, *, base: bool = True) -> Path:
        counter[0] += 1
        root = tmp_path / f"store{counter[0]}"
        root.mkdir()
        write_store(root, {**(FILES if base else {}), **(extra or {})})
        return root

    return build


@pytest.fixture
def store(make_store: Callable[..., Path]) -> Path:
    return make_store()


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files in these tests are seconds old; the 2 s racy-git window would keep them out of the index."""
    monkeypatch.setattr(index_match, "RACY_NS", 0)


@pytest.fixture
def root(make_store: Callable[..., Path]) -> Path:
    """A store of 40 entities and a section (the store-watch tests)."""
    extra = {f"entities/e{i:03}.md": f"# e{i}\n\n- filler text number {i}\n" for i in range(40)}
    extra["sections/notes.md"] = "# notes\n\n- nothing yet\n"
    return make_store(extra)


@pytest.fixture
def watch(root: Path) -> Iterator[StoreWatch]:
    w = StoreWatch(str(root))
    yield w
    w.close()
