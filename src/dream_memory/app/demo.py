"""The bundled sample workspace behind ``dream demo``."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from dream_memory.adapters.workspace import init_workspace


def sample_root() -> Path:
    return Path(str(resources.files("dream_memory") / "data" / "sample"))


def copy_sample(target: Path) -> Path:
    """Copy the sample (history and memory files) to ``target`` and fill in any missing template."""
    shutil.copytree(sample_root(), target, dirs_exist_ok=False)
    init_workspace(target)
    return target
