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

from dream_memory.testing.llm_server.cli import _write_port_file, main
from dream_memory.testing.llm_server.server import (
    COMPLETION_PATHS,
    LOOPBACK,
    RecordedRequest,
    ScriptedLLMServer,
    completion_body,
)
from dream_memory.testing.llm_server.steps import (
    Drop,
    Fail,
    Garbage,
    Hang,
    Reply,
    Responder,
    ScriptedToolCall,
    Step,
    Trickle,
    from_chat_model,
    load_script,
    step_from_json,
    tool_call,
)

__all__ = [
    "COMPLETION_PATHS",
    "LOOPBACK",
    "Drop",
    "Fail",
    "Garbage",
    "Hang",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedLLMServer",
    "ScriptedToolCall",
    "Step",
    "Trickle",
    "_write_port_file",
    "completion_body",
    "from_chat_model",
    "load_script",
    "main",
    "step_from_json",
    "tool_call",
]
