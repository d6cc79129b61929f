"""Start-up time of the command line: `dream --help` and `dream status` against `python -c pass`.

Goal (issue 2): `dream --help` under 0.3 s of wall time on a fresh install, which holds only if
that path imports no heavy library (litellm takes 3+ s; pydantic and dulwich a few hundred ms).
The console script is timed as a user runs it, best and median of N runs (warm page cache), with
an empty HOME and no configuration. `dream status` in a fresh workspace stands for the commands
that load settings: with no config file they need no pydantic (issue 16's CI budget: about 80 ms
of every such process). The tests check the import side (tests/store, tests/settings); this measures.

Run: ``.venv/bin/python bench/bench_startup.py [--quick] [--json]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, main, modules_imported

GOAL_SECONDS = 0.3
DIRECTIONS = {"*modules_imported": "lower"}  # fewer is better; more than twice as many fails
HEAVY = ("litellm", "dulwich", "pydantic", "mcp", "openai")


def _times(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    found = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        found.append(time.perf_counter() - start)
    return found


def _imported(env: dict[str, str], args: tuple[str, ...] = ("--help",)) -> list[str]:
    code = (
        f"import sys; sys.argv = ['dream', *{list(args)!r}]\n"
        "from dream_memory.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [line for line in proc.stderr.splitlines() if line.startswith("[")][-1:]


def run(quick: bool) -> list[Section]:
    runs = 5 if quick else 20
    script = Path(sys.executable).parent / "dream"
    with tempfile.TemporaryDirectory(prefix="dream-bench-home-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}
        _times([str(script), "--help"], env, 2)  # warm the page cache
        dream = _times([str(script), "--help"], env, runs)
        python = _times([sys.executable, "-c", "pass"], env, runs)
        subcommand = _times([str(script), "restore", "--help"], env, runs)
        heavy = _imported(env)
        help_modules, _ = modules_imported(["--help"], env)
        workspace = str(Path(home) / "ws")
        subprocess.run([str(script), "init", "-w", workspace], env=env, capture_output=True, check=True)
        status = _times([str(script), "status", "-w", workspace], env, runs)
        status_heavy = _imported(env, ("status", "-w", workspace))
    rows = [
        ["dream --help", min(dream) * 1000, statistics.median(dream) * 1000],
        ["dream restore --help", min(subcommand) * 1000, statistics.median(subcommand) * 1000],
        ["dream status (no config file)", min(status) * 1000, statistics.median(status) * 1000],
        ["python -c pass", min(python) * 1000, statistics.median(python) * 1000],
    ]
    verdict = "met" if statistics.median(dream) < GOAL_SECONDS else "MISSED"
    return [
        Section(
            key="startup.help",
            title="Start-up of the command line",
            columns=["command", f"best of {runs} (ms)", "median (ms)"],
            rows=rows,
            command="python bench/bench_startup.py" + (" --quick" if quick else ""),
            notes=[
                f"Goal: dream --help under {GOAL_SECONDS * 1000:.0f} ms wall: {verdict}. "
                f"Heavy modules imported by dream --help: {heavy[0] if heavy else '?'}; "
                f"{help_modules} modules in all. Heavy modules imported by dream status with no config "
                f"file: {status_heavy[0] if status_heavy else '?'}."
            ],
            # the ratio to a 10 ms interpreter start doubles whenever that start is disturbed:
            # reported; the count of modules --help imports is what start-up regressions move
            deterministic={"help_modules_imported": float(help_modules)},
            reported={"help_over_python": min(dream) / min(python), "status_over_python": min(status) / min(python)},
        )
    ]


if __name__ == "__main__":
    main(run)
