"""Fakes shipped with dream-memory, so tests read like specs and users can test their own setups.

- ``FrozenClock``: the Clock port, held still.
- ``build_workspace`` / ``write_session`` / ``read_history``: real workspaces on disk;
  ``clean_env``: the environment of a machine with no configuration, for subprocesses.
- ``ScriptedLLMServer`` and its steps (``Reply``, ``Fail``, ``Hang``, ``Garbage``, ``Drop``,
  ``Trickle``, ``tool_call``, ``from_chat_model``): an OpenAI-compatible HTTP server on 127.0.0.1 that answers
  from a script and records every request. ``python -m dream_memory.testing.llm_server`` runs it
  on its own.
"""

from __future__ import annotations

from dream_memory.testing.clock import FrozenClock
from dream_memory.testing.llm_server import (
    Drop,
    Fail,
    Garbage,
    Hang,
    Reply,
    ScriptedLLMServer,
    Trickle,
    from_chat_model,
    tool_call,
)
from dream_memory.testing.workspace import build_workspace, clean_env, read_history, write_session

__all__ = [
    "Drop",
    "Fail",
    "FrozenClock",
    "Garbage",
    "Hang",
    "Reply",
    "ScriptedLLMServer",
    "Trickle",
    "build_workspace",
    "clean_env",
    "from_chat_model",
    "read_history",
    "tool_call",
    "write_session",
]
