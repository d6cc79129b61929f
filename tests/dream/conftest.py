"""Fixtures for Dream tests (helpers live in dream_helpers.py: conftest modules share one name)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dream_helpers import Cli

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model


@pytest.fixture
def isolated(tmp_path: Path) -> Cli:
    """A HOME with no config, DREAM_WORKSPACE pointing at a workspace as nanobot leaves it
    (memory/, no templates, no repository; only `dream init` creates a workspace), no model chosen."""
    home = tmp_path / "home"
    home.mkdir()
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "DREAM_WORKSPACE": str(workspace),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DREAM_MODEL": "",
        "DREAM_CONFIG": "",
        "DREAM_API_BASE": "",
        "DREAM_API_KEY": "",
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
    }
    return Cli(home, workspace, env)


@pytest.fixture
def offline_server() -> Iterator[ScriptedLLMServer]:
    """A real HTTP model answering through the deterministic offline engine."""
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        yield server
