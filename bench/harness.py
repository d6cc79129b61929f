"""What every benchmark module returns, so ``bench/run`` can gate and print them uniformly.

A benchmark module ``bench/bench_<topic>.py`` defines ``run(quick: bool) -> list[Section]`` and
can be run alone (``python bench/bench_<topic>.py [--quick]``), printing its tables.

Gating rule (issues 9 and 21): only deterministic figures (token counts, calls, entries, commits,
bytes, modules imported) and ratios of comparable work measured side by side in the same run, at a
scale the machine's noise cannot double, are compared with ``bench/baseline.json``. Wall times, and
ratios whose two sides are not the same kind of work or are only milliseconds long (a 10 ms
interpreter start, a 10 ms read beside a 160 ms one), go in ``reported``: printed, never gated.
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
    # name -> ratio of two timings taken in the same run (lower is better); gated at 2x baseline.
    # Only comparable work (both sides doing the same kind of job), each side long enough that a
    # busy machine cannot double one and not the other.
    ratios: dict[str, float] = field(default_factory=dict)
    # name -> a timing or a ratio shown beside the gated figures, never compared with the baseline
    reported: dict[str, float] = field(default_factory=dict)

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


def modules_imported(args: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[int, list[str]]:
    """How many modules ``dream ARGS`` has imported when it exits, and which of them are
    dream-memory's own: a deterministic stand-in for its start-up time (the same interpreter and
    packages give the same count), which noise on a busy machine cannot move."""
    code = (
        "import sys\n"
        f"sys.argv = ['dream', *{args!r}]\n"
        "from dream_memory.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stdout.flush()\n"
        "print('MODULES', len(sys.modules), ' '.join(sorted(m for m in sys.modules if m.startswith('dream_memory'))),"
        " file=sys.stderr)\n"
    )
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("MODULES ")]
    if not lines:
        raise RuntimeError(f"dream {' '.join(args)} printed no module count: {proc.stderr[-500:]}")
    _, count, *ours = lines[-1].split(" ")
    return int(count), [m for m in ours if m]


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
