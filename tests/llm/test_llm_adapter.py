"""The ChatModel, driven through real HTTP against the scripted server, by both routes.

Every test runs twice (tests/llm/conftest.py's ``route``): once by the plain-HTTP route `dream`
takes for an OpenAI-compatible endpoint named by address (httpx -> a socket), once by litellm's
(litellm -> openai client -> httpx -> a socket), which the other providers take. Nothing is
mocked: the requests land on ScriptedLLMServer on 127.0.0.1 and tests assert on what it recorded.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from dream_memory.adapters.llm import PLACEHOLDER_API_KEY, LiteLLMChatModel, build_chat_model
from dream_memory.core.chat import ToolSpec
from dream_memory.errors import BadReply, ModelError
from dream_memory.settings import ResolvedModel
from dream_memory.testing.llm_server import Drop, Fail, Garbage, Hang, Reply, ScriptedToolCall, Trickle, tool_call

MESSAGES = [
    {"role": "system", "content": "You keep an agent's memory."},
    {"role": "user", "content": "The user prefers dark mode."},
]
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
EDIT_FILE = ToolSpec(
    name="edit_file",
    description="Replace one exact occurrence of old_text.",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old_text": {"type": "string"},
            "new_text": {"type": "string"},
        },
        "required": ["path", "old_text", "new_text"],
    },
)


def _fail(model: LiteLLMChatModel, **kwargs: object) -> ModelError:
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, **kwargs)  # type: ignore[arg-type]
    return caught.value


# --- replies -------------------------------------------------------------------------------------


def test_text_reply_carries_content_usage_and_what_was_sent(server, make_model, api_key):
    """A plain answer comes back as text with the server's token counts, and the request carries
    the messages, the model, temperature, max_tokens and the key, but no tools."""
    server.add(Reply("[USER] prefers dark mode", usage={"prompt_tokens": 42, "completion_tokens": 7}))
    model = make_model(temperature=0.0, max_tokens=512)

    reply = model.complete(MESSAGES, purpose="phase 1")

    assert reply.content == "[USER] prefers dark mode"
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.calls) == (42, 7, 1)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "dream-scripted-test"  # litellm strips the provider prefix
    assert request.messages == MESSAGES
    assert request.body["temperature"] == 0.0
    assert request.body["max_tokens"] == 512
    assert "tools" not in request.body
    assert request.headers["authorization"] == f"Bearer {api_key}"


def test_tool_calls_round_trip_ids_names_and_argument_strings(server, make_model):
    """Tools go out in the OpenAI shape, and tool calls come back with the ids, names and argument
    strings exactly as the model sent them (even arguments that are not valid JSON)."""
    server.add(
        Reply(
            tool_calls=[
                tool_call("read_file", path="USER.md"),
                ScriptedToolCall("edit_file", '{"path": "USER.md", "old_text": "a", "new_text": "b"}', id="call_X"),
                ScriptedToolCall("read_file", '{"path": "SOUL.md"', id="call_broken"),
            ]
        )
    )
    model = make_model()

    reply = model.complete(MESSAGES, tools=[READ_FILE, EDIT_FILE])

    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_1_0", "read_file", '{"path": "USER.md"}'),
        ("call_X", "edit_file", '{"path": "USER.md", "old_text": "a", "new_text": "b"}'),
        ("call_broken", "read_file", '{"path": "SOUL.md"'),
    ]
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls[0].parsed_arguments() == {"path": "USER.md"}
    assert server.requests[0].tools == [READ_FILE.to_openai(), EDIT_FILE.to_openai()]


def test_tool_results_in_the_conversation_reach_the_server(server, make_model):
    """A follow-up request carrying the assistant's tool calls and the tool results is sent as is,
    so the model sees what its calls did."""
    server.add(Reply("done"))
    conversation = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "USER.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "# User\n- likes tea\n"},
    ]

    assert make_model().complete(conversation, tools=[READ_FILE]).content == "done"
    sent = server.requests[0].messages
    assert sent[2]["tool_calls"][0]["id"] == "call_1"
    assert sent[3] == {"role": "tool", "tool_call_id": "call_1", "content": "# User\n- likes tea\n"}


def test_reply_is_returned_as_received_for_the_caller_to_judge(server, make_model):
    """A reply cut off by the length limit is not an error here: it comes back with its
    finish_reason, and check_reply (the caller's rule) refuses it."""
    from dream_memory.core.chat import check_reply

    server.add(Reply("- the user pref", finish_reason="length"))

    reply = make_model().complete(MESSAGES)

    assert reply.finish_reason == "length"
    with pytest.raises(BadReply):
        check_reply(reply, tools_offered=False)


def test_placeholder_key_lets_a_keyless_local_server_work(server, make_model):
    """A local OpenAI-compatible server configured without any key still gets requests (with a
    harmless placeholder key) instead of a 'Missing credentials' failure."""
    server.add(Reply("ok"))

    assert make_model(api_key=None).complete(MESSAGES).content == "ok"
    assert server.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


# --- retries -------------------------------------------------------------------------------------


def test_two_server_errors_then_success_is_retried_and_succeeds(server, make_model, sleeps):
    """Two HTTP 500s followed by an answer: the caller gets the answer; three requests were made,
    with a short backoff before each retry."""
    server.add(Fail(500, "upstream hiccup"), Fail(500, "upstream hiccup"), Reply("- fact"))

    reply = make_model().complete(MESSAGES)

    assert reply.content == "- fact"
    assert len(server.requests) == 3
    assert len(sleeps.waits) == 2
    assert all(0 < wait < 1 for wait in sleeps.waits)


def test_backoff_grows_exponentially_with_jitter_and_then_gives_up(server, make_model, sleeps):
    """A server that keeps failing with 503 is asked max_retries + 1 times, waiting about twice as
    long each time, and then the call fails as a retryable server error that says so."""
    server.add(*[Fail(503, "overloaded")] * 4)

    error = _fail(make_model(max_retries=3, retry_base_seconds=0.01))

    assert len(server.requests) == 4
    assert (error.kind, error.retryable) == ("server", True)
    assert "HTTP 503" in error.message
    assert "gave up after 4 attempts" in error.message
    for n, wait in enumerate(sleeps.waits):
        floor = 0.01 * 2**n
        assert floor <= wait <= floor + 0.01


def test_rate_limit_waits_as_long_as_retry_after_says(server, make_model, sleeps):
    """A 429 with Retry-After: 2 is retried after exactly 2 seconds, and the retry succeeds."""
    server.add(Fail(429, "Rate limit reached", headers={"Retry-After": "2"}), Reply("ok"))

    assert make_model().complete(MESSAGES).content == "ok"
    assert len(server.requests) == 2
    assert sleeps.waits == [2.0]


def test_retry_after_ms_and_unreasonable_retry_after(server, make_model, sleeps):
    """retry-after-ms is honoured to the millisecond; a Retry-After of an hour is not waited for
    (the normal short backoff is used instead)."""
    server.add(
        Fail(429, "slow down", headers={"retry-after-ms": "250"}),
        Fail(429, "come back later", headers={"Retry-After": "3600"}),
        Reply("ok"),
    )

    assert make_model().complete(MESSAGES).content == "ok"
    assert sleeps.waits[0] == pytest.approx(0.25)
    assert sleeps.waits[1] < 1


def test_rate_limit_that_persists_fails_as_retryable(server, make_model):
    """Rate limiting that outlasts the retries fails as kind rate_limit, marked retryable so the
    batch is not held against the history."""
    server.add(*[Fail(429, "Rate limit reached")] * 2)

    error = _fail(make_model(max_retries=1))

    assert (error.kind, error.retryable) == ("rate_limit", True)
    assert len(server.requests) == 2


def test_bad_key_fails_at_once_without_retry(server, make_model, sleeps):
    """A 401 is final: one request, no waiting, ModelError kind auth, not retryable, naming the
    model and the status."""
    server.add(Fail(401, "Incorrect API key provided"), Reply("never sent"))

    error = _fail(make_model(), purpose="dream.phase1")

    assert (error.kind, error.retryable) == ("auth", False)
    assert len(server.requests) == 1
    assert sleeps.waits == []
    assert "model openai/dream-scripted-test (dream.phase1): HTTP 401" in error.message
    assert error.hint


def test_a_final_failure_after_a_transient_one_stops_at_once(server, make_model):
    """A 503 is retried, but when the retry is answered with a 401 the call stops there: the
    error is the 401, saying it was not retried."""
    server.add(Fail(503, "busy"), Fail(401, "Incorrect API key provided"), Reply("never sent"))

    error = _fail(make_model())

    assert (error.kind, error.retryable) == ("auth", False)
    assert len(server.requests) == 2
    assert "on attempt 2, not retried" in error.message


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (400, "Invalid value for 'temperature'", "bad_request"),
        (400, "This model's maximum context length is 8192 tokens", "bad_request"),
        (403, "Project does not have access to model", "auth"),
        (404, "The model does not exist", "bad_request"),
        (422, "Unprocessable", "bad_request"),
    ],
)
def test_requests_the_server_refuses_are_never_retried(server, make_model, status, message, kind):
    """Bad requests (400, 404, 422, context window) and refusals (403) fail on the first request:
    asking again cannot change the answer."""
    server.add(Fail(status, message), Reply("never sent"))

    error = _fail(make_model())

    assert (error.kind, error.retryable) == (kind, False)
    assert len(server.requests) == 1
    assert f"HTTP {status}" in error.message


