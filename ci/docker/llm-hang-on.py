"""The scripted LLM server (offline engine) that hangs on the requests mentioning a text.

    python ci/docker/llm-hang-on.py TEXT --port-file F --record R

Requests whose messages contain TEXT wait 600 s (a model that does not answer; --hung-file is
touched then); the others get the offline engine's answer. An empty TEXT hangs every request.
Used by container-proof.sh: a container stopped while Dream waits on the model, and a Job killed
at its deadline while batch 4 waits, after batches 1-3 were committed.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import Hang, ScriptedLLMServer, from_chat_model


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("text")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--hung-file", type=Path, help="touched when the first request starts to hang")
    args = parser.parse_args()
    offline = from_chat_model(OfflineModel())

    def respond(body: dict[str, Any]) -> Any:
        if args.text in json.dumps(body.get("messages", []), ensure_ascii=False):
            if args.hung_file is not None:
                args.hung_file.touch()
            return Hang(600)
        return offline(body)

    server = ScriptedLLMServer(responder=respond, record_path=args.record)

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    server.start()
    try:
        args.port_file.write_text(str(server.port), encoding="utf-8")
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
