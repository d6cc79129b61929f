"""`dream context` on very large workspaces (issue 14): time, peak memory and bytes read of the
whole process, against the same command on a tiny workspace.

Goal: the block costs what its budget can use, whatever the store holds: huge durable files, a
stuck Dream with hundreds of thousands of undreamt entries, hundreds of always-on skills. Before
the fix an 11 MB workspace took 7.2 s and 178 MB, and a 112 MB one had not finished after 13
minutes (one run). The gated figure is the ratio of the large workspace's time to the tiny one's, taken
side by side (bounded reads keep it near 1).

Run: ``.venv/bin/python bench/bench_context.py [--quick] [--json]``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, main

COMMAND = ".venv/bin/python bench/bench_context.py"


def generate(root: Path, scale: float, seed: int = 7) -> int:
    """Huge SOUL/USER/MEMORY files, a long undreamt history and many always-on skills; bytes."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(3000)]

    def line(n: int) -> str:
        return "- " + " ".join(rng.choice(words) for _ in range(n))

    (root / "memory").mkdir(parents=True)

    def big(rel: str, lines: int, every: int) -> None:
        with open(root / rel, "w", encoding="utf-8") as handle:
            handle.write("# Big\n\n")
            for i in range(lines):
                if i % every == 0:
                    handle.write(f"\n## Section {i // every}\n\n")
                handle.write(line(14) + "\n")

    big("memory/MEMORY.md", int(300_000 * scale), 50)
    big("USER.md", int(60_000 * scale), 40)
    big("SOUL.md", int(10_000 * scale), 40)
    entries = int(300_000 * scale)
    with open(root / "memory" / "history.jsonl", "w", encoding="utf-8") as handle:
        for cursor in range(1, entries + 1):
            entry = {"cursor": cursor, "timestamp": "2026-04-03 00:02", "content": line(20), "session_key": "cli:x"}
            handle.write(json.dumps(entry) + "\n")
    (root / "memory" / ".cursor").write_text(f"{entries}\n")
    for i in range(max(1, int(300 * scale))):
        skill = root / "skills" / f"s{i:03d}"
        skill.mkdir(parents=True)
        body = "\n".join(line(12) for _ in range(200))
        (skill / "SKILL.md").write_text(f"---\nname: s{i:03d}\nalways: true\n---\n\n# Skill {i}\n\n{body}\n")
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def measure(root: Path, home: Path) -> tuple[float, float, float]:
    """(seconds, peak RSS in MB, MiB read) of one `dream context --json` process."""
    io_file = root.parent / f"io-{root.name}.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(io_file)!r}, 'w').write(open('/proc/self/io').read()))\n"
        "sys.argv = ['dream', *sys.argv[1:]]\n"
        "from dream_memory.entrypoints.cli import main\n"
        "main()\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", code, "context", "--json", "--workspace", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"dream context exited with status {status} on {root}")
    read = 0.0
    if io_file.exists():
        fields = dict(line.split(": ") for line in io_file.read_text().splitlines())
        read = int(fields["rchar"]) / (1024 * 1024)
    return seconds, usage.ru_maxrss / 1024, read


def run(quick: bool) -> list[Section]:
    scales = [0.1] if quick else [0.1, 1.0]
    tmp = Path(tempfile.mkdtemp(prefix="dream-bench-context-"))
    home = tmp / "home"
    home.mkdir()
    rows: list[list[object]] = []
    ratios: dict[str, float] = {}
    try:
        tiny = tmp / "tiny"
        generate(tiny, 0.0005)
        base = min(measure(tiny, home) for _ in range(3))
        rows.append(["tiny", sum(p.stat().st_size for p in tiny.rglob("*") if p.is_file()) / 1e6, *base])
        for scale in scales:
            root = tmp / f"scale-{scale}"
            size = generate(root, scale)
            best = min(measure(root, home) for _ in range(3))
            rows.append([f"x{scale}", size / 1e6, *best])
            ratios[f"context_{scale}_vs_tiny"] = best[0] / base[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [
        Section(
            key="context.large",
            title="dream context on very large workspaces (whole process, best of 3)",
            columns=["workspace", "MB on disk", "seconds", "peak RSS MB", "MiB read"],
            rows=rows,
            command=COMMAND,
            notes=[
                "x1.0: a 30 MB MEMORY.md, 6 MB USER.md, 1 MB SOUL.md, 300,000 undreamt history entries (71 MB) "
                "and 300 always-on skills; x0.1 a tenth of each. MiB read counts every byte the process read, "
                "Python's own start-up included (the tiny row). Before issue 14 (b65c8ea, best of 3): x0.1 "
                "took 7.2 s, 178 MB and read 17.5 MiB; x1.0 had not finished after 13 minutes (one run).",
            ],
            ratios=ratios,
        )
    ]


if __name__ == "__main__":
    main(run)
