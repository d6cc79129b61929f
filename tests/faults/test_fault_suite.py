"""The fault suite as CI runs it: the documented 300 trials (seed 1), split over two processes.

What a user would notice if this failed: a crash, a full disk, a racing writer or a misbehaving
model that loses or duplicates history, leaves the cursor ahead of committed memory, corrupts
the repository or commits a secret; or docs/reliability.md quoting figures the suite does not
produce.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from faults_helpers import DOCS

from dream_memory.testing import clean_env

pytestmark = pytest.mark.slow  # the 300-trial fault soak (scripts/test --fast leaves it out)

TRIALS, SEED, SHARDS = 300, 1, 2
MATCHED = ("trials", "faults", "violations")
_ROW = re.compile(
    r"^\|\s*(?:`(?P<kind>[a-z-]+)`|\*\*(?P<total>total)\*\*)\s*\|[^|]*\|(?P<numbers>(?:\s*\d+\s*\|){5})\s*$"
)


def documented_figures() -> dict[str, dict[str, int]]:
    """The figures table of docs/reliability.md: kind -> trials, faults, checks, violations, known."""
    rows: dict[str, dict[str, int]] = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line.strip())
        if match:
            numbers = [int(n) for n in match["numbers"].strip(" |").split("|")]
            kind = match["kind"] or "total"
            rows[kind] = dict(zip(("trials", "faults", "checks", "violations", "known"), numbers, strict=True))
    return rows


def run_sharded(tmp_path: Path) -> list[dict[str, Any]]:
    """`tests/faults/soak/run.py --trials 300 --seed 1 --shard i/2 --json`, both at once."""
    env = clean_env(tmp_path / "home")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).parent / "soak" / "run.py"),
                "--trials",
                str(TRIALS),
                "--seed",
                str(SEED),
                "--shard",
                f"{i}/{SHARDS}",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(1, SHARDS + 1)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=840)
        assert out.strip(), f"shard printed no JSON (exit {proc.returncode}): {err[-2000:]}"
        results.append(json.loads(out))
    return results


@pytest.mark.timeout(900)
def test_the_fault_suite_finds_no_violation_and_matches_the_documented_figures(tmp_path: Path) -> None:
    """300 trials of crashes, full disks, concurrent writers, bad models and random inputs leave
    every invariant intact (0 violations), and their figures (trials, faults injected, violations
    per kind) are exactly the ones docs/reliability.md shows for this command and seed."""
    shards = run_sharded(tmp_path)
    measured: dict[str, dict[str, int]] = {}
    violations: list[str] = []
    for shard in shards:
        for row in shard["figures"]:
            mine = measured.setdefault(row["kind"], dict.fromkeys(MATCHED, 0))
            for key in MATCHED:
                mine[key] += row[key]
        for outcome in shard["outcomes"]:
            violations += [
                f"{outcome['kind']} #{outcome['index']} ({outcome['detail']}): {v}" for v in outcome["violations"]
            ]
    assert measured["total"]["trials"] >= 200
    assert violations == [], "\n".join(violations)
    documented = {kind: {key: row[key] for key in MATCHED} for kind, row in documented_figures().items()}
    assert documented == measured, (
        "docs/reliability.md is out of date: regenerate its table with "
        f"`.venv/bin/python tests/faults/soak/run.py --trials {TRIALS} --seed {SEED} --markdown`"
    )
