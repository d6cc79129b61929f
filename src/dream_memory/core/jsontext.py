"""JSON text read from files the product does not control (config, state, journal, markers,
model tool arguments): ``loads`` is ``json.loads`` whose failure is always a ValueError.

Python's JSON parser recurses once per nesting level and raises RecursionError (not a
ValueError) on input a few thousand levels deep, which every ``except ValueError`` lets through
as a traceback. Here such input is just malformed JSON, reported like any other.
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
        raise json.JSONDecodeError("nested too deeply to be read", doc, 0) from None
