#!/usr/bin/env python3
"""A minimal agent with long-term memory from dream-memory.

Each turn it:
1. appends the user's message to its session file (sessions/<key>.jsonl, nanobot's format),
2. puts `dream context` (SOUL.md, USER.md, MEMORY.md, always-on skills, recent history) at the top
   of its system prompt,
3. answers with any litellm model (an OpenAI-compatible server given by --api-base is called over
   plain HTTP, as dream-memory does), appends the answer to the session,
4. consolidates the session into memory/history.jsonl once it grows past its token budget.

Dream itself is left to the schedule (`dream-run` from cron, a GitHub Action or a CronJob): the
next prompt after a Dream run sees the new memory.

Without any key or server, `--model offline`: the turns get a stand-in reply (there is no chat
model) and consolidation uses dream-memory's built-in offline engine, so the whole loop runs:

    python examples/agent.py --workspace ws --model offline --session-budget 40 \\
        --message "I prefer green tea, remember that." --message "Thanks!" --message "And?"
    dream run --workspace ws --model offline        # what the schedule does
    python examples/agent.py --workspace ws --model offline --message "What do I drink?"

With a real model, or any OpenAI-compatible server (dream-memory's scripted test server
`python -m dream_memory.testing.llm_server --script replies.json --offline-engine` answers the
turns from its script, then dream-memory's own prompts with the offline engine):

    export OPENAI_API_KEY=...
    python examples/agent.py --workspace ~/agent-ws --model openai/gpt-4o-mini
    python examples/agent.py --workspace ~/agent-ws --model openai/x --api-base http://127.0.0.1:8000/v1 \\
        --message "I prefer green tea" --message "What do I drink?"

A model that fails (no key, a server that refuses) ends the agent with one line on stderr and
exit 1; `--show-prompt` prints each turn's system prompt on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from dream_memory import Workspace
from dream_memory.errors import DreamError

SYSTEM = "You are a helpful assistant. Be brief."


class Session:
    """A session file in the workspace format: a metadata line, then one message per line."""

    def __init__(self, workspace: Path, key: str) -> None:
        self.key = key
        self.path = workspace / "sessions" / (key.replace(":", "_") + ".jsonl")
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            meta = {"_type": "metadata", "key": key, "created_at": _now(), "last_consolidated": 0}
            self.path.write_text(json.dumps(meta) + "\n", encoding="utf-8")

    def add(self, role: str, content: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"role": role, "content": content, "timestamp": _now()}, ensure_ascii=False) + "\n")

    def messages(self) -> list[dict[str, Any]]:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        return [r for r in records if r.get("_type") != "metadata"]

    def unconsolidated(self, workspace: Path) -> list[dict[str, Any]]:
        """Messages dream-memory has not folded into history yet (its progress, else all)."""
        progress_file = workspace / "memory" / ".consolidation.json"
        done = 0
        if progress_file.exists():
            state = json.loads(progress_file.read_text(encoding="utf-8"))
            entry = state.get("sessions", {}).get(f"sessions/{self.path.name}", {})
            done = int(entry.get("messages", 0))
        return self.messages()[done:]


def _now() -> str:
    return datetime.now().isoformat(timespec="seconds")


class ModelFailed(Exception):
    """The chat model did not answer (the message is one line, for the user)."""


def answer(model: str, messages: list[dict[str, Any]], api_base: str | None, api_key: str | None) -> str:
    if model == "offline":
        # No chat model: a stand-in reply, so the memory side (sessions, consolidation, Dream,
        # the context block) can be tried without a key.
        return "OK. (offline: there is no chat model; your message is in the session)"
    if api_base and model.startswith("openai/"):
        return _answer_over_http(model, messages, api_base, api_key)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # imported here: only turns that talk to a provider pay for it (seconds)

    litellm.suppress_debug_info = True
    try:
        response = litellm.completion(
            model=model, messages=messages, api_base=api_base, api_key=api_key or ("no-key" if api_base else None)
        )
    except Exception as exc:  # litellm maps every provider failure to its own exception types
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelFailed(f"model {model} failed: {first_line}") from exc
    return str(response.choices[0].message.content or "")


def _answer_over_http(model: str, messages: list[dict[str, Any]], api_base: str, api_key: str | None) -> str:
    """One chat completion from an OpenAI-compatible server (llama.cpp, vLLM, Ollama, ...), with
    the standard library: a local model's turn does not wait for litellm's import."""
    body = json.dumps({"model": model.removeprefix("openai/"), "messages": messages}).encode("utf-8")
    request = urllib.request.Request(
        api_base.rstrip("/") + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key or 'no-key'}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            reply = json.loads(response.read())
        return str(reply["choices"][0]["message"].get("content") or "")
    except urllib.error.HTTPError as exc:
        raise ModelFailed(f"model {model} failed: HTTP {exc.code}: {_error_text(exc)}") from exc
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as exc:
        raise ModelFailed(f"model {model} failed: {exc}") from exc


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The server's own words: OpenAI's ``{"error": {"message": ...}}``, else the body's first line."""
    body = exc.read().decode("utf-8", "replace").strip()
    try:
        return str(json.loads(body)["error"]["message"]).strip().splitlines()[0]
    except (ValueError, LookupError, TypeError):  # not OpenAI's shape, or an empty message
        return (body.splitlines() or [str(exc.reason)])[0]


