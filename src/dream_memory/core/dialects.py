"""Tool calls written as text: the dialects real servers hand back instead of ``tool_calls``.

Many local servers (llama.cpp without a tool parser, Ollama models without one, vLLM without
``--enable-auto-tool-choice``) return a model's tool calls as plain text in ``content``. Measured
against Qwen2.5-Coder-1.5B behind llama-cpp-python:

- ``hermes``: ``<tool_call>{"name": "edit_file", "arguments": {...}}</tool_call>`` (Qwen's and
  Hermes' own format; the closing tag is sometimes missing);
- ``functions``: ``functions.edit_file: {...}`` or ``functions.edit_file({...})``;
- ``fenced``: a fenced JSON block holding ``{"name": ..., "arguments": ...}`` (or a list of them);
- ``bare``: such an object anywhere in the text, when it names one of the offered tools.

Only calls naming an offered tool are taken; anything else in the text is left alone. The
arguments go through the same lenient reader as native calls (``parse_json_object``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from dream_memory.core.chat import ToolCall, balanced_end, parse_json_object

DIALECTS = ("native", "hermes", "functions", "fenced", "bare")

_HERMES = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_FUNCTIONS = re.compile(
    r"(?:^|[\s>])(?:to=)?functions\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?::|\(|\s)\s*", re.MULTILINE
)
_FENCE = re.compile(r"```(?:json|JSON|tool_call|tool)?\s*\n(?P<body>.*?)\n?\s*```", re.DOTALL)


@dataclass(frozen=True)
class TextCalls:
    calls: tuple[ToolCall, ...]
    dialect: str | None  # None: no call found


def _as_call(value: Any, tools: Collection[str], dialect: str, number: int) -> ToolCall | None:
    """One ``{"name", "arguments"}`` object (or its common variants) as a ToolCall."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {...}}
        value = value["function"]
    name = value.get("name") or value.get("tool") or value.get("tool_name")
    if not isinstance(name, str) or name not in tools:
        return None
    arguments = value.get("arguments", value.get("parameters", value.get("args", {})))
    if isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, dict):
        text = json.dumps(arguments, ensure_ascii=False)
    else:
        return None
    return ToolCall(id=f"text_{dialect}_{number}", name=name, arguments=text, dialect=dialect)


def _objects(text: str) -> list[Any]:
    """Every top-level JSON object or array in ``text``, read leniently, in order."""
    found: list[Any] = []
    index = 0
    while index < len(text):
        start = min((i for i in (text.find("{", index), text.find("[", index)) if i >= 0), default=-1)
        if start < 0:
            break
        end = balanced_end(text, start)
        if end is None:
            index = start + 1
            continue
        chunk = text[start:end]
        try:
            found.append(parse_json_object(chunk) if chunk.startswith("{") else json.loads(chunk, strict=False))
            index = end
        except (ValueError, json.JSONDecodeError):
            index = start + 1
    return found


def _calls_in(values: list[Any], tools: Collection[str], dialect: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            call = _as_call(item, tools, dialect, len(calls) + 1)
            if call is not None:
                calls.append(call)
    return calls


def read_text_calls(text: str | None, tools: Collection[str]) -> TextCalls:
    """The tool calls written in ``text``, in the first dialect that yields any."""
    if not text or not tools:
        return TextCalls((), None)
    hermes = [m["body"] for m in _HERMES.finditer(text)]
    if hermes:
        calls = _calls_in([v for body in hermes for v in _objects(body)], tools, "hermes")
        if calls:
            return TextCalls(tuple(calls), "hermes")
    functions: list[ToolCall] = []
    for match in _FUNCTIONS.finditer(text):
        name = match["name"]
        if name not in tools:
            continue
        start = match.end()
        if start < len(text) and text[start] == "{":
            end = balanced_end(text, start)
            if end is None:
                continue
            try:
                arguments = parse_json_object(text[start:end])
            except ValueError:
                continue
            functions.append(
                ToolCall(
                    id=f"text_functions_{len(functions) + 1}",
                    name=name,
                    arguments=json.dumps(arguments, ensure_ascii=False),
                    dialect="functions",
                )
            )
    if functions:
        return TextCalls(tuple(functions), "functions")
    fenced = [m["body"] for m in _FENCE.finditer(text)]
    if fenced:
        calls = _calls_in([v for body in fenced for v in _objects(body)], tools, "fenced")
        if calls:
            return TextCalls(tuple(calls), "fenced")
    calls = _calls_in(_objects(text), tools, "bare")
    return TextCalls(tuple(calls), "bare" if calls else None)
