"""Dream throughput: N history entries through `dream-run` against the scripted server answering
instantly (the offline engine behind real HTTP). The model is ``openai/bench`` with ``apiBase``,
the route that calls an OpenAI-compatible endpoint over plain httpx
(``adapters.openai_compat``, no litellm); every request is checked to have come that way.

Reports wall time, time per batch outside the model, commits per second and the peak RSS of the
dream-run process. Deterministic figures (batches, commits, model calls) are gated by bench/run.
``--attribute`` prints instead where a batch's time goes, part by part (timers in dream-run).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, main

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model
from dream_memory.testing.llm_server.steps import Responder, Step

BIN = Path(sys.executable).parent
# Runs the command and prints its peak RSS (KiB) on stderr's last line: RUSAGE_CHILDREN of a
# process whose only child is dream-run.
_RSS_WRAPPER = (
    "import resource, subprocess, sys; "
    "code = subprocess.call(sys.argv[1:]); "
    "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(code)"
)


def entries(n: int) -> list[str]:
    kinds = [
        "- [durable] User prefers option {i} for setting {i}.",
        "- Decisions: component {i} uses approach {i}.",
        "(nothing)",
        "- [ephemeral] asked about the weather ({i}).",
        "- Solutions: error {i} was fixed by restarting worker {i}.",
    ]
    return [kinds[i % len(kinds)].format(i=i) for i in range(1, n + 1)]


def timed(responder: Responder, spent: list[float]) -> Responder:
    """The responder, each answer's compute time appended to ``spent``: what the model itself took."""

    def respond(request: dict[str, Any]) -> Step | None:
        started = time.perf_counter()
        try:
            return responder(request)
        finally:
            spent.append(time.perf_counter() - started)

    return respond


def per_batch(batches: list[dict[str, Any]], spent: list[float]) -> list[float]:
    """Each batch's share of the responder's time: its calls, in order (one responder call each)."""
    shares: list[float] = []
    at = 0
    for b in batches:
        calls = int(b["usage"]["llm_calls"])
        shares.append(sum(spent[at : at + calls]))
        at += calls
    return shares


# Where a batch's time goes (``--attribute``): dream-run in a process whose parts of a batch are
# wrapped in timers, each part's time without the parts it calls (so nothing counts twice).
_PARTS = (
    ("dream_memory.app.dream.budget", "MeteredModel.complete", "model calls (model_s)"),
    ("dream_memory.app.dream.landing", "apply_commit", "commit (versioning.apply_commit)"),
    ("dream_memory.app.dream.landing", "save_note", "provenance note (git notes)"),
    ("dream_memory.adapters.secrets", "SecretScanner.redact", "secret scanner"),
    ("dream_memory.app.dream.protocols", "_check_applied", "placement check (place_facts)"),
    ("dream_memory.adapters.tokens", "TiktokenCounter.count", "token counting"),
    ("dream_memory.app.dream.landing", "_sort", "guards and write policy"),
    ("dream_memory.app.dream.origins", "RunOrigins.at_head", "git blame"),
    ("dream_memory.app.dream.landing", "recent_removals", "deletion window"),
    ("dream_memory.app.dream.landing", "attribute_batch", "line attribution"),
    ("dream_memory.app.dream.landing", "unified_diff", "diffs"),
    ("dream_memory.app.dream.protocols", "phase1", "phase 1 (prompt, facts)"),
    ("dream_memory.app.dream.protocols", "_phase2", "phase 2 prompt"),
    ("dream_memory.app.dream.protocols", "run_agent_loop", "phase 2 tool loop"),
    ("dream_memory.adapters.staging", "StagingWorkspace.execute", "tool edits (staging)"),
    ("dream_memory.adapters.staging", "StagingWorkspace.read", "staging reads"),
    ("dream_memory.app.dream.run", "_progress", "progress events"),
    ("dream_memory.app.dream.run", "_dream_and_land", "the rest of the batch"),
)


def _timed_child() -> None:
    """dream-run with _PARTS timed; the totals (ms, calls) as JSON on stderr's last line."""
    import atexit
    import functools
    import importlib

    totals: dict[str, list[float]] = {}
    stack: list[list[float]] = []

    def wrap(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed_part(*args: Any, **kwargs: Any) -> Any:
            frame = [0.0]
            stack.append(frame)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                stack.pop()
                total = totals.setdefault(name, [0.0, 0])
                total[0] += 1000 * (spent - frame[0])
                total[1] += 1
                if stack:
                    stack[-1][0] += spent

        return timed_part

    for module, attr, name in _PARTS:
        owner: Any = importlib.import_module(module)
        *path, last = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, last, wrap(name, getattr(owner, last)))
    atexit.register(lambda: print("PARTS", json.dumps(totals), file=sys.stderr))
    from dream_memory.entrypoints.cli import run_main

    sys.argv = ["dream-run"]
    run_main()


def attribute(n: int) -> None:
    """Print where the batches' time went, part by part (ms per batch), for one dream-run."""
    m = measure(n, [sys.executable, __file__, "--timed-child"])
    parts = m.pop("parts")
    batches = m["batches"]
    print(f"{n} entries, {batches} batches; outside the model: median {m['outside_median_ms']:.1f} ms")
    print("(totals over the run / batches: the secret scanner and token counting include the run's set-up)")
    for name, (ms, calls) in sorted(parts.items(), key=lambda item: -item[1][0]):
        print(f"  {name:34s} {ms / batches:8.2f} ms/batch  ({int(calls)} calls)")


