"""Stopping a run from outside: a face holds ``stop_on_signals()`` around the run and passes its
``StopFlag`` in; the run checks the flag before every model call and every batch (run.py), so a
SIGTERM or SIGINT ends it between model calls with status ``interrupted``. The handler itself is
I/O and lives in adapters/signals.py; this is the faces' way to it (they call app, not adapters).
"""

from __future__ import annotations

from dream_memory.adapters.signals import STOP_SIGNALS, end_on_signals, exit_at_once, stop_on_signals
from dream_memory.core.stop import StopFlag

__all__ = ["STOP_SIGNALS", "StopFlag", "end_on_signals", "exit_at_once", "stop_on_signals"]
