"""The ChatModel port: one chat-completions call, our retries, errors in our terms.

Two routes share everything but the sending: an OpenAI-compatible endpoint named by its address
(``openai/<name>`` with ``apiBase``) is called over plain HTTP (``adapters.openai_compat``);
every other model goes through litellm, which knows the providers. litellm is imported on the
first call, never when this module is imported: it costs seconds and ~200 MB, and commands that
need no model (``dream --help``, ``dream status``) must not pay that.

Retries are ours (tenacity), not litellm's or the openai client's, so that exactly one policy
decides what is transient: rate limits, timeouts, connection failures and 5xx are retried with
exponential backoff and jitter (or the server's Retry-After when it is sane); auth and
bad-request failures fail at once, since asking again cannot fix them.

Replies are returned as received. Judging content (empty, cut off, error text) is the caller's
job through ``core.chat.check_reply``; only a response that cannot be read at all is an error here.
"""

from __future__ import annotations

import abc
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import tenacity

from dream_memory.adapters.model_errors import classify, retry_after
from dream_memory.core.chat import ChatReply, Message, ToolCall, ToolSpec, Usage
from dream_memory.core.surrogates import in_strings, replace_lone_surrogates
from dream_memory.errors import ModelError

if TYPE_CHECKING:
    from dream_memory.core.ports import ChatModel
    from dream_memory.settings import ResolvedModel

# Local OpenAI-compatible servers ignore the key, but the openai client refuses to send a request
# without one ("Missing credentials").
PLACEHOLDER_API_KEY = "no-key-required"
MAX_BACKOFF_SECONDS = 30.0
_MAX_DETAIL_CHARS = 300
_DEADLINE_GRACE_SECONDS = 1.0

_STATUS_WORDS = {
    400: "bad request",
    401: "authentication failed",
    402: "payment required",
    403: "permission denied",
    404: "model or endpoint not found",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    422: "request not processable",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}

_HINTS = {
    "auth": "check the API key for this model (DREAM_API_KEY, or the variable named by the preset's apiKeyEnv)",
    "rate_limit": "the provider is rate limiting: run less often, lower maxBatchSize, or raise the plan's limits",
    "timeout": "the model did not answer in time: raise the preset's timeout or try a faster model",
    "connection": "check the api base address and that the server is running and reachable",
    "server": "the provider failed on its side; the next run retries the same batch",
    "bad_request": "the request was refused as invalid: check the model name and the preset's settings",
    "bad_reply": "the endpoint answered with something that is not a chat completion: check the api base",
}


