"""The ScriptedLLMServer itself: it records every request, answers each from its script (then its
responder), and serves them over HTTP on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dream_memory.adapters.tokens import estimate_tokens

if TYPE_CHECKING:
    pass
from dream_memory.testing.llm_server.steps import (
    _ERROR_TYPES,
    Drop,
    Fail,
    Garbage,
    Hang,
    Reply,
    Responder,
    Step,
    Trickle,
)

LOOPBACK = "127.0.0.1"
COMPLETION_PATHS = ("/v1/chat/completions", "/chat/completions")


# --- recording -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received. Headers are kept as sent, Authorization included, so tests can
    check which key went out: give the server test keys only."""

    number: int  # 1-based, in arrival order
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or None when it was not JSON
    raw: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or []) if isinstance(self.body, dict) else []

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }


def _rough_usage(request: Any, reply: Reply) -> dict[str, int]:
    prompt = 0
    if isinstance(request, dict):
        for message in request.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            prompt += estimate_tokens(content if isinstance(content, str) else json.dumps(content)) + 4
    completion = estimate_tokens(reply.content or "")
    completion += sum(estimate_tokens(c.name + c.arguments) for c in reply.tool_calls)
    return {"prompt_tokens": max(prompt, 1), "completion_tokens": max(completion, 1)}


