"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and smoke runs.

Tests drive the real client path (litellm, the openai client, httpx, a socket) against it instead
of mocking litellm, and assert on what was actually sent: every request is recorded.

    with ScriptedLLMServer([Reply("[SKIP]"), Fail(500), Reply("- fact")]) as server:
        preset = {"model": "openai/test", "apiBase": server.base_url}
        ...
        assert len(server.requests) == 3

Answers come from a script of steps consumed in order, then from an optional
``responder(request_body) -> step``. A request nothing answers gets HTTP 500 naming the request
number, so a test that under-scripts fails loudly instead of hanging.

Steps: ``Reply`` (text and/or tool calls, usage), ``Fail`` (an HTTP error with the OpenAI error
body), ``Hang`` (sleep, then answer or drop: provokes client timeouts), ``Garbage`` (a body that is
not a completion), ``Drop`` (close the connection without answering).

Command line (serves until killed; prints the port on stdout)::

    python -m dream_memory.testing.llm_server [--port N] [--host H] [--script steps.json]
        [--offline-engine] [--port-file PATH] [--record requests.jsonl]

A script file is a JSON list of steps, each an object with one of these keys::

    {"reply": "text"}
    {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "USER.md"}}],
               "finish_reason": "tool_calls", "usage": {"prompt_tokens": 10, "completion_tokens": 5}}}
    {"fail": 429, "message": "slow down", "headers": {"Retry-After": "1"}}
    {"hang": 5, "then": {"reply": "late"}}      (no "then": the connection is dropped)
    {"garbage": "<html>oops</html>", "status": 200}
    {"drop": true}
    {"trickle": 1.0, "then": {"reply": "slow"}}  (the body one byte per second)
"""

from __future__ import annotations

import argparse
import ipaddress
import itertools
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dream_memory.adapters.tokens import estimate_tokens

if TYPE_CHECKING:
    from dream_memory.core.ports import ChatModel

LOOPBACK = "127.0.0.1"
COMPLETION_PATHS = ("/v1/chat/completions", "/chat/completions")


# --- the script ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call in a reply. ``arguments`` is sent as-is (it may be invalid JSON on purpose);
    ``id`` defaults to ``call_<request>_<index>``."""

    name: str
    arguments: str = "{}"
    id: str | None = None


def tool_call(name: str, *, call_id: str | None = None, **arguments: Any) -> ScriptedToolCall:
    """``tool_call("edit_file", path="USER.md", old_text="a", new_text="b")``."""
    return ScriptedToolCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False), id=call_id)


@dataclass(frozen=True)
class Reply:
    """A normal completion. ``finish_reason`` None means "tool_calls" when there are tool calls,
    else "stop". ``usage`` None means a rough count (bytes / 4) of the request and the reply."""

    content: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None
    model: str | None = None  # the "model" field of the answer; default: the requested model


@dataclass(frozen=True)
class Fail:
    """An HTTP error with an OpenAI-shaped error body (``{"error": {"message", "type", "code"}}``)."""

    status: int = 500
    message: str = "scripted failure"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering with ``then``, or before dropping the connection."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Garbage:
    """A body that is not a chat completion: ``str`` or ``bytes`` sent as-is."""

    body: str | bytes = "this is not JSON"
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Drop:
    """Close the connection without sending anything."""


@dataclass(frozen=True)
class Trickle:
    """Answer with ``then`` (a Reply), but send its body one byte every ``interval`` seconds: each
    read gets data before a per-read timeout, so only a bound on the whole request ends it."""

    then: Reply
    interval: float = 1.0


Step = Reply | Fail | Hang | Garbage | Drop | Trickle
Responder = Callable[[dict[str, Any]], Step | None]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def step_from_json(data: Any) -> Step:
    """One step of a ``--script`` file (see the module docstring for the shapes)."""
    if isinstance(data, str):
        return Reply(content=data)
    if not isinstance(data, dict):
        raise ValueError(f"a step must be a JSON object, not {type(data).__name__}")
    if "reply" in data:
        body = data["reply"]
        if isinstance(body, str) or body is None:
            return Reply(content=body)
        calls = []
        for raw in body.get("tool_calls") or []:
            args = raw.get("arguments", {})
            calls.append(
                ScriptedToolCall(
                    name=raw["name"],
                    arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                    id=raw.get("id"),
                )
            )
        return Reply(
            content=body.get("content"),
            tool_calls=tuple(calls),
            finish_reason=body.get("finish_reason"),
            usage=body.get("usage"),
            model=body.get("model"),
        )
    if "fail" in data:
        return Fail(
            status=int(data["fail"]),
            message=str(data.get("message", "scripted failure")),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
        )
    if "hang" in data:
        then = data.get("then")
        return Hang(seconds=float(data["hang"]), then=None if then is None else step_from_json(then))
    if "garbage" in data:
        return Garbage(body=str(data["garbage"]), status=int(data.get("status", 200)))
    if data.get("drop"):
        return Drop()
    if "trickle" in data:
        then = step_from_json(data.get("then", {"reply": "late"}))
        if not isinstance(then, Reply):
            raise ValueError("a trickle step's 'then' must be a reply")
        return Trickle(then=then, interval=float(data["trickle"]))
    raise ValueError(f"unknown step {sorted(data)}: expected one of reply, fail, hang, garbage, drop, trickle")


