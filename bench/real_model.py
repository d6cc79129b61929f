"""Dream, consolidation and the evaluation against a real model on any OpenAI-compatible endpoint.

    python bench/real_model.py --api-base http://127.0.0.1:8080/v1 --model openai/qwen \\
        [--edit-protocol auto] [--context-window 8192] [--max-tokens 512] \\
        [--batch-size 5] [--max-batches 2] [--eval-scenario personal] [--json out.json]

It copies the bundled sample workspace (45 history entries) to a temporary folder, runs
``dream run`` there with a preset pointing at the endpoint, and records per batch: outcome,
seconds (in the model and in all), tokens, phase-1 facts, tool calls by dialect, the edit
protocol that ran, and what was written. It then checks that no history entry was lost (every
entry still in history.jsonl or its archive, byte for byte) and, unless ``--eval-scenario none``,
runs ``dream eval`` on that scenario with the same preset (score beside the do-nothing baseline).

Prints a markdown table (the one in docs/benchmarks.md) and exits 1 when an entry was lost or a
command crashed (a traceback, or an exit code other than 0 and 1). A model that writes nothing
is reported, not failed: that is what the table is for. Real models are slow on a CPU: a
Qwen2.5-Coder-1.5B call took 1-3 minutes on 2 cores, so start with ``--max-batches 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "src" / "dream_memory" / "data" / "sample"
BIN = Path(sys.executable).parent


def _entries(workspace: Path) -> dict[int, str]:
    """cursor -> the raw JSON line of every history entry, in history.jsonl and its archive."""
    found: dict[int, str] = {}
    memory = workspace / "memory"
    files = [memory / "history.jsonl", *sorted((memory / "archive").glob("history-*.jsonl"))]
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found[int(json.loads(line)["cursor"])] = json.loads(line)["content"]
    return found


def _run(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, dict[str, Any] | None, str, float]:
    started = time.perf_counter()
    proc = subprocess.run(args, check=False, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    return proc.returncode, report, proc.stderr, seconds


def _crashed(code: int, stderr: str) -> bool:
    return "Traceback (most recent call last)" in stderr or code not in (0, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-base", required=True, help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="openai/local", help="litellm id (openai/<alias> for local servers)")
    parser.add_argument("--label", default=None, help="name for the table (default: --model)")
    parser.add_argument("--edit-protocol", default="auto", choices=["tools", "text", "auto", "facts"])
    parser.add_argument("--context-window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per model call")
    parser.add_argument("--batch-size", type=int, default=5)
    parser.add_argument("--max-batches", type=int, default=2)
    parser.add_argument("--eval-scenario", default="personal", help="a bundled scenario, or 'none'")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the workspaces here")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure as JSON here")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dream-real-model-"))
    work.mkdir(parents=True, exist_ok=True)
    workspace = work / "ws"
    if workspace.exists():
        shutil.rmtree(workspace)
    shutil.copytree(SAMPLE, workspace)
    before = _entries(workspace)
    config = work / "dream.json"
    preset = {
        "model": args.model,
        "apiBase": args.api_base,
        "timeout": args.timeout,
        "maxTokens": args.max_tokens,
        "contextWindow": args.context_window,
        "maxRetries": 0,
        "editProtocol": args.edit_protocol,
    }
    config.write_text(json.dumps({"agents": {"defaults": {"model": "real"}}, "modelPresets": {"real": preset}}))
    env = {
        **os.environ,
        "DREAM_CONFIG": str(config),
        "HOME": str(work),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DREAM_API_KEY": "",
        "DREAM_MODEL": "",
        "DREAM_API_BASE": "",
        "GIT_CONFIG_GLOBAL": str(work / "gitconfig"),
    }
    dream = str(BIN / "dream")
    run_args = [dream, "run", "--workspace", str(workspace), "--batch-size", str(args.batch_size)]
    run_args += ["--max-batches", str(args.max_batches)]
    code, report, stderr, seconds = _run(run_args, env, args.timeout * args.max_batches * 6 + 120)
    after = _entries(workspace)
    lost = sorted(c for c, text in before.items() if after.get(c) != text)
    crashed = _crashed(code, stderr) or report is None
    batches = (report or {}).get("batches", [])
    rows = []
    for b in batches:
        added = sum(f["added"] for f in b.get("files_changed", []))
        rows.append(
            {
                "batch": f"{b['cursor_from']}..{b['cursor_to']}",
                "outcome": b["outcome"],
                "protocol": b.get("edit_protocol"),
                "facts": b["facts"],
                "tool_calls": b["tool_calls"],
                "dialects": b.get("tool_call_dialects", {}),
                "lines_added": added,
                "tokens": b["usage"]["total_tokens"],
                "calls": b["usage"]["llm_calls"],
                "seconds": b["duration_s"],
                "model_seconds": b["model_s"],
                "error": b.get("error"),
                "notes": b.get("notes", []),
            }
        )
    evaluation: dict[str, Any] | None = None
    if args.eval_scenario != "none":
        eval_args = [dream, "eval", "--scenario", args.eval_scenario, "--json", "--keep"]
        eval_args += ["--workspace", str(work / "eval-home")]
        ecode, ereport, estderr, eseconds = _run(eval_args, env, args.timeout * 40 + 300)
        crashed = crashed or _crashed(ecode, estderr) or ereport is None
        if ereport is not None:
            scenario = ereport["scenarios"][0]
            evaluation = {
                "scenario": args.eval_scenario,
                "score": scenario["score"],
                "baseline": scenario["baseline"],
                "above_baseline": scenario["above_baseline"],
                "runs": scenario["runs"],
                "tokens": ereport["tokens"],
                "seconds": round(eseconds, 1),
            }
        else:
            evaluation = {"scenario": args.eval_scenario, "error": estderr[-2000:]}
    result = {
        "model": args.label or args.model,
        "edit_protocol": args.edit_protocol,
        "context_window": args.context_window,
        "exit_code": code,
        "status": (report or {}).get("status"),
        "seconds": round(seconds, 1),
        "entries_before": len(before),
        "entries_lost": lost,
        "facts_written": sum(r["lines_added"] for r in rows),
        "batches": rows,
        "eval": evaluation,
        "crashed": crashed,
        "stderr_tail": stderr[-1500:],
        "workdir": str(work),
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(table(result))
    return 1 if lost or crashed else 0


def table(result: dict[str, Any]) -> str:
    """The markdown table of one model's run (the shape docs/benchmarks.md shows)."""
    lines = [
        f"#### {result['model']} (editProtocol {result['edit_protocol']}, contextWindow {result['context_window']})",
        "",
        "| batch | outcome | protocol | facts | tool calls (dialect) | lines written | tokens | calls | s (model) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["batches"]:
        dialects = ", ".join(f"{k} {v}" for k, v in r["dialects"].items()) or "-"
        lines.append(
            f"| {r['batch']} | {r['outcome']} | {r['protocol'] or '-'} | {r['facts']} | {r['tool_calls']} ({dialects}) "
            f"| {r['lines_added']} | {r['tokens']} | {r['calls']} | {r['seconds']:.0f} ({r['model_seconds']:.0f}) |"
        )
    lines += [
        "",
        f"Run status {result['status']} (exit {result['exit_code']}) in {result['seconds']:.0f} s; "
        f"{result['facts_written']} line(s) written; entries lost: {len(result['entries_lost'])} "
        f"of {result['entries_before']}.",
    ]
    ev = result.get("eval")
    if ev and "score" in ev:
        lines.append(
            f"`dream eval --scenario {ev['scenario']}`: {ev['score']['passed']}/{ev['score']['total']} "
            f"(do-nothing baseline {ev['baseline']['passed']}/{ev['baseline']['total']}) "
            f"in {ev['seconds']:.0f} s, {ev['tokens']} tokens."
        )
    elif ev:
        lines.append(f"`dream eval --scenario {ev['scenario']}` produced no report.")
    for r in result["batches"]:
        if r["error"]:
            lines.append(f"- {r['batch']}: {r['error'][:400]}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