def test_a_hang_beyond_the_timeout_is_a_retryable_timeout(server, make_model):
    """A server that does not answer within the timeout is asked again, and when it keeps
    hanging the call fails as kind timeout, retryable, after bounded time."""
    server.add(Hang(5), Hang(5))
    started = time.monotonic()

    error = _fail(make_model(timeout=0.3, max_retries=1))

    assert (error.kind, error.retryable) == ("timeout", True)
    assert "0.3 s" in error.message
    assert len(server.requests) == 2
    assert time.monotonic() - started < 4


def test_an_answer_trickling_in_byte_by_byte_is_bounded_by_the_timeout(server, make_model):
    """A server sending its answer one byte every 0.2 s (each read gets data well before the
    client's per-read timeout, so on its own the call took minutes) fails as a retryable timeout
    once the whole request has taken the timeout (1 s), attempt by attempt."""
    server.add(Trickle(Reply("x" * 300), interval=0.2), Trickle(Reply("y" * 300), interval=0.2))
    started = time.monotonic()

    error = _fail(make_model(timeout=1, max_retries=1))

    assert (error.kind, error.retryable) == ("timeout", True)
    assert "within 1 s" in error.message and "still arriving" in error.message
    assert len(server.requests) == 2
    assert time.monotonic() - started < 15