def load_script(path: str | os.PathLike[str]) -> list[Step]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a JSON list of steps")
    return [step_from_json(item) for item in data]


# --- bridging a ChatModel ------------------------------------------------------------------------

# A model that declines to answer (BadReply) becomes 422: like a content failure, clients do not retry it.
_STATUS_FOR_KIND = {"auth": 401, "rate_limit": 429, "bad_request": 400, "bad_reply": 422, "timeout": 504}


def from_chat_model(model: ChatModel) -> Responder:
    """A responder answering each request through ``model.complete`` (the offline engine, say).

    The request's messages and tools go to the model as they came over the wire; its ChatReply
    goes back as a completion. A ModelError becomes the matching HTTP error.
    """
    from dream_memory.core.chat import ToolSpec
    from dream_memory.errors import ModelError

    def respond(request: dict[str, Any]) -> Step:
        tools = [
            ToolSpec(
                name=t["function"]["name"],
                description=t["function"].get("description", ""),
                parameters=t["function"].get("parameters", {}),
            )
            for t in request.get("tools") or []
            if t.get("type", "function") == "function"
        ]
        try:
            reply = model.complete(request.get("messages") or [], tools=tools or None)
        except ModelError as exc:
            return Fail(_STATUS_FOR_KIND.get(exc.kind, 500), exc.message)
        usage = None
        if reply.usage.prompt_tokens or reply.usage.completion_tokens:
            usage = {"prompt_tokens": reply.usage.prompt_tokens, "completion_tokens": reply.usage.completion_tokens}
        return Reply(
            content=reply.content,
            tool_calls=tuple(ScriptedToolCall(c.name, c.arguments, c.id) for c in reply.tool_calls),
            finish_reason=reply.finish_reason,
            usage=usage,
        )

    return respond


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


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ScriptedLLMServer/1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the record is the log; stderr noise would bury test output

        def do_GET(self) -> None:
            server._record("GET", self.path, self._headers(), "")
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            else:
                self._send_json(404, _error_body(404, f"no such path {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            path = self.path.split("?", 1)[0]
            request = server._record("POST", path, self._headers(), raw)
            if path not in COMPLETION_PATHS:
                self._send_json(404, _error_body(404, f"no such path {path}: use /v1/chat/completions"))
                return
            if isinstance(request.body, dict) and request.body.get("stream"):
                self._send_json(400, _error_body(400, "ScriptedLLMServer does not stream; send stream=false"))
                return
            self._play(server._next_step(request), request)

        def _play(self, step: Step, request: RecordedRequest) -> None:
            try:
                if isinstance(step, Hang):
                    if server._stopping.wait(step.seconds) or step.then is None:
                        self._drop()
                    else:
                        self._play(step.then, request)
                elif isinstance(step, Reply):
                    self._send_json(200, completion_body(step, request.body, request.number))
                elif isinstance(step, Fail):
                    self._send_json(step.status, _error_body(step.status, step.message), step.headers)
                elif isinstance(step, Garbage):
                    data = step.body if isinstance(step.body, bytes) else step.body.encode("utf-8")
                    self._send_bytes(step.status, data, step.content_type)
                elif isinstance(step, Drop):
                    self._drop()
                elif isinstance(step, Trickle):
                    self._trickle(json.dumps(completion_body(step.then, request.body, request.number)), step.interval)
                else:
                    self._send_json(500, _error_body(500, f"ScriptedLLMServer: not a step: {step!r}"))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout test): nothing left to tell it

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
                if server._stopping.wait(interval):
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

    return Handler


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


# --- command line --------------------------------------------------------------------------------


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


if __name__ == "__main__":
    raise SystemExit(main())
