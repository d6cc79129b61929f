"""Consolidator benchmark: `dream consolidate --all` over many long sessions against an instant
scripted model server on 127.0.0.1, and what the token estimator costs per message.

Goal (issue 5): 100 sessions of 500 messages each (user turns with tool calls and results) are
consolidated in one run; the report gives the wall time of that run (model calls through litellm
and HTTP included, the server answering at once), of a second run with nothing new, and the token
estimator's cost per message (tiktoken cl100k from litellm's bundled files, and the bytes/4
fallback). Wall times are reported, never gated; counts (messages archived, model calls, entries)
are deterministic.

Run: ``.venv/bin/python bench/bench_consolidate.py [--quick] [--json]`` (quick: 10 sessions of 200).
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, main

COMMAND = ".venv/bin/python bench/bench_consolidate.py"
WORDS = (
    "the user wants postgres deploy on kubernetes with a nightly backup and prefers short answers "
    "error retry timeout config file path token budget summary decision fixed by restarting service"
).split()


def _message_text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def make_session(rng: random.Random, index: int, messages: int) -> list[dict[str, Any]]:
    """A session of ``messages`` messages: turns of a question, 0-3 tool calls with results of
    100-2,000 characters, and an answer."""
    out: list[dict[str, Any]] = []
    turn = 0
    while len(out) < messages:
        stamp = f"2026-04-{1 + turn // 1440 % 28:02d}T{turn // 60 % 24:02d}:{turn % 60:02d}:00"
        out.append({"role": "user", "content": _message_text(rng, rng.randint(5, 40)), "timestamp": stamp})
        for k in range(rng.randint(0, 3)):
            call_id = f"call-{index}-{turn}-{k}"
            arguments = json.dumps({"command": _message_text(rng, 6)})
            out.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "exec", "arguments": arguments}}
                    ],
                    "timestamp": stamp,
                }
            )
            result = _message_text(rng, rng.randint(15, 300))
            out.append({"role": "tool", "tool_call_id": call_id, "name": "exec", "content": result, "timestamp": stamp})
        out.append({"role": "assistant", "content": _message_text(rng, rng.randint(10, 120)), "timestamp": stamp})
        turn += 1
    return out[:messages]


def _workspace(root: Path, sessions: int, messages: int) -> list[list[dict[str, Any]]]:
    from dream_memory.testing import build_workspace, write_session

    build_workspace(root)
    rng = random.Random(20261129)
    made = []
    for i in range(sessions):
        data = make_session(rng, i, messages)
        write_session(root, f"bench:{i:03d}", data)
        made.append(data)
    return made


def _consolidate(env: dict[str, str], *args: str) -> tuple[dict[str, Any], float]:
    from click.testing import CliRunner

    from dream_memory.entrypoints.cli import cli

    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["consolidate", "--all", *args], env=env, catch_exceptions=False)
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise RuntimeError(f"dream consolidate exited {result.exit_code}: {result.stderr}")
    return json.loads(result.stdout), elapsed


def _estimator_cost(sessions: list[list[dict[str, Any]]]) -> list[list[Any]]:
    from dream_memory.adapters.tokens import HeuristicCounter, load_counter
    from dream_memory.core.sessions import parse_record, record_tokens

    records = [parse_record(json.dumps(m), n) for s in sessions for n, m in enumerate(s, start=2)]
    rows = []
    for counter in (load_counter(), HeuristicCounter()):
        started = time.perf_counter()
        total = sum(record_tokens(r, counter.count) for r in records)
        elapsed = time.perf_counter() - started
        name = getattr(counter, "name", type(counter).__name__)
        rows.append([name, len(records), total, elapsed * 1e6 / len(records)])
    return rows


def run(quick: bool) -> list[Section]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

    n_sessions, n_messages = (10, 200) if quick else (100, 500)
    with tempfile.TemporaryDirectory(prefix="bench-consolidate-") as tmp:
        root = Path(tmp) / "ws"
        home = Path(tmp) / "home"
        home.mkdir()
        sessions = _workspace(root, n_sessions, n_messages)
        summary = "- [durable] User prefers short answers.\n- Decided: nightly backup of postgres."
        with ScriptedLLMServer(responder=lambda request: Reply(summary)) as server:
            config = {
                "agents": {"defaults": {"model": "bench", "consolidate": {"budgetTokens": 8000}}},
                "modelPresets": {
                    "bench": {"model": "openai/bench", "apiBase": server.base_url, "apiKeyEnv": "BENCH_KEY"}
                },
            }
            (home / "dream.json").write_text(json.dumps(config), encoding="utf-8")
            env = {
                "HOME": str(home),
                "DREAM_WORKSPACE": str(root),
                "DREAM_CONFIG": str(home / "dream.json"),
                "BENCH_KEY": "not-a-secret",
                "DREAM_MODEL": "",
            }
            # litellm's first import takes seconds: pay it before the clock starts.
            warm = Path(tmp) / "warm"
            from dream_memory.testing import build_workspace, write_session

            build_workspace(warm)  # commands need a workspace `dream init` made (not just sessions)
            write_session(warm, "warm", make_session(random.Random(1), 0, 20))
            _consolidate({**env, "DREAM_WORKSPACE": str(warm)}, "--force")
            before = len(server.completion_requests())
            report, first_s = _consolidate(env)
            calls = len(server.completion_requests()) - before
            again, second_s = _consolidate(env)
    done = [s for s in report["sessions"] if s["outcome"] == "consolidated"]
    archived = sum(s["messages_archived"] for s in done)
    entries = sum(len(s["entries"]) for s in done)
    total = n_sessions * n_messages
    runs = Section(
        key="consolidate.run",
        title=f"dream consolidate --all: {n_sessions} sessions x {n_messages} messages (budget 8,000 tokens)",
        columns=[
            "run",
            "sessions consolidated",
            "messages archived",
            "model calls",
            "entries",
            "wall s",
            "ms / session",
        ],
        rows=[
            ["over budget", len(done), archived, calls, entries, first_s, first_s * 1000 / n_sessions],
            [
                "nothing new",
                sum(s["outcome"] == "consolidated" for s in again["sessions"]),
                0,
                0,
                0,
                second_s,
                second_s * 1000 / n_sessions,
            ],
        ],
        command=COMMAND + (" --quick" if quick else ""),
        notes=[
            f"{total:,} messages read; the scripted server answers at once, so the wall time is dream-memory's own "
            "(reading, token counting, litellm + HTTP, locked appends, progress writes).",
        ],
        deterministic={"sessions_consolidated": len(done), "messages_archived": archived, "model_calls": calls},
    )
    estimator = Section(
        key="consolidate.tokens",
        title="Token estimator cost per message (content + tool calls, as budgeted)",
        columns=["counter", "messages", "tokens", "µs / message"],
        rows=_estimator_cost(sessions),
        command=COMMAND + (" --quick" if quick else ""),
    )
    return [runs, estimator]


if __name__ == "__main__":
    main(run)