def completion_body(reply: Reply, request: Any, number: int) -> dict[str, Any]:
    """The chat.completion JSON for ``reply`` as the ``number``-th answer to ``request``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{number}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    usage = dict(reply.usage) if reply.usage is not None else _rough_usage(request, reply)
    usage.setdefault("prompt_tokens", 0)
    usage.setdefault("completion_tokens", 0)
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    requested_model = request.get("model") if isinstance(request, dict) else None
    return {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or requested_model or "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


# --- the server ----------------------------------------------------------------------------------


class ScriptedLLMServer:
    """An OpenAI-compatible chat-completions server answering from a script (see module docs).

    Binds 127.0.0.1 on an ephemeral port by default; other addresses need
    ``allow_non_loopback=True`` so a test never exposes a port by accident.
    """

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        responder: Responder | None = None,
        host: str = LOOPBACK,
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
        allow_non_loopback: bool = False,
    ) -> None:
        if not allow_non_loopback and not _is_loopback(host):
            raise ValueError(f"refusing to bind {host}: not a loopback address (pass allow_non_loopback=True)")
        self._script = list(script)
        self._responder = responder
        self._host = host
        self._wanted_port = port
        self._record_path = Path(record_path) if record_path is not None else None
        self._record_file: IO[str] | None = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._counter = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedLLMServer:
        if self._httpd is not None:
            return self
        if self._record_path is not None:
            self._record_path.parent.mkdir(parents=True, exist_ok=True)
            self._record_file = self._record_path.open("a", encoding="utf-8")
        server_class = _IPv6Server if ":" in self._host else _Server
        httpd = server_class((self._host, self._wanted_port), _make_handler(self))
        self._httpd = httpd
        # A short poll keeps stop() (and so every test's teardown) fast.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes Hang steps so their threads end
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._record_file is not None:
                self._record_file.close()
                self._record_file = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Block until ``stop()`` (or a signal) ends the server; for the command line."""
        self.start()
        assert self._thread is not None
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    # addresses

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the api_base to give a client."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}/v1"

    def write_config(self, path: Path, *, retries: int = 1, timeout: float = 5) -> dict[str, str]:
        """Write a dream config at ``path`` whose default model is a preset pointing at this
        server (quick retries, a short timeout); returns the environment that selects it
        (``DREAM_CONFIG`` and the preset's API key variable), to merge into a process's env."""
        preset = {
            "model": "openai/scripted-model",
            "apiBase": self.base_url,
            "apiKeyEnv": "SCRIPTED_API_KEY",
            "maxRetries": retries,
            "retryBaseSeconds": 0.01,
            "timeout": timeout,
        }
        config = {"agents": {"defaults": {"model": "scripted"}}, "modelPresets": {"scripted": preset}}
        path.write_text(json.dumps(config), encoding="utf-8")
        return {"DREAM_CONFIG": str(path), "SCRIPTED_API_KEY": "test-key-not-secret"}

    # the script and the record

    def add(self, *steps: Step) -> None:
        """Append steps to the script (e.g. between two phases of a test)."""
        with self._lock:
            self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """Scripted steps not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def completion_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in COMPLETION_PATHS]

    def _record(self, method: str, path: str, headers: dict[str, str], raw: str) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        with self._lock:
            request = RecordedRequest(next(self._counter), method, path, headers, body, raw)
            self._requests.append(request)
            if self._record_file is not None:
                self._record_file.write(json.dumps(request.to_json(), ensure_ascii=False) + "\n")
                self._record_file.flush()
        return request

    def _next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            scripted = self._script.pop(0) if self._script else None
        if scripted is not None:
            return scripted
        if self._responder is not None:
            try:
                answer = self._responder(request.body if isinstance(request.body, dict) else {})
            except Exception as exc:  # the responder's bug, reported to the client rather than lost
                return Fail(500, f"ScriptedLLMServer: the responder raised {type(exc).__name__}: {exc}")
            if answer is not None:
                return answer
        return Fail(
            500,
            f"ScriptedLLMServer: script exhausted at request #{request.number} "
            f"(nothing scripted and no responder answered)",
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 makes a burst of parallel clients wait a second for SYN retries.
    request_queue_size = 128


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    """One connection's requests, answered from ``scripted`` (set per server by ``_make_handler``)."""

    protocol_version = "HTTP/1.1"
    server_version = "ScriptedLLMServer/1"
    # The headers and the body go out as two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, ~40 ms a request that no real server adds.
    disable_nagle_algorithm = True
    scripted: ScriptedLLMServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the record is the log; stderr noise would bury test output

    def do_GET(self) -> None:
        self.scripted._record("GET", self.path, self._headers(), "")
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._serve_models()
        else:
            self._send_json(404, _error_body(404, f"no such path {self.path}"))

    def do_POST(self) -> None:
        raw = self._read_body()
        path = self.path.split("?", 1)[0]
        request = self.scripted._record("POST", path, self._headers(), raw)
        if path not in COMPLETION_PATHS:
            self._send_json(404, _error_body(404, f"no such path {path}: use /v1/chat/completions"))
        elif isinstance(request.body, dict) and request.body.get("stream"):
            self._send_json(400, _error_body(400, "ScriptedLLMServer does not stream; send stream=false"))
        else:
            self._serve_completion(request)

    def _read_body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode("utf-8", "replace") if length else ""

    def _serve_models(self) -> None:
        self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    def _serve_completion(self, request: RecordedRequest) -> None:
        step = self.scripted._next_step(request)
        try:
            self._play(step, request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (a timeout test): nothing left to tell it

    def _play(self, step: Step, request: RecordedRequest) -> None:
        play = _PLAYS.get(type(step))
        if play is None:
            self._send_json(500, _error_body(500, f"ScriptedLLMServer: not a step: {step!r}"))
        else:
            play(self, step, request)

    def _play_hang(self, step: Step, request: RecordedRequest) -> None:
        assert isinstance(step, Hang)
        if self.scripted._stopping.wait(step.seconds) or step.then is None:
            self._drop()
        else:
            self._play(step.then, request)

    def _play_reply(self, step: Step, request: RecordedRequest) -> None:
        assert isinstance(step, Reply)
        self._send_json(200, completion_body(step, request.body, request.number))

    def _play_fail(self, step: Step, request: RecordedRequest) -> None:
        assert isinstance(step, Fail)
        self._send_json(step.status, _error_body(step.status, step.message), step.headers)

    def _play_garbage(self, step: Step, request: RecordedRequest) -> None:
        assert isinstance(step, Garbage)
        data = step.body if isinstance(step.body, bytes) else step.body.encode("utf-8")
        self._send_bytes(step.status, data, step.content_type)

    def _play_drop(self, step: Step, request: RecordedRequest) -> None:
        self._drop()

    def _play_trickle(self, step: Step, request: RecordedRequest) -> None:
        assert isinstance(step, Trickle)
        self._trickle(json.dumps(completion_body(step.then, request.body, request.number)), step.interval)

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(body).encode("utf-8"), "application/json", headers)

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _trickle(self, text: str, interval: float) -> None:
        data = text.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for i in range(len(data)):
            if self.scripted._stopping.wait(interval):
                self._drop()
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# How each kind of step is answered.
_PLAYS: dict[type, Callable[[_Handler, Step, RecordedRequest], None]] = {
    Hang: _Handler._play_hang,
    Reply: _Handler._play_reply,
    Fail: _Handler._play_fail,
    Garbage: _Handler._play_garbage,
    Drop: _Handler._play_drop,
    Trickle: _Handler._play_trickle,
}


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"scripted": server})


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
