"""dream-memory: long-term memory for AI agents, kept as versioned plain markdown.

Importing the package is cheap: it pulls in neither litellm nor dulwich until a use case needs
them. ``Workspace`` (the Python API, see ``dream_memory.api``) is loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["DreamError", "Workspace", "__version__"]

if TYPE_CHECKING:
    from dream_memory.api import Workspace
    from dream_memory.errors import DreamError


def __getattr__(name: str) -> Any:
    if name == "Workspace":
        from dream_memory.api import Workspace

        return Workspace
    if name == "DreamError":
        from dream_memory.errors import DreamError

        return DreamError
    raise AttributeError(f"module 'dream_memory' has no attribute {name!r}")
