"""What every benchmark module returns, so ``bench/run`` can gate and print them uniformly.

A benchmark module ``bench/bench_<topic>.py`` defines ``run(quick: bool) -> list[Section]`` and
can be run alone (``python bench/bench_<topic>.py [--quick]``), printing its tables.

Gating rule (issue 9): only deterministic figures (token counts, calls, entries, commits) and
ratios measured side by side in the same run are compared with ``bench/baseline.json``; wall
times are reported, never gated.
"""

from __future__ import annotations

import json
import platform
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Section:
    key: str  # stable id, e.g. "git.commit"; used in baseline.json
    title: str
    columns: list[str]
    rows: list[list[Any]]
    command: str  # the command that reproduces this table
    notes: list[str] = field(default_factory=list)
    # name -> value; compared exactly-ish (2x rule) against the baseline
    deterministic: dict[str, float] = field(default_factory=dict)
    # name -> ratio of two timings taken in the same run (lower is better); gated at 2x baseline
    ratios: dict[str, float] = field(default_factory=dict)

    def to_markdown(self) -> str:
        out = [f"### {self.title}", "", f"`{self.command}`", ""]
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        for row in self.rows:
            out.append("| " + " | ".join(_fmt(v) for v in row) + " |")
        for note in self.notes:
            out += ["", note]
        return "\n".join(out) + "\n"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@contextmanager
def timer() -> Iterator[Callable[[], float]]:
    start = time.perf_counter()
    elapsed: list[float] = []
    yield lambda: elapsed[0] if elapsed else time.perf_counter() - start
    elapsed.append(time.perf_counter() - start)


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timings of ``fn()`` in seconds (least disturbed by noise)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_mb(children: bool = False) -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_maxrss / 1024.0


def machine() -> dict[str, str]:
    import os

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": str(os.cpu_count()),
        "processor": platform.processor() or platform.machine(),
    }


def main(run: Callable[[bool], list[Section]]) -> None:
    """Standalone entry: ``python bench/bench_x.py [--quick] [--json]``."""
    quick = "--quick" in sys.argv
    sections = run(quick)
    if "--json" in sys.argv:
        print(json.dumps([s.to_json() for s in sections], indent=2))
    else:
        for section in sections:
            print(section.to_markdown())