def turn(ws: Workspace, session: Session, text: str, args: argparse.Namespace) -> str:
    session.add("user", text)
    memory = ws.context(budget=args.context_budget, session_key=session.key).text
    if args.show_prompt:
        print(f"--- system prompt\n{SYSTEM}\n\n{memory}\n---", file=sys.stderr)
    history = [{"role": m["role"], "content": m.get("content") or ""} for m in session.unconsolidated(ws.path)]
    reply = answer(
        args.model, [{"role": "system", "content": f"{SYSTEM}\n\n{memory}"}, *history], args.api_base, args.api_key
    )
    session.add("assistant", reply)
    # Over budget: fold the oldest safe slice into history.jsonl (Dream picks it up on schedule).
    report = ws.consolidate(
        model=args.consolidate_model or args.model, sessions=[session.path], budget=args.session_budget
    )
    for item in report.sessions:
        if item.entries:
            print(f"(memory: consolidated {item.messages_archived} messages into history)", file=sys.stderr)
    return reply


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", default=os.environ.get("DREAM_WORKSPACE"), help="dream-memory workspace")
    parser.add_argument("--model", required=True, help="litellm model id, e.g. openai/gpt-4o-mini")
    parser.add_argument("--api-base", default=os.environ.get("DREAM_API_BASE"))
    parser.add_argument("--api-key", default=os.environ.get("DREAM_API_KEY"))
    parser.add_argument("--consolidate-model", default=None, help="model for consolidation (default: --model)")
    parser.add_argument("--session-key", default="cli:direct")
    parser.add_argument("--session-budget", type=int, default=2000, help="consolidate past this many tokens")
    parser.add_argument("--context-budget", type=int, default=4000, help="token budget of the memory block")
    parser.add_argument("--message", action="append", help="send these messages and exit (else read stdin)")
    parser.add_argument("--show-prompt", action="store_true", help="print each turn's system prompt on stderr")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    if args.api_base:
        env["DREAM_API_BASE"] = args.api_base
    if args.api_key:
        env["DREAM_API_KEY"] = args.api_key
    ws = Workspace(args.workspace, env=env)
    ws.init()
    session = Session(ws.path, args.session_key)
    inputs = args.message if args.message else (line.strip() for line in sys.stdin)
    try:
        for text in inputs:
            if text:
                print(turn(ws, session, text, args), flush=True)
    except ModelFailed as exc:
        print(f"agent: error: {exc}", file=sys.stderr)
        return 1
    except DreamError as exc:  # consolidation's errors: a missing key, a bad config, ...
        print(f"agent: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