def test_a_slow_answer_within_the_timeout_is_fine(server, make_model):
    """An answer that takes a moment but arrives before the timeout is used."""
    server.add(Hang(0.2, then=Reply("late but fine")))

    assert make_model(timeout=5).complete(MESSAGES).content == "late but fine"


def test_closing_does_not_wait_for_an_abandoned_call_and_a_closed_model_still_answers(server, make_model):
    """``close`` (what a run does with the model it built, when it ends) returns at once even while
    a call abandoned at its deadline is still reading; a call after it opens a new connection."""
    server.add(Trickle(Reply("x" * 300), interval=0.2), Reply("again"))
    model = make_model(timeout=1, max_retries=0)
    assert _fail(model).kind == "timeout"
    started = time.monotonic()
    model.close()
    assert time.monotonic() - started < 0.5
    assert model.complete(MESSAGES).content == "again"
    model.close()
    model.close()


def test_dropped_connection_is_retried(server, make_model):
    """A connection closed without an answer is a transient connection error: retried, and the
    next answer is used."""
    server.add(Drop(), Reply("ok"))

    assert make_model().complete(MESSAGES).content == "ok"
    assert len(server.requests) == 2


def test_nothing_listening_is_a_connection_error(make_model):
    """An api base where nothing listens fails as kind connection, retryable, naming the address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"

    error = _fail(make_model(api_base=base, max_retries=1))

    assert (error.kind, error.retryable) == ("connection", True)
    assert base in error.message


@pytest.mark.parametrize(
    "body",
    ["<html><body>502 from a proxy page</body></html>", '{"foo": 1}', '{"choices": []}', "[1, 2]"],
)
def test_garbage_answers_fail_without_retry(server, make_model, body):
    """An answer that is not a chat completion (HTML, JSON of another shape, no choices) fails as
    kind bad_reply, not retryable, on the first request, and never becomes content."""
    server.add(Garbage(body), Reply("never sent"))

    error = _fail(make_model())

    assert (error.kind, error.retryable) == ("bad_reply", False)
    assert len(server.requests) == 1


# --- secrets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["sk-dm-test-4f9c2a7e1b8d6c30", "hunter2-plain-dream-memory-key"])
def test_api_key_never_appears_in_errors_or_reprs(server, make_model, key):
    """Even when the server echoes the key back, it appears in no error message, hint or repr,
    whether or not it looks like a provider key."""
    server.add(
        Fail(401, f"Incorrect API key provided: {key}"),
        Fail(500, f"backend choked on Authorization: Bearer {key}"),
        Fail(500, f"key {key} again"),
        Garbage(f"<html>{key}</html>"),
    )
    model = make_model(api_key=key, max_retries=1)

    errors = [_fail(model), _fail(model), _fail(model)]

    assert len(server.requests) == 4
    for error in errors:
        for text in (str(error), repr(error), error.message, error.hint or ""):
            assert key not in text
    assert key not in repr(model)
    assert "[redacted]" in errors[0].message


# --- cost ----------------------------------------------------------------------------------------


def test_cost_is_unknown_for_a_model_without_a_price(server, make_model):
    """A model litellm has no price for reports tokens but a cost of None (unknown, not zero)."""
    server.add(Reply("ok", usage={"prompt_tokens": 1000, "completion_tokens": 100}))

    usage = make_model(name="openai/dream-scripted-test").complete(MESSAGES).usage

    assert usage.cost_usd is None
    assert usage.prompt_tokens == 1000


def test_cost_is_priced_from_the_local_cost_map_for_a_known_model(server, make_model):
    """A known model (openai/gpt-4o-mini, served here by the scripted server) gets a positive cost
    from litellm's bundled price list."""
    server.add(Reply("ok", usage={"prompt_tokens": 1000, "completion_tokens": 100}))

    usage = make_model(name="openai/gpt-4o-mini").complete(MESSAGES).usage

    assert usage.cost_usd is not None
    assert 0 < usage.cost_usd < 0.01


