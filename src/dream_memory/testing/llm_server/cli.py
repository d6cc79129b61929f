"""``python -m dream_memory.testing.llm_server``: the server on its own, until killed."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from dream_memory.testing.llm_server.server import LOOPBACK, ScriptedLLMServer
from dream_memory.testing.llm_server.steps import from_chat_model, load_script


def _write_port_file(path: Path, port: int) -> None:
    # Written whole then renamed, so a process polling for the file never reads half a number.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dream_memory.testing.llm_server",
        description="A scripted OpenAI-compatible chat-completions server for tests. "
        "Prints the bound port on stdout and serves until killed.",
    )
    parser.add_argument(
        "--host",
        default=None,
        help="address to bind (default 127.0.0.1; naming one explicitly allows a non-loopback address)",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: an ephemeral one)")
    parser.add_argument("--script", type=Path, help="JSON list of steps, answered in order")
    parser.add_argument(
        "--offline-engine", action="store_true", help="answer (after any script) with the deterministic offline engine"
    )
    parser.add_argument("--port-file", type=Path, help="also write the bound port to this file")
    parser.add_argument("--record", type=Path, help="append every request as a JSON line to this file")
    args = parser.parse_args(argv)

    try:
        script = load_script(args.script) if args.script else []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"--script {args.script}: {exc}")
    responder = None
    if args.offline_engine:
        from dream_memory.core.offline.engine import OfflineModel

        responder = from_chat_model(OfflineModel())
    server = ScriptedLLMServer(
        script,
        responder=responder,
        host=args.host or LOOPBACK,
        port=args.port,
        record_path=args.record,
        allow_non_loopback=args.host is not None,
    )

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    server.start()
    try:
        if args.port_file:
            _write_port_file(args.port_file, server.port)
        print(server.port, flush=True)
        print(
            f"ScriptedLLMServer: serving {server.base_url} ({len(script)} scripted steps"
            f"{', then the offline engine' if args.offline_engine else ''})",
            file=sys.stderr,
            flush=True,
        )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
