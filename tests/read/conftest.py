"""Fixtures for the read-side tests (helpers live in read_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from read_helpers import FILES, write_store


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
