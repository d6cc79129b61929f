"""The checks of ci/steps/65-real-model.sh: Dream, the Consolidator and the evaluation driven by a
real (tiny) model. Only what must hold whatever the model answers is asserted:

- no command crashes: exit 0 or 1, a JSON report on stdout, no traceback;
- no history entry is lost or changed (history.jsonl and its archive, byte for byte);
- the report is honest: a batch that wrote nothing while phase 1 found facts is `failed` or
  `set_aside`, never `nothing_new`; the top-level status says when a batch failed or was set aside;
  the cursor on disk is the report's, and never passes a failed batch;
- the batches reached the model (LLM calls counted, and the server log shows the requests).

Prints one line per batch so the CI log shows what the model did.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "src" / "dream_memory" / "data" / "sample"
SESSION = REPO / "src" / "dream_memory" / "data" / "eval" / "scenarios" / "personal" / "sessions"
SCENARIO = Path(__file__).resolve().parent / "scenario"
FAILURES: list[str] = []


def expect(condition: bool, message: str) -> None:
    if not condition:
        FAILURES.append(message)
        print(f"  FAIL: {message}", flush=True)


def entries(workspace: Path) -> dict[int, str]:
    found: dict[int, str] = {}
    memory = workspace / "memory"
    for path in [memory / "history.jsonl", *sorted((memory / "archive").glob("history-*.jsonl"))]:
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    found[int(json.loads(line)["cursor"])] = line
    return found


def run(args: list[str], env: dict[str, str], what: str, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    seconds = time.monotonic() - started
    print(f"{what}: exit {proc.returncode} in {seconds:.0f} s", flush=True)
    for line in proc.stderr.strip().splitlines()[-12:]:
        print(f"  | {line}", flush=True)
    expect(proc.returncode in (0, 1), f"{what} exited {proc.returncode}")
    expect("Traceback (most recent call last)" not in proc.stderr, f"{what} printed a traceback")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        expect(False, f"{what} printed no JSON report")
        return {}
    return report if isinstance(report, dict) else {}


def dream_cursor(workspace: Path) -> int:
    path = workspace / "memory" / ".dream_cursor"
    return int(path.read_text()) if path.is_file() else 0


def check_dream(report: dict[str, Any], workspace: Path, before: dict[int, str], what: str) -> int:
    """The report's honesty and the entries' safety; returns how many LLM calls the batches made."""
    calls = 0
    for b in report.get("batches", []):
        calls += b["usage"]["llm_calls"]
        dialects = ", ".join(f"{k} {v}" for k, v in b.get("tool_call_dialects", {}).items()) or "none"
        print(
            f"  batch {b['cursor_from']}..{b['cursor_to']}: {b['outcome']}, facts {b['facts']}, "
            f"protocol {b.get('edit_protocol')}, tool calls {b['tool_calls']} ({dialects}), "
            f"{b['usage']['llm_calls']} LLM call(s), {b['usage']['total_tokens']} tokens, {b['duration_s']:.0f} s",
            flush=True,
        )
        if b.get("error"):
            print(f"    error: {b['error'][:300]}", flush=True)
        if b["outcome"] == "nothing_new" and b["facts"]:
            expect(
                "every fact is already in memory" in b.get("notes", []),
                f"{what}: batch {b['cursor_from']} has facts, wrote nothing, and says nothing new",
            )
        if b["outcome"] == "committed":
            expect(bool(b["files_changed"]), f"{what}: committed batch {b['cursor_from']} changed no file")
    outcomes = {b["outcome"] for b in report.get("batches", [])}
    status = report.get("status")
    if "failed" in outcomes:
        expect(status in ("failed", "budget_exhausted"), f"{what}: a batch failed but the status is {status}")
    elif "set_aside" in outcomes:
        expect(status == "set_aside", f"{what}: a batch was set aside but the status is {status}")
    expect(report.get("cursor_after") == dream_cursor(workspace), f"{what}: report and disk disagree on the cursor")
    failed = [b for b in report.get("batches", []) if b["outcome"] == "failed"]
    if failed:
        expect(dream_cursor(workspace) < failed[0]["cursor_from"], f"{what}: the cursor passed a failed batch")
    after = entries(workspace)
    lost = [c for c, line in before.items() if after.get(c) != line]
    expect(not lost, f"{what}: history entries lost or changed: {lost[:10]}")
    return calls


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dream", required=True)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--server-log", type=Path, required=True)
    parser.add_argument("--batches", type=int, default=1)
    args = parser.parse_args()

    root: Path = args.root
    config = root / "dream.json"
    preset = {
        "model": "openai/smollm2",
        "apiBase": args.api_base,
        "contextWindow": 4096,
        "maxTokens": 128,
        "timeout": 300,
        "maxRetries": 0,
        "editProtocol": "auto",
    }
    config.write_text(json.dumps({"agents": {"defaults": {"model": "smol"}}, "modelPresets": {"smol": preset}}))
    env = {
        **os.environ,
        "DREAM_CONFIG": str(config),
        "HOME": str(root / "home"),
        "GIT_CONFIG_GLOBAL": str(root / "home" / "gitconfig"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DREAM_MODEL": "",
        "DREAM_API_BASE": "",
        "DREAM_API_KEY": "",
    }
    (root / "home").mkdir(exist_ok=True)

    workspace = root / "ws"
    shutil.copytree(SAMPLE, workspace)
    before = entries(workspace)
    calls = 0
    report = run(
        [args.dream, "run", "--workspace", str(workspace), "--batch-size", "3", "--max-batches", str(args.batches)],
        env,
        "dream run",
        timeout=900,
    )
    calls += check_dream(report, workspace, before, "dream run")
    expect(calls > 0, "no Dream batch reached the model")

    session = sorted(SESSION.glob("*.jsonl"))[0]
    target = workspace / "sessions" / session.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(session, target)
    before = entries(workspace)
    report = run(
        [args.dream, "consolidate", "--workspace", str(workspace), "--all", "--force"], env, "dream consolidate", 600
    )
    after = entries(workspace)
    expect(all(after.get(c) == line for c, line in before.items()), "consolidate lost or changed a history entry")
    for item in report.get("sessions", []):
        how = "archived raw" if item.get("raw_fallback") else "summarized"
        print(f"  {item.get('key')}: {item.get('messages_archived')} message(s) {how} into {item.get('entries')}")
        expect(bool(item.get("entries")) or not item.get("messages_archived"), "a consolidated slice left no entry")

    # One day of the personal scenario: a few calls, the same code path as the bundled set.
    report = run(
        [args.dream, "eval", "--scenarios", str(SCENARIO), "--json", "--workspace", str(workspace)],
        env,
        "dream eval (one day of the personal scenario)",
        1200,
    )
    for scenario in report.get("scenarios", []):
        print(
            f"  {scenario['name']}: {scenario['score']['passed']}/{scenario['score']['total']} "
            f"(do-nothing baseline {scenario['baseline']['passed']}/{scenario['baseline']['total']})",
            flush=True,
        )
        for item in scenario["runs"]:
            print(f"    {item['date']} {item['step']}: {item['status']} {item['detail']}", flush=True)
    requests = args.server_log.read_text(errors="replace").count("POST /v1/chat/completions")
    print(f"the model server answered {requests} chat request(s)", flush=True)
    expect(requests > 0, "the server log shows no chat request")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        return 1
    print("every check passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
