"""An OpenAI-compatible endpoint named by its address, spoken to over plain HTTP (httpx).

A preset with ``apiBase`` and an ``openai/<name>`` model (llama.cpp's server, vLLM, Ollama's
``/v1``, LM Studio, a proxy) needs nothing of litellm: the request is one JSON POST to
``<apiBase>/chat/completions`` and the answer is the JSON the wire protocol documents
(docs/reference/llm-protocol.md). Importing litellm costs 3-5 s of CPU and ~200 MB per process;
httpx costs ~0.1 s. So these endpoints go direct, and litellm stays the route for providers named
without an address (``anthropic/...``, ``gemini/...``, OpenAI's own API), where its provider
knowledge earns its cost.

Retries, the whole-call deadline, error wording and reply parsing are the shared ones of
``adapters.llm``; this module only sends, reads and prices. An HTTP error answer becomes
:class:`EndpointAnswered` (status, headers, the server's own message), which ``adapters.llm``'s
classification reads like any other answered error.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.adapters.llm import PLACEHOLDER_API_KEY, ChatCompletionsModel, bad_reply_error
from dream_memory.adapters.model_errors import EndpointAnswered

if TYPE_CHECKING:
    import httpx

    from dream_memory.settings import ResolvedModel

PREFIX = "openai/"
# The fields of our request that belong on the wire (the rest steer litellm or our own loop).
_WIRE_FIELDS = ("messages", "temperature", "max_tokens", "tools", "tool_choice")
_MAX_MESSAGE_CHARS = 2000


def is_direct(resolved: ResolvedModel) -> bool:
    """Whether a model is an OpenAI-compatible endpoint named by address (this module's to call)."""
    return bool(resolved.api_base) and resolved.name.startswith(PREFIX) and len(resolved.name) > len(PREFIX)


class OpenAICompatibleChatModel(ChatCompletionsModel):
    """A ChatModel for an OpenAI-compatible endpoint: POST ``/chat/completions`` with httpx."""

    def __init__(self, resolved: ResolvedModel, **kwargs: Any) -> None:
        super().__init__(resolved, **kwargs)
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                import httpx

                r = self._resolved
                self._client = httpx.Client(
                    timeout=httpx.Timeout(r.timeout),
                    headers={"Authorization": f"Bearer {r.api_key or PLACEHOLDER_API_KEY}"},
                )
            return self._client

    def close(self) -> None:
        """Close the keep-alive connections. Left to the garbage collector, each run's socket
        stayed open until then and was reported as an unclosed socket (ResourceWarning) in the
        host's process. A later call opens a new client, so a closed model still works."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _prepare(self) -> None:
        self._http()

    def _send(self, request: dict[str, Any], purpose: str) -> Any:
        body = {"model": self._resolved.name[len(PREFIX) :]}
        body.update({k: request[k] for k in _WIRE_FIELDS if k in request})
        url = str(self._resolved.api_base).rstrip("/") + "/chat/completions"
        response = self._http().post(url, json=body)
        if response.status_code >= 400:
            raise EndpointAnswered(response.status_code, response.headers, _server_message(response))
        try:
            return response.json()
        except ValueError as exc:
            raise bad_reply_error(self._resolved.name, purpose, "the answer is not JSON") from exc

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = _prices().get(self._resolved.name[len(PREFIX) :])
        if not isinstance(price, dict):
            return None
        try:
            return (
                float(price["input_cost_per_token"]) * prompt_tokens
                + float(price["output_cost_per_token"]) * completion_tokens
            )
        except (KeyError, TypeError, ValueError):
            return None


def _server_message(response: httpx.Response) -> str:
    """What the server said about its error: ``error.message`` of a JSON body, else the text."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error)
            return text[:_MAX_MESSAGE_CHARS]
    return response.text[:_MAX_MESSAGE_CHARS]


@functools.cache
def _prices() -> dict[str, Any]:
    """litellm's bundled price list, read as data (no litellm import): the cost of a known model
    behind an address (a proxy serving ``gpt-4o-mini``); unknown models cost None, never 0."""
    try:
        spec = importlib.util.find_spec("litellm")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders:
            path = Path(folder) / "model_prices_and_context_window_backup.json"
            if path.is_file():
                loaded = json.loads(path.read_text(encoding="utf-8"))
                return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError, ImportError):
        pass
    return {}
