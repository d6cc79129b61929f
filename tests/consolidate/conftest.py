"""Fixtures for the Consolidator's tests (helpers live in consolidate_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from consolidate_helpers import FIXTURES, Cli, make_cli

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model


@pytest.fixture
def isolated(tmp_path: Path) -> Cli:
    """A HOME with no config, DREAM_WORKSPACE pointing at a fresh folder, no model chosen."""
    return make_cli(tmp_path)


@pytest.fixture
def offline_server() -> Iterator[ScriptedLLMServer]:
    """A real HTTP model answering through the deterministic offline engine."""
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        yield server


@pytest.fixture
def fixture_sessions() -> list[Path]:
    """The real session files of the real-workspace corpus (read in place, never copied)."""
    if not FIXTURES.is_dir():
        pytest.skip(f"{FIXTURES} is absent")
    found = sorted(FIXTURES.glob("*/sessions/*.jsonl")) + sorted(FIXTURES.glob("*/workspace/sessions/*.jsonl"))
    if not found:
        pytest.skip(f"no session files under {FIXTURES}")
    return found
