"""Lone UTF-16 surrogates: text that UTF-8 cannot encode, which reaches the product two ways:
undecodable bytes kept by ``surrogateescape`` (a non-UTF-8 `dream append` argument, a session
line) and a JSON escape of half an emoji (``"\\ud83d"``, from a client that cut it). Every place
that writes text as UTF-8 decides once what such a character becomes: a JSON escape that reads
back unchanged, a visible escape, or U+FFFD in what only a model reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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


def in_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings) with ``change`` applied to every string in
    it, keys included: for a message or a reply about to be sent whole."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {in_strings(key, change): in_strings(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [in_strings(item, change) for item in value]
    return value


def to_bytes(text: str) -> bytes:
    """``text`` as bytes for a look-up among names or bytes on disk: bytes that were not UTF-8
    (kept by ``surrogateescape``) come back as they were; half an emoji, which no bytes stand for,
    becomes bytes no UTF-8 text holds, so it is simply not found."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def json_dumps_utf8(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` as readable text (``ensure_ascii=False``) that UTF-8 can always encode: when
    the text holds a lone surrogate, everything is escaped instead, which ``json.loads`` turns back
    into the same strings."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    if has_lone_surrogate(text):
        text = json.dumps(value, ensure_ascii=True, **kwargs)
    return text
