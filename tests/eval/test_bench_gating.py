"""`bench/run`'s gate: it fails on a deterministic figure or a same-run ratio that regressed more
than 2x against the committed baseline, never on wall time, and reports a broken module instead
of crashing. Driven on synthetic benchmark modules (real processes, no real benchmark runs)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "bench" / "run"

FAKE_MODULE = """
import json, os, time
from harness import Section

def run(quick):
    spec = json.loads(os.environ.get("FAKE_SPEC_{name}", "{{}}"))
    time.sleep(spec.get("sleep", 0))
    if spec.get("raise"):
        raise RuntimeError("the {name} benchmark broke")
    det = spec.get("det", {{}})
    ratios = dict(spec.get("ratios", {{}}))
    if spec.get("noisy_once"):  # the first run only is slow, as on a busy machine
        marker = spec["noisy_once"]
        if not os.path.exists(marker):
            open(marker, "w").close()
            ratios = {{k: v * 3 for k, v in ratios.items()}}
    return [Section(key="{name}.figures", title="{name} figures", columns=["figure", "value"],
                    rows=[[k, v] for k, v in det.items()], command="python bench/bench_{name}.py",
                    deterministic=det, ratios=ratios)]
"""


def _load_driver() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("bench_run_driver", str(RUN))
    spec = importlib.util.spec_from_loader("bench_run_driver", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_driver"] = module  # dataclasses look their module up while it loads
    loader.exec_module(module)
    return module


driver = _load_driver()
Section = driver.Section


@pytest.fixture
def bench_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bench"
    folder.mkdir()
    for name in ("fake", "other"):
        (folder / f"bench_{name}.py").write_text(FAKE_MODULE.format(name=name), encoding="utf-8")
    return folder


BASE: dict[str, Any] = {
    "det": {"prompt_tokens": 1000, "entries": 200, "facts_lost": 0},
    "ratios": {"ours_over_git": 1.2},
}


def bench(bench_dir: Path, *args: str, fake: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FAKE_SPEC_fake": json.dumps(fake or BASE), "FAKE_SPEC_other": json.dumps(BASE)}
    argv = [sys.executable, str(RUN), "--bench-dir", str(bench_dir), "--baseline", str(bench_dir / "baseline.json")]
    argv += ["--quick", "--only", "fake", "other", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def with_figure(kind: str, name: str, value: float, **extra: Any) -> dict[str, Any]:
    spec = json.loads(json.dumps(BASE))
    spec[kind][name] = value
    return {**spec, **extra}


def test_directions_follow_the_documented_rules() -> None:
    """Token counts and calls are lower-is-better, lost facts must stay 0, counts of work done may
    neither halve nor double, and a module's own DIRECTIONS wins."""
    assert driver.direction_for("prompt_100kb")[0] == "lower"
    assert driver.direction_for("completion_1kb")[0] == "lower"
    assert driver.direction_for("llm_calls")[0] == "lower"
    assert driver.direction_for("facts_lost")[0] == "lower"
    assert driver.direction_for("commits")[0] == "both"
    assert driver.direction_for("matched_rare_1000", {"matched_*": "higher"})[0] == "higher"
    judge = driver.judge
    assert judge(2001, 1000, "lower") == "regressed"
    assert judge(2000, 1000, "lower") == "ok"
    assert judge(400, 1000, "lower") == "improved"
    assert judge(1, 0, "lower") == "regressed"  # a baseline of 0 must stay 0
    assert judge(0, 0, "lower") == "ok"
    assert judge(99, 200, "both") == "regressed"
    assert judge(401, 200, "both") == "regressed"
    assert judge(150, 200, "both") == "ok"
    assert judge(49, 100, "higher") == "regressed"
    assert judge(5, None, "lower") == "new"


def test_compare_gates_deterministic_figures_and_same_run_ratios_only() -> None:
    """On synthetic Sections: a doubled-plus token count and ratio regress; rows (the wall
    times a table shows) are never compared; a figure the baseline lacks is new."""
    section = Section(
        key="x.tokens",
        title="t",
        columns=["size", "wall (s)"],
        rows=[["1 KB", 999.0]],
        command="python bench/bench_x.py",
        deterministic={"prompt_1kb": 2100.0, "facts_lost": 0.0, "fresh": 3.0},
        ratios={"ours_over_grep": 2.5},
    )
    baseline = {
        "x.tokens": {
            "deterministic": {"prompt_1kb": 1000, "facts_lost": 0, "gone": 1},
            "ratios": {"ours_over_grep": 1.2},
        }
    }
    comparisons, missing = driver.compare([section], baseline)
    verdicts = {c.name: c.verdict for c in comparisons}
    assert verdicts == {"prompt_1kb": "regressed", "facts_lost": "ok", "fresh": "new", "ours_over_grep": "regressed"}
    assert missing == ["x.tokens: gone"]
    warnings = driver.wall_warnings({"x": 30.0, "y": 1.0}, {"x": 10.0, "y": 1.0})
    assert len(warnings) == 1 and "not gated" in warnings[0]


