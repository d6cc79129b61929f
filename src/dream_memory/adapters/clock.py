"""The system clock, behind the ``Clock`` port so tests can freeze time."""

from __future__ import annotations

import time
from datetime import datetime


class SystemClock:
    def now(self) -> datetime:
        return datetime.now().astimezone()

    def monotonic(self) -> float:
        return time.monotonic()