def measure(n: int, command: list[str] | None = None) -> dict[str, Any]:
    answering: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-dream-") as tmp,
        ScriptedLLMServer(responder=timed(from_chat_model(OfflineModel()), answering)) as server,
    ):
        root = Path(tmp)
        workspace = build_workspace(root / "ws", history=entries(n))
        config = {
            "agents": {"defaults": {"model": "bench"}},
            "modelPresets": {"bench": {"model": "openai/bench", "apiBase": server.base_url, "apiKeyEnv": "BENCH_KEY"}},
        }
        (root / "dream.json").write_text(json.dumps(config))
        env = {
            **os.environ,
            "HOME": str(root),
            "DREAM_WORKSPACE": str(workspace),
            "DREAM_CONFIG": str(root / "dream.json"),
            "BENCH_KEY": "bench",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _RSS_WRAPPER, *(command or [str(BIN / "dream-run")])],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"dream-run failed ({done.returncode}): {done.stderr[-2000:]}")
        agents = {r.headers.get("user-agent", "").split("/")[0] for r in server.completion_requests()}
        if agents != {"python-httpx"}:
            raise SystemExit(f"the requests did not come over the plain httpx route: user agents {agents}")
        report = json.loads(done.stdout)
        tail = done.stderr.strip().splitlines()
        peak_kb = int(tail[-1].split()[1])
        parts = next((json.loads(line[6:]) for line in tail if line.startswith("PARTS ")), {})
        batches = report["batches"]
        inside = sum(b["model_s"] for b in batches)
        outside = [b["duration_s"] - b["model_s"] for b in batches] or [0.0]
        total = sum(b["duration_s"] for b in batches)
        # model_s is the whole model call as dream-run times it: building the request, encoding it,
        # HTTP both ways, the scripted server's own handling and the reply's parsing all sit inside
        # it. The responder's time is the model's own work; the rest of the call is the request
        # path, reported on its own line so no client-side time hides inside "the model".
        if len(answering) != sum(int(b["usage"]["llm_calls"]) for b in batches):
            raise SystemExit(f"{len(answering)} answers for the batches' model calls: a call was retried or lost")
        answered = per_batch(batches, answering)
        path = [b["model_s"] - a for b, a in zip(batches, answered, strict=True)] or [0.0]
        beside = [b["duration_s"] - a for b, a in zip(batches, answered, strict=True)] or [0.0]
        return {
            "entries": report["entries_processed"],
            "batches": len(batches),
            "commits": len(report["commits"]),
            "llm_calls": report["usage"]["llm_calls"],
            "wall_s": wall,
            "batches_s": total,
            "outside_model_per_batch_ms": 1000 * (total - inside) / max(1, len(batches)),
            # the first batch pays the lazy imports (the secret guard's plugins, the tool layer):
            # the median and the fastest batch say what a batch costs once running
            "outside_median_ms": 1000 * statistics.median(outside),
            "outside_best_ms": 1000 * min(outside),
            "request_path_median_ms": 1000 * statistics.median(path),
            "outside_answer_median_ms": 1000 * statistics.median(beside),
            "outside_answer_best_ms": 1000 * min(beside),
            "commits_per_s": len(report["commits"]) / wall,
            "peak_rss_mb": peak_kb / 1024,
            "requests": len(server.completion_requests()),
            "parts": parts,
        }


def run(quick: bool) -> list[Section]:
    n = 200 if quick else 1000
    m = measure(n)
    rows: list[list[object]] = [
        ["entries", m["entries"]],
        ["batches / commits", f"{m['batches']} / {m['commits']}"],
        ["model calls", m["llm_calls"]],
        ["wall time of dream-run (s)", m["wall_s"]],
        ["time in batches (s)", m["batches_s"]],
        ["per batch outside the model, mean (ms)", m["outside_model_per_batch_ms"]],
        ["per batch outside the model, median (ms)", m["outside_median_ms"]],
        ["per batch outside the model, fastest batch (ms)", m["outside_best_ms"]],
        ["request path per batch, inside model_s, median (ms)", m["request_path_median_ms"]],
        ["per batch outside the responder's answering, median (ms)", m["outside_answer_median_ms"]],
        ["per batch outside the responder's answering, fastest batch (ms)", m["outside_answer_best_ms"]],
        ["commits per second", m["commits_per_s"]],
        ["peak RSS of dream-run (MB)", m["peak_rss_mb"]],
    ]
    return [
        Section(
            key="dream.throughput",
            title=f"Dream throughput: {n} entries against the instant scripted server",
            columns=["figure", "value"],
            rows=rows,
            command=f"python bench/bench_dream.py{' --quick' if quick else ''}",
            notes=[
                "The server answers through the offline engine over real HTTP, so the figures include the "
                "request path (openai/<name> with apiBase: plain httpx, no litellm; checked by each request's "
                "user agent) but no model latency. Outside the model: reading the batch, the secret guard, "
                "the tool layer, the commit (its fsyncs) and the progress and state files. `model_s` "
                "times the whole model call, so the request path (building and encoding the request, HTTP both "
                "ways over 127.0.0.1, the scripted server's handling, reading the reply) counts as the model: "
                "its own row says how much, and the rows outside the responder's answering count it as ours.",
            ],
            deterministic={
                "entries": m["entries"],
                "batches": m["batches"],
                "commits": m["commits"],
                "llm_calls": m["llm_calls"],
            },
        )
    ]


if __name__ == "__main__":
    if "--timed-child" in sys.argv:
        _timed_child()
    elif "--attribute" in sys.argv:
        attribute(200 if "--quick" in sys.argv else 1000)
    else:
        main(run)
