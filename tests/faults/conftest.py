"""Fixtures shared by the fault tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temp folder every user can reach (pytest's own lies below a folder only root may enter),
    for the cases run as another uid; folders a test closed are opened again before removal."""
    folder = Path(tempfile.mkdtemp(prefix="dream-open-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)