def _litellm() -> Any:
    """Import litellm with its network lookups turned off (cost map and helper downloads)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm  # noqa: TID251 (the one sanctioned import, deferred on purpose)

    litellm.suppress_debug_info = True
    return litellm


def bad_reply_error(name: str, purpose: str, what: str) -> ModelError:
    """An answer that is not a readable chat completion: not retried (asking a server that answers
    nonsense again only burns budget)."""
    where = f"model {name}" + (f" ({purpose})" if purpose else "")
    return ModelError(f"{where}: {what}", kind="bad_reply", retryable=False, hint=_HINTS["bad_reply"])


class ChatCompletionsModel(abc.ABC):
    """A ChatModel for ``resolved``: retries, the whole-call deadline, errors and reply reading.
    Subclasses send the request (``_send``) and price it (``_cost``).

    ``sleep`` is what waits between retries (tests pass a recorder instead of real sleeping).
    ``on_retry`` is called before each retry's wait with the attempt that failed, the attempts
    allowed, the wait in seconds and the reason: the run's progress (``app.dream.watch``).
    """

    def __init__(self, resolved: ResolvedModel, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._resolved = resolved
        self._sleep = sleep
        self.on_retry: Callable[[int, int, float, str], None] | None = None

    @property
    def name(self) -> str:
        return self._resolved.name

    def __repr__(self) -> str:
        # Never the key: ResolvedModel hides it from its own repr, and so do we.
        return f"{type(self).__name__}(name={self._resolved.name!r}, api_base={_safe_url(self._resolved.api_base)!r})"

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        purpose: str = "",
    ) -> ChatReply:
        request = self._request(messages, tools)
        attempts = 0

        def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            return self._call_once(request, purpose)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._resolved.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, ModelError) and exc.retryable),
            before_sleep=self._say_retry,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            response = retrying(attempt)
        except ModelError as exc:
            if attempts > 1:
                how = f"gave up after {attempts} attempts" if exc.retryable else f"on attempt {attempts}, not retried"
                raise ModelError(
                    f"{exc.message} ({how})",
                    kind=exc.kind,
                    retryable=exc.retryable,
                    hint=exc.hint,
                ) from exc
            raise
        return self._reply(response, messages, purpose)

    # the request

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> dict[str, Any]:
        r = self._resolved
        request: dict[str, Any] = {
            "model": r.name,
            # JSON may escape half an emoji (a UTF-16 client cut it), and history keeps it so; a
            # request body must be UTF-8, and failing there stopped every run as a bad request.
            # U+FFFD goes out instead: only what is sent changes.
            "messages": [in_strings(dict(m), replace_lone_surrogates) for m in messages],
            "temperature": r.temperature,
            "max_tokens": r.max_tokens,
            "timeout": r.timeout,
            # Our tenacity loop is the only retry policy; without these the openai client retries
            # 5xx twice more on its own, multiplying waits and hiding the request count.
            "num_retries": 0,
            "max_retries": 0,
            # A provider that does not support a parameter (temperature on some reasoning
            # models) should still answer rather than fail the batch.
            "drop_params": True,
        }
        request.update(_tool_fields(tools))
        if r.api_base:
            request["api_base"] = r.api_base
        if r.api_key:
            request["api_key"] = r.api_key
        elif r.api_base:
            request["api_key"] = PLACEHOLDER_API_KEY
        return request

    def _call_once(self, request: dict[str, Any], purpose: str) -> Any:
        """One completion, bounded as a whole by the preset's timeout.

        The HTTP client's timeout bounds each read, so a server sending its answer a byte at a
        time (a stuck proxy, a hostile endpoint) kept a run waiting far past it. The call runs
        in a worker thread that is abandoned at the deadline (it ends when its socket does);
        the grace lets the client's own timeout, with its clearer cause, come first.
        """
        self._prepare()  # imports happen here, outside the deadline: seconds for litellm on a cold start
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["response"] = self._send(request, purpose)
            except BaseException as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=call, name="dream-model-call", daemon=True)
        worker.start()
        worker.join(self._resolved.timeout + _DEADLINE_GRACE_SECONDS)
        if worker.is_alive():
            where = f"model {self._resolved.name}" + (f" ({purpose})" if purpose else "")
            raise ModelError(
                f"{where}: no complete answer within {self._resolved.timeout:g} s (timeout: the answer was "
                "still arriving)",
                kind="timeout",
                retryable=True,
                hint=_HINTS["timeout"],
            )
        error = outcome.get("error")
        if isinstance(error, ModelError):  # the sender's own verdict (an answer that is not JSON)
            raise error
        if isinstance(error, Exception):
            raise self._error(error, purpose) from error
        if error is not None:
            raise error
        return outcome["response"]

    def _say_retry(self, state: tenacity.RetryCallState) -> None:
        if self.on_retry is None:
            return
        exc = state.outcome.exception() if state.outcome is not None else None
        reason = f"{exc.kind}: {exc.message}" if isinstance(exc, ModelError) else str(exc)
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        self.on_retry(state.attempt_number, self._resolved.max_retries + 1, float(wait), reason)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after(exc.__cause__) if exc is not None else None
        if asked is not None:
            return asked
        base = self._resolved.retry_base_seconds
        backoff = tenacity.wait_exponential_jitter(multiplier=base, max=MAX_BACKOFF_SECONDS, jitter=base)
        return float(backoff(state))

    # errors

    def _error(self, exc: BaseException, purpose: str) -> ModelError:
        kind, retryable, status = classify(exc)
        where = f"model {self._resolved.name}" + (f" ({purpose})" if purpose else "")
        if kind == "timeout" and status is None:
            what = f"no answer within {self._resolved.timeout:g} s (timeout)"
        elif kind == "connection":
            what = f"could not reach {_safe_url(self._resolved.api_base) or 'the provider'} (connection failed)"
        elif kind == "bad_reply":
            what = "the endpoint's answer is not a readable chat completion"
        else:
            what = f"HTTP {status} {_STATUS_WORDS.get(status or 0, 'error')}" if status else "request failed"
        # A client-side timeout's text only repeats what the message already says.
        detail = "" if kind == "timeout" and status is None else _scrub(_detail(exc), self._resolved.api_key)
        message = f"{where}: {what}" + (f": {detail}" if detail else "")
        return ModelError(message, kind=kind, retryable=retryable, hint=_HINTS.get(kind))

    # the reply

    def _reply(self, response: Any, messages: Sequence[Message], purpose: str) -> ChatReply:
        try:
            choice = _field(response, "choices")[0]
            message = _field(choice, "message")
            content = _text(_field(message, "content"))
            calls = tuple(
                ToolCall(
                    id=_field(call, "id", None) or f"call_{index}",
                    name=_field(_field(call, "function"), "name", None) or "",
                    arguments=_arguments(_field(_field(call, "function"), "arguments", None)),
                )
                for index, call in enumerate(_field(message, "tool_calls", None) or ())
            )
            finish_reason = _field(choice, "finish_reason", None)
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise bad_reply_error(
                self._resolved.name, purpose, "the answer has no usable choice (no choices, or not a chat completion)"
            ) from exc
        return ChatReply(
            content=content,
            tool_calls=calls,
            finish_reason=finish_reason,
            usage=self._usage(response, messages, content, calls),
        )

    def _usage(
        self, response: Any, messages: Sequence[Message], content: str | None, calls: tuple[ToolCall, ...]
    ) -> Usage:
        reported = _field(response, "usage", None)
        prompt = _count(_field(reported, "prompt_tokens", 0))
        completion = _count(_field(reported, "completion_tokens", 0))
        if prompt or completion:
            return Usage(
                prompt_tokens=prompt, completion_tokens=completion, cost_usd=self._cost(prompt, completion), calls=1
            )
        # Some local servers report no usage. Budgets must still see tokens, so count them.
        from dream_memory.adapters.tokens import default_counter

        counter = default_counter()
        prompt = sum(counter.count(_text(m.get("content")) or "") + 4 for m in messages)
        completion = counter.count(content or "") + sum(counter.count(c.name + c.arguments) for c in calls)
        return Usage(
            prompt_tokens=prompt, completion_tokens=completion, cost_usd=self._cost(prompt, completion), calls=1
        )

    # what a route provides

    @abc.abstractmethod
    def _prepare(self) -> None:
        """Load what sending needs (libraries, a client) before the call's deadline starts."""

    @abc.abstractmethod
    def _send(self, request: dict[str, Any], purpose: str) -> Any:
        """One request, as built by ``_request``; returns the response (an object or JSON dict)."""

    @abc.abstractmethod
    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The price of these tokens in USD, or None when the model's price is unknown (never 0)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connections this model holds (``app.models.close_model``); a later call
        may open them again."""


class LiteLLMChatModel(ChatCompletionsModel):
    """A provider's model through ``litellm.completion`` (its routing, auth and price list)."""

    def close(self) -> None:
        """Nothing to release (``app.models.close_model``): litellm keeps its HTTP clients in its
        own process-wide cache, shared by every model with the same endpoint and key, so runs
        reuse one connection instead of leaving one each; closing them would only defeat that."""

    def _prepare(self) -> None:
        _litellm()

    def _send(self, request: dict[str, Any], purpose: str) -> Any:
        return _litellm().completion(**request)

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        try:
            prompt_cost, completion_cost = _litellm().cost_per_token(
                model=self._resolved.name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
            return float(prompt_cost) + float(completion_cost)
        except Exception:  # litellm raises for a model it has no price for
            return None


def _tool_fields(tools: Sequence[ToolSpec] | None) -> dict[str, Any]:
    """``tools`` and an explicit ``tool_choice: "auto"``. Without tool_choice, llama-cpp-python's
    chatml-function-calling handler leaves the tools out of the prompt altogether, so the model
    never sees them; other servers read a missing tool_choice differently. Saying it costs nothing."""
    if not tools:
        return {}
    return {"tools": [t.to_openai() for t in tools], "tool_choice": "auto"}


def build_chat_model(resolved: ResolvedModel) -> ChatModel:
    """The ChatModel for a resolved model: the offline engine for ``offline``, plain HTTP for an
    OpenAI-compatible endpoint named by address, litellm otherwise."""
    if resolved.is_offline:
        from dream_memory.adapters.offline import build_offline_model

        return build_offline_model()
    from dream_memory.adapters.openai_compat import OpenAICompatibleChatModel, is_direct

    if is_direct(resolved):
        return OpenAICompatibleChatModel(resolved)
    return LiteLLMChatModel(resolved)


# --- text helpers --------------------------------------------------------------------------------

# "litellm.AuthenticationError: AuthenticationError: OpenAIException - " and the like.
_PREFIX = re.compile(r"^(?:\s*(?:litellm\.)?[A-Za-z_]*(?:Error|Exception|Timeout)(?: Error)?\s*[:-]\s*)+")
# litellm appends its internal response objects to JSON errors: noise for a reader.
_NOISE = re.compile(r",?\s*Received response - <APIResponse.*$|^error - ")
_KEY_SHAPES = re.compile(r"\b(?:sk|pk|rk|gsk|xai)-[A-Za-z0-9_\-*]{6,}|\bBearer\s+\S+", re.IGNORECASE)


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = _NOISE.sub("", _PREFIX.sub("", text)).strip()
    if len(text) > _MAX_DETAIL_CHARS:
        text = text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text


def _scrub(text: str, secret: str | None) -> str:
    """Remove the key, anything key-shaped (providers echo keys masked or not) and anything the
    secret guard recognizes (an error may quote the request) from text headed for reports and logs."""
    from dream_memory.adapters.secrets import SecretScanner

    if secret and len(secret) >= 4:
        text = text.replace(secret, "[redacted]")
    text = _KEY_SHAPES.sub("[redacted]", text)
    return SecretScanner().redact(text)[0]


def _safe_url(url: str | None) -> str | None:
    """An api base fit for messages: no user:password part, no query string."""
    if not url:
        return url
    url = re.sub(r"//[^/@]*@", "//", url)
    return url.split("?", 1)[0]


def _field(obj: Any, name: str, *default: Any) -> Any:
    """``obj[name]`` of a JSON answer or ``obj.name`` of a client's object; without a default a
    missing field raises (KeyError), which the reader turns into a bad_reply."""
    if isinstance(obj, dict):
        return obj[name] if not default else obj.get(name, default[0])
    if obj is None and default:
        return default[0]
    return getattr(obj, name) if not default else getattr(obj, name, default[0])


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _arguments(value: Any) -> str:
    """A tool call's arguments as the JSON text the loop parses (some servers send an object)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)) or None
    return str(content)
