"""A clock tests can hold still or move by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FrozenClock:
    """Implements the ``Clock`` port. ``now()`` returns the frozen moment; ``advance`` moves it.

    ``step`` (seconds) is added after every ``now()`` call, for tests that want distinct times.
    """

    def __init__(self, start: datetime | str = "2026-04-03T00:02:00+00:00", *, step: float = 0.0) -> None:
        moment = datetime.fromisoformat(start) if isinstance(start, str) else start
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        self._now = moment
        self._step = timedelta(seconds=step)
        self._mono = 1000.0

    def now(self) -> datetime:
        current = self._now
        self._now += self._step
        return current

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
