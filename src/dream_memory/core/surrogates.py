"""Lone UTF-16 surrogates: text that UTF-8 cannot encode, which reaches the product two ways:
undecodable bytes kept by ``surrogateescape`` (a non-UTF-8 `dream append` argument, a session
line) and a JSON escape of half an emoji (``"\\ud83d"``, from a client that cut it). Every place
that writes text as UTF-8 decides once what such a character becomes: a JSON escape that reads
back unchanged, a visible escape, or U+FFFD in what only a model reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    return _LONE_SURROGATE.search(text) is not None


def escape_lone_surrogates(text: str) -> str:
    """Each lone surrogate as its visible escape (``\\udcff``), the way the JSON faces show it:
    for text that is not JSON (commit messages, MCP replies), so nothing of it is dropped."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def replace_lone_surrogates(text: str) -> str:
    """Each lone surrogate as U+FFFD: only for what a model is sent, never for what is kept."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def json_dumps_utf8(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` as readable text (``ensure_ascii=False``) that UTF-8 can always encode: when
    the text holds a lone surrogate, everything is escaped instead, which ``json.loads`` turns back
    into the same strings."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    if has_lone_surrogate(text):
        text = json.dumps(value, ensure_ascii=True, **kwargs)
    return text
