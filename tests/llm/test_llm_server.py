"""ScriptedLLMServer itself: the script, the record, the ChatModel bridge and the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dream_memory.adapters.llm import LiteLLMChatModel
from dream_memory.core.chat import ChatReply, ToolCall, ToolSpec, Usage
from dream_memory.errors import BadReply
from dream_memory.settings import ResolvedModel
from dream_memory.testing.llm_server import (
    Drop,
    Fail,
    Garbage,
    Hang,
    Reply,
    ScriptedLLMServer,
    ScriptedToolCall,
    from_chat_model,
    step_from_json,
)


def _post(url: str, body: Any, timeout: float = 5) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _chat(server: ScriptedLLMServer, text: str = "hi", **extra: Any) -> tuple[int, dict[str, Any]]:
    return _post(
        f"{server.base_url}/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": text}], **extra},
    )


def test_an_exhausted_script_fails_loudly_naming_the_request():
    """A request nothing was scripted for gets HTTP 500 whose message names the request number,
    so an under-scripted test fails with a clear reason instead of hanging."""
    with ScriptedLLMServer([Reply("one")]) as server:
        assert _chat(server)[0] == 200
        status, body = _chat(server)

    assert status == 500
    assert "script exhausted at request #2" in body["error"]["message"]


def test_every_request_is_recorded_with_body_and_headers():
    """Each request's parsed JSON body, path and headers are kept in arrival order, numbered
    from 1, on both /v1/chat/completions and /chat/completions."""
    with ScriptedLLMServer([Reply("a"), Reply("b")]) as server:
        _chat(server, "first")
        _post(f"http://127.0.0.1:{server.port}/chat/completions", {"model": "m", "messages": [], "x": 1})
        recorded = server.requests

    assert [r.number for r in recorded] == [1, 2]
    assert [r.path for r in recorded] == ["/v1/chat/completions", "/chat/completions"]
    assert recorded[0].messages == [{"role": "user", "content": "first"}]
    assert recorded[1].body["x"] == 1
    assert recorded[0].headers["content-type"] == "application/json"


def test_concurrent_requests_are_each_answered_and_recorded_once():
    """Twenty clients at once each get one scripted answer; the record holds twenty distinct
    requests and no step is served twice."""
    with ScriptedLLMServer([Reply(f"answer {i}") for i in range(20)]) as server:
        answers: list[str] = []
        lock = threading.Lock()

        def call(i: int) -> None:
            _, body = _chat(server, f"q{i}")
            with lock:
                answers.append(body["choices"][0]["message"]["content"])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        recorded = server.requests

    assert sorted(answers) == sorted(f"answer {i}" for i in range(20))
    assert sorted(r.number for r in recorded) == list(range(1, 21))


def test_the_responder_answers_after_the_scripted_steps():
    """Scripted steps are used first, in order; then the responder answers, seeing the request."""
    with ScriptedLLMServer(
        [Reply("scripted")], responder=lambda req: Reply(f"echo: {req['messages'][-1]['content']}")
    ) as server:
        first = _chat(server, "one")[1]
        second = _chat(server, "two")[1]

    assert first["choices"][0]["message"]["content"] == "scripted"
    assert second["choices"][0]["message"]["content"] == "echo: two"


def test_a_reply_has_the_openai_completion_shape_with_rough_usage():
    """A Reply without usage is answered with a chat.completion body whose usage is estimated,
    and tool calls get ids and finish_reason tool_calls."""
    with ScriptedLLMServer([Reply(tool_calls=[ScriptedToolCall("read_file", '{"path": "USER.md"}')])]) as server:
        status, body = _chat(server, "a prompt of several words")

    assert status == 200
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["id"] == "call_1_0"
    assert body["usage"]["prompt_tokens"] > 0
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]


def test_fail_sends_status_headers_and_an_openai_error_body():
    """A Fail step answers with its status, its headers and {"error": {"message": ...}}."""
    with ScriptedLLMServer([Fail(429, "slow down", headers={"Retry-After": "7"})]) as server:
        request = urllib.request.Request(f"{server.base_url}/chat/completions", data=b'{"messages": []}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)

    assert caught.value.code == 429
    assert caught.value.headers["Retry-After"] == "7"
    assert json.loads(caught.value.read())["error"]["message"] == "slow down"


def test_streaming_requests_are_refused_clearly():
    """The server does not stream; a streaming request gets a 400 saying so rather than a body
    the client cannot parse."""
    with ScriptedLLMServer([Reply("x")]) as server:
        status, body = _chat(server, stream=True)

    assert status == 400
    assert "stream" in body["error"]["message"]


def test_stop_returns_promptly_even_with_a_hanging_step():
    """Stopping the server while a Hang step sleeps returns at once: tests never wait for it."""
    server = ScriptedLLMServer([Hang(30)]).start()
    threading.Thread(target=_safe_chat, args=(server,), daemon=True).start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()

    assert time.monotonic() - started < 2


def _safe_chat(server: ScriptedLLMServer) -> None:
    try:
        _chat(server)
    except OSError:
        pass


def test_binding_a_non_loopback_address_needs_an_explicit_opt_in():
    """The server refuses to listen beyond this machine unless asked explicitly."""
    with pytest.raises(ValueError, match="loopback"):
        ScriptedLLMServer(host="0.0.0.0")


def test_script_steps_parse_from_json():
    """Every step kind can be written in a --script file."""
    steps = [
        step_from_json(item)
        for item in [
            "plain text",
            {"reply": {"content": None, "tool_calls": [{"name": "read_file", "arguments": {"path": "USER.md"}}]}},
            {"fail": 429, "message": "slow", "headers": {"Retry-After": "1"}},
            {"hang": 2, "then": {"reply": "late"}},
            {"garbage": "<html>"},
            {"drop": True},
        ]
    ]

    assert steps[0] == Reply("plain text")
    assert steps[1] == Reply(tool_calls=(ScriptedToolCall("read_file", '{"path": "USER.md"}'),))
    assert steps[2] == Fail(429, "slow", {"Retry-After": "1"})
    assert steps[3] == Hang(2.0, Reply("late"))
    assert steps[4] == Garbage("<html>")
    assert steps[5] == Drop()
    with pytest.raises(ValueError, match="unknown step"):
        step_from_json({"explode": 1})


class _EchoModel:
    """A tiny ChatModel: echoes the last message, or calls the first tool offered."""

    name = "echo"

    def complete(self, messages, *, tools=None, purpose=""):
        if tools:
            return ChatReply(None, (ToolCall("t1", tools[0].name, '{"path": "USER.md"}'),), "tool_calls", Usage())
        if messages[-1]["content"] == "refuse":
            raise BadReply("cannot answer that")
        return ChatReply(f"echo: {messages[-1]['content']}", usage=Usage(3, 2, 0.0, 1))


def test_any_chat_model_can_answer_over_http():
    """from_chat_model puts a ChatModel behind the server, so litellm clients talk to it over
    real HTTP: text, usage, tool calls and tools all cross the wire intact."""
    spec = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})
    with ScriptedLLMServer(responder=from_chat_model(_EchoModel())) as server:
        client = LiteLLMChatModel(
            ResolvedModel(name="openai/echo", source="test", api_base=server.base_url, max_retries=0)
        )
        text = client.complete([{"role": "user", "content": "hello"}])
        tools = client.complete([{"role": "user", "content": "use a tool"}], tools=[spec])
        status, refused = _chat(server, "refuse")

    assert text.content == "echo: hello"
    assert (text.usage.prompt_tokens, text.usage.completion_tokens) == (3, 2)
    assert [(c.id, c.name, c.arguments) for c in tools.tool_calls] == [("t1", "read_file", '{"path": "USER.md"}')]
    assert status == 422
    assert "cannot answer that" in refused["error"]["message"]


# --- the command line ----------------------------------------------------------------------------


def _start_cli(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "dream_memory.testing.llm_server", "--port-file", str(port_file), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"server did not start: {process.communicate()[1]}")
        time.sleep(0.02)
    return process, int(port_file.read_text())


def _stop_cli(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    return out, err


def test_the_command_line_serves_a_script_and_records_requests(tmp_path):
    """`python -m dream_memory.testing.llm_server --script --port-file --record` serves the
    script to a real client, prints the port, writes every request to the JSONL record, and exits
    0 on SIGTERM."""
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"fail": 500, "message": "warming up"}, {"reply": "- the user likes tea"}]))
    record = tmp_path / "requests.jsonl"
    process, port = _start_cli(tmp_path, "--script", str(script), "--record", str(record))
    try:
        model = LiteLLMChatModel(
            ResolvedModel(
                name="openai/cli-test",
                source="test",
                api_base=f"http://127.0.0.1:{port}/v1",
                api_key="sk-cli-test-key",
                retry_base_seconds=0.01,
            )
        )
        reply = model.complete([{"role": "user", "content": "summarize"}])
    finally:
        out, _ = _stop_cli(process)

    assert reply.content == "- the user likes tea"
    assert out.split()[0] == str(port)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["number"] for line in lines] == [1, 2]
    assert lines[1]["body"]["messages"] == [{"role": "user", "content": "summarize"}]
    assert lines[1]["path"] == "/v1/chat/completions"


def test_the_command_line_rejects_a_bad_script(tmp_path):
    """A script file that is not a list of steps is a usage error (exit 2) naming the file."""
    script = tmp_path / "steps.json"
    script.write_text('{"reply": "not a list"}')

    result = subprocess.run(
        [sys.executable, "-m", "dream_memory.testing.llm_server", "--script", str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert result.returncode == 2
    assert "steps.json" in result.stderr


def test_the_command_line_can_answer_with_the_offline_engine(tmp_path):
    """`--offline-engine` answers with the deterministic offline engine, so a whole Dream run can
    go over real HTTP without any model."""
    pytest.importorskip("dream_memory.adapters.offline")
    prompts = pytest.importorskip("dream_memory.core.prompts")
    process, port = _start_cli(tmp_path, "--offline-engine")
    try:
        status, body = _post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            {
                "model": "offline",
                "messages": [
                    {
                        "role": "user",
                        "content": f"{prompts.CONSOLIDATION_MARKER}\nuser: [permanent] The user prefers dark mode.\n",
                    }
                ],
            },
        )
    finally:
        _stop_cli(process)

    assert status == 200
    assert isinstance(body["choices"][0]["message"]["content"], str)


def test_port_file_is_never_seen_half_written(tmp_path):
    """The port file appears whole (written then renamed), so a polling reader never reads a
    partial number."""
    from dream_memory.testing.llm_server import _write_port_file

    target = tmp_path / "sub" / "port"
    _write_port_file(target, 54321)

    assert target.read_text() == "54321\n"
    assert [p.name for p in target.parent.iterdir()] == ["port"]
    assert os.access(target, os.R_OK)
