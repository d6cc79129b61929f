"""dream-memory: long-term memory for AI agents, kept as versioned plain markdown.

Importing the package is cheap: it pulls in neither litellm nor dulwich until a use case needs them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