@pytest.mark.slow
def test_regressions_over_2x_fail_and_wall_time_never_does(bench_dir: Path) -> None:
    """Against a baseline recorded by --update-baseline: within 2x passes, beyond 2x fails
    (tokens doubled, a lost fact, entries halved, a same-run ratio doubled), and a module ten
    times slower only warns."""
    record = bench(bench_dir, "--update-baseline")
    assert record.returncode == 0, record.stderr
    baseline = json.loads((bench_dir / "baseline.json").read_text(encoding="utf-8"))
    assert baseline["modes"]["quick"]["figures"]["fake.figures"]["deterministic"]["prompt_tokens"] == 1000
    assert set(baseline["modes"]["quick"]["wall_s"]) == {"fake", "other"}

    same = bench(bench_dir)
    assert same.returncode == 0, same.stderr
    assert "bench: ok" in same.stderr

    slow = bench(bench_dir, fake={**BASE, "sleep": 1.5})
    assert slow.returncode == 0, slow.stderr
    assert "fake took" in slow.stderr and "not gated" in slow.stderr

    assert bench(bench_dir, fake=with_figure("det", "prompt_tokens", 1900)).returncode == 0
    doubled = bench(bench_dir, fake=with_figure("det", "prompt_tokens", 2100))
    assert doubled.returncode == 1
    assert "regressed: fake.figures deterministic prompt_tokens" in doubled.stderr
    assert "FAIL" in doubled.stderr

    assert bench(bench_dir, fake=with_figure("det", "facts_lost", 1)).returncode == 1
    assert bench(bench_dir, fake=with_figure("det", "entries", 90)).returncode == 1
    assert bench(bench_dir, fake=with_figure("det", "entries", 150)).returncode == 0
    assert bench(bench_dir, fake=with_figure("ratios", "ours_over_git", 2.3)).returncode == 0
    ratio = bench(bench_dir, fake=with_figure("ratios", "ours_over_git", 2.5))
    assert ratio.returncode == 1
    assert "regressed: fake.figures ratio ours_over_git" in ratio.stderr

    noisy = bench(bench_dir, fake={**BASE, "noisy_once": str(bench_dir / "was-noisy")})
    assert noisy.returncode == 0, noisy.stderr
    assert "measuring again to tell noise from a regression (2 of 3)" in noisy.stderr
    assert "(3 of 3)" not in noisy.stderr

    accepted = bench(bench_dir, "--update-baseline", fake=with_figure("det", "prompt_tokens", 2100))
    assert accepted.returncode == 0  # an intended change is recorded, not failed
    assert bench(bench_dir, fake=with_figure("det", "prompt_tokens", 2100)).returncode == 0


def test_a_failing_module_is_reported_and_the_others_still_run(bench_dir: Path) -> None:
    """A module that raises makes the run fail with its error, but every other module still runs
    and prints its table."""
    proc = bench(bench_dir, fake={"raise": True})
    assert proc.returncode == 1
    assert "fake FAILED" in proc.stderr and "the fake benchmark broke" in proc.stderr
    assert "### other figures" in proc.stdout
    assert "1 module(s) failed (fake)" in proc.stderr


def test_report_page_names_machine_commands_tables_and_gate(bench_dir: Path, tmp_path: Path) -> None:
    """--write produces the page: the machine, the date, the command of each table, each table,
    and the gated figures against the baseline."""
    assert bench(bench_dir, "--update-baseline").returncode == 0
    page = tmp_path / "benchmarks.md"
    proc = bench(bench_dir, "--write", "--output", str(page), fake=with_figure("det", "prompt_tokens", 2100))
    assert proc.returncode == 1
    text = page.read_text(encoding="utf-8")
    assert "- Machine: " in text and "CPU(s)" in text and "UTC" in text
    assert "`python bench/bench_fake.py`" in text and "### fake figures" in text and "### other figures" in text
    assert "| `fake.figures` | `prompt_tokens` | deterministic | lower | 2,100 | 1,000 | 2.10x | regressed |" in text
    assert "## Retention evaluation" in text


def test_modules_are_discovered_and_unknown_keys_refused(bench_dir: Path) -> None:
    """Every bench_<topic>.py is a module, eval is built in; an unknown --only key is exit 2."""
    listed = subprocess.run([sys.executable, str(RUN), "--list"], capture_output=True, text=True, check=True)
    keys = {line.split("\t")[0] for line in listed.stdout.splitlines()}
    assert {"tokens", "dream", "eval"} <= keys
    proc = subprocess.run(
        [sys.executable, str(RUN), "--bench-dir", str(bench_dir), "--only", "nope", "--no-write"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "unknown module" in proc.stderr and "fake" in proc.stderr
