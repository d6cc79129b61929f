"""Values exchanged with a chat model, and the rule for when a reply counts as content.

Messages use the OpenAI chat-completions shape (plain dicts), because that is what every adapter
speaks on the wire and what the scripted test server records.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from dream_memory.errors import BadReply

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model sent it

    dialect: str = "native"  # how the call reached us: native tool_calls, or a text dialect

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict, read leniently; raises ValueError with a message for the model."""
        return parse_json_object(self.arguments or "{}")

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def balanced_end(text: str, start: int) -> int | None:
    """The index just past the JSON object or array opening at ``text[start]``, or None when it
    never closes (strings and escapes respected, so a brace inside a string does not count)."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def parse_json_object(text: str) -> dict[str, Any]:
    """A JSON object as small models write it: strict JSON first, then raw control characters
    inside strings (``strict=False``), then a code fence around it, then json-repair for a
    trailing comma or a stray quote. An object that never closes is refused rather than
    completed: a cut-off edit must not be applied as if it were whole.
    """
    try:
        return _parse_json_object(text)
    except RecursionError:
        # Python's parsers recurse per nesting level: input thousands deep is malformed, not a crash.
        raise ValueError("arguments are not valid JSON (nested too deeply to be read)") from None


def _parse_json_object(text: str) -> dict[str, Any]:
    raw = text.strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced["body"].strip()
    value: Any = None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as strict_error:
        try:
            value = json.loads(raw, strict=False)
        except json.JSONDecodeError:
            if not raw.startswith("{") or balanced_end(raw, 0) is None:
                raise ValueError(
                    f"arguments are not valid JSON ({strict_error.msg} at char {strict_error.pos})"
                ) from strict_error
            # Imported here: json-repair costs a quarter of a second to import and is rarely needed.
            import json_repair

            value = json_repair.loads(raw, skip_json_loads=True)
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


@dataclass(frozen=True)
class Usage:
    """Token and cost counts. ``cost_usd`` is None when any contributing call had no known price."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=cost,
            calls=self.calls + other.calls,
        )

    def to_report(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "llm_calls": self.calls,
        }


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = "stop"
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


# Providers and proxies that swallow an exception sometimes hand back its text as the answer.
# Such text must never become memory. The patterns are deliberately narrow: they match replies
# that *start* like an error report, not replies that mention errors.
_ERROR_TEXT = re.compile(
    r"""^\s*(?:
        (?:error|exception|traceback)\b[\s:(]
      | \{\s*"error"\s*:
      | (?:litellm|openai|anthropic)\.\w*(?:error|exception)
      | (?:rate\s+limit|quota)\s+exceeded
      | internal\s+server\s+error
      | (?:401|403|429|500|502|503|504)\s+(?:unauthorized|forbidden|too\s+many|internal|bad\s+gateway|service)
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def looks_like_error_text(text: str) -> bool:
    return bool(_ERROR_TEXT.match(text))


def check_reply(reply: ChatReply, *, tools_offered: bool) -> ChatReply:
    """Return the reply if it is usable content, else raise BadReply saying why.

    A reply cut off by the length limit, empty, carrying tool calls where none were offered, or
    reading like an error report is a failure, never content (a predecessor once stored an
    error string as memory).
    """
    if reply.finish_reason == "length":
        raise BadReply("the reply was cut off by the token limit", hint="raise maxTokens")
    if reply.tool_calls and not tools_offered:
        raise BadReply("the reply carries tool calls although no tools were offered")
    text = (reply.content or "").strip()
    if not reply.tool_calls and not text:
        raise BadReply("the reply is empty")
    if text and not reply.tool_calls and looks_like_error_text(text):
        raise BadReply("the reply reads like an error report, not an answer")
    return reply
