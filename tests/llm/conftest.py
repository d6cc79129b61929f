"""Shared pieces for the model-layer tests: a scripted server and a model pointed at it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dream_memory.adapters.llm import ChatCompletionsModel, LiteLLMChatModel
from dream_memory.adapters.openai_compat import OpenAICompatibleChatModel
from dream_memory.settings import ResolvedModel
from dream_memory.testing.llm_server import ScriptedLLMServer

# Shaped like a real key so the provider-style masking is exercised too; never printed anywhere.
API_KEY = "sk-dm-test-4f9c2a7e1b8d6c30"
UNKNOWN_MODEL = "openai/dream-scripted-test"

# litellm must read its bundled cost map before its first import, whichever test imports it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as running:
        yield running


class SleepRecorder:
    """Stands in for time.sleep: records the waits instead of taking them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


# Both routes to an endpoint named by address face every adapter test: the plain-HTTP one that
# `dream` picks for it, and litellm's, which the other providers take. Same answers, same errors.
ROUTES = {"http": OpenAICompatibleChatModel, "litellm": LiteLLMChatModel}


@pytest.fixture(params=sorted(ROUTES))
def route(request: pytest.FixtureRequest) -> type[ChatCompletionsModel]:
    return ROUTES[request.param]


@pytest.fixture
def make_model(
    server: ScriptedLLMServer, sleeps: SleepRecorder, route: type[ChatCompletionsModel]
) -> Iterator[Callable[..., ChatCompletionsModel]]:
    """``make_model(**overrides)``: a model on the scripted server with tiny retry waits, by each
    route; closed after the test, as the use case that builds one closes it (``app.models``)."""
    made: list[ChatCompletionsModel] = []

    def make(**overrides: Any) -> ChatCompletionsModel:
        fields: dict[str, Any] = {
            "name": UNKNOWN_MODEL,
            "source": "test",
            "api_base": server.base_url,
            "api_key": API_KEY,
            "timeout": 10.0,
            "max_retries": 3,
            "retry_base_seconds": 0.01,
        }
        fields.update(overrides)
        made.append(route(ResolvedModel(**fields), sleep=sleeps))
        return made[-1]

    yield make
    for model in made:
        model.close()


@pytest.fixture
def api_key() -> str:
    """The key make_model sends, for tests asserting it never leaks."""
    return API_KEY
