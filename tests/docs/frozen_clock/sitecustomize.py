"""Loaded by every Python process a doc page's shell starts (``PYTHONPATH`` points here).

An entry's timestamp and weekday are part of what Dream sends the model, so a page's token
figures would change with the hour and the day it runs (a 2520 shown on a Wednesday is 2519 on a
Thursday). The pages' shell therefore runs on one fixed moment: ``SystemClock.now`` answers
2026-04-10 09:00 UTC (a Friday) in every process. Only that adapter is touched, when it is first
imported, so other programs and the monotonic durations keep the real clock.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

FROZEN = datetime(2026, 4, 10, 9, 0, tzinfo=UTC)
TARGET = "dream_memory.adapters.clock"


def _now(_self: object) -> datetime:
    return FROZEN


class _FreezeOnImport:
    @staticmethod
    def find_spec(name: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name != TARGET:
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            module.SystemClock.now = _now  # type: ignore[attr-defined]

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _FreezeOnImport())