def test_tokens_are_counted_when_the_server_reports_none(server, make_model):
    """A server that reports no usage still yields token counts (estimated locally), so budgets
    keep working against local servers."""
    server.add(Reply("a reply of a few words", usage={}))

    usage = make_model().complete(MESSAGES).usage

    assert usage.prompt_tokens > 0
    assert usage.completion_tokens > 0


# --- wiring --------------------------------------------------------------------------------------


def test_importing_the_adapter_does_not_import_litellm():
    """`import dream_memory.adapters.llm` stays cheap: litellm (seconds, ~200 MB) and the openai
    client are loaded on the first call only."""
    code = (
        "import sys, dream_memory.adapters.llm, dream_memory.adapters.tokens, dream_memory.testing.llm_server\n"
        "print(json.dumps(sorted(m for m in ('litellm', 'openai') if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_build_chat_model_calls_an_endpoint_named_by_address_over_plain_http():
    """`openai/<name>` with an api base (llama.cpp's server, vLLM, a proxy) is called directly,
    without litellm; the same name without an address is OpenAI's own API, through litellm."""
    from dream_memory.adapters.openai_compat import OpenAICompatibleChatModel

    direct = build_chat_model(ResolvedModel(name="openai/qwen", source="test", api_base="http://127.0.0.1:1/v1"))
    other = build_chat_model(ResolvedModel(name="anthropic/claude", source="test", api_base="http://127.0.0.1:1"))
    assert isinstance(direct, OpenAICompatibleChatModel)
    assert isinstance(other, LiteLLMChatModel)


def test_a_call_to_an_endpoint_named_by_address_never_imports_litellm(server):
    """The direct route loads httpx only: a scheduled run against a local server does not pay
    litellm's seconds of import and ~200 MB on every start."""
    server.add(Reply("ok", usage={"prompt_tokens": 3, "completion_tokens": 1}))
    code = (
        "import json, sys\n"
        "from dream_memory.adapters.llm import build_chat_model\n"
        "from dream_memory.settings import ResolvedModel\n"
        f"m = build_chat_model(ResolvedModel(name='openai/x', source='t', api_base={server.base_url!r}, api_key='k'))\n"
        "reply = m.complete([{'role': 'user', 'content': 'hi'}])\n"
        "print(json.dumps([reply.content, sorted(n for n in ('litellm', 'openai') if n in sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == ["ok", []]


def test_build_chat_model_picks_litellm_for_a_named_model():
    """A configured model id gets the litellm adapter, named after the model."""
    model = build_chat_model(ResolvedModel(name="openai/gpt-4o-mini", source="test", api_key="k"))

    assert isinstance(model, LiteLLMChatModel)
    assert model.name == "openai/gpt-4o-mini"


def test_build_chat_model_picks_the_offline_engine_for_offline():
    """The built-in `offline` model gets the deterministic engine, not litellm."""
    pytest.importorskip("dream_memory.adapters.offline")

    model = build_chat_model(ResolvedModel(name="offline", source="test"))

    assert not isinstance(model, LiteLLMChatModel)
    assert model.name == "offline"
