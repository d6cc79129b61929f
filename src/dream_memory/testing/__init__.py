"""Fakes shipped with dream-memory, so tests read like specs and users can test their own setups.

- ``FrozenClock``: the Clock port, held still.
- ``build_workspace`` / ``write_session`` / ``read_history``: real workspaces on disk.
- ``ScriptedLLMServer`` (``dream_memory.testing.llm_server``): an OpenAI-compatible HTTP server on
  127.0.0.1 that answers from a script and records every request.
"""

from __future__ import annotations

from dream_memory.testing.clock import FrozenClock
from dream_memory.testing.workspace import build_workspace, read_history, write_session

__all__ = ["FrozenClock", "build_workspace", "read_history", "write_session"]
