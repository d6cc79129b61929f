"""The script a ScriptedLLMServer answers from: its steps (``Reply``, ``Fail``, ``Hang``, ``Garbage``,
``Drop``, ``Trickle``), a script file's JSON form, and a ChatModel bridged into a responder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dream_memory.core.ports import ChatModel

# --- the script ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call in a reply. ``arguments`` is sent as-is (it may be invalid JSON on purpose);
    ``id`` defaults to ``call_<request>_<index>``."""

    name: str
    arguments: str = "{}"
    id: str | None = None


def tool_call(name: str, *, call_id: str | None = None, **arguments: Any) -> ScriptedToolCall:
    """``tool_call("edit_file", path="USER.md", old_text="a", new_text="b")``."""
    return ScriptedToolCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False), id=call_id)


@dataclass(frozen=True)
class Reply:
    """A normal completion. ``finish_reason`` None means "tool_calls" when there are tool calls,
    else "stop". ``usage`` None means a rough count (bytes / 4) of the request and the reply."""

    content: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None
    model: str | None = None  # the "model" field of the answer; default: the requested model


@dataclass(frozen=True)
class Fail:
    """An HTTP error with an OpenAI-shaped error body (``{"error": {"message", "type", "code"}}``)."""

    status: int = 500
    message: str = "scripted failure"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering with ``then``, or before dropping the connection."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Garbage:
    """A body that is not a chat completion: ``str`` or ``bytes`` sent as-is."""

    body: str | bytes = "this is not JSON"
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Drop:
    """Close the connection without sending anything."""


@dataclass(frozen=True)
class Trickle:
    """Answer with ``then`` (a Reply), but send its body one byte every ``interval`` seconds: each
    read gets data before a per-read timeout, so only a bound on the whole request ends it."""

    then: Reply
    interval: float = 1.0


Step = Reply | Fail | Hang | Garbage | Drop | Trickle
Responder = Callable[[dict[str, Any]], Step | None]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def step_from_json(data: Any) -> Step:
    """One step of a ``--script`` file (see the module docstring for the shapes)."""
    if isinstance(data, str):
        return Reply(content=data)
    if not isinstance(data, dict):
        raise ValueError(f"a step must be a JSON object, not {type(data).__name__}")
    if "reply" in data:
        body = data["reply"]
        if isinstance(body, str) or body is None:
            return Reply(content=body)
        calls = []
        for raw in body.get("tool_calls") or []:
            args = raw.get("arguments", {})
            calls.append(
                ScriptedToolCall(
                    name=raw["name"],
                    arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                    id=raw.get("id"),
                )
            )
        return Reply(
            content=body.get("content"),
            tool_calls=tuple(calls),
            finish_reason=body.get("finish_reason"),
            usage=body.get("usage"),
            model=body.get("model"),
        )
    if "fail" in data:
        return Fail(
            status=int(data["fail"]),
            message=str(data.get("message", "scripted failure")),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
        )
    if "hang" in data:
        then = data.get("then")
        return Hang(seconds=float(data["hang"]), then=None if then is None else step_from_json(then))
    if "garbage" in data:
        return Garbage(body=str(data["garbage"]), status=int(data.get("status", 200)))
    if data.get("drop"):
        return Drop()
    if "trickle" in data:
        then = step_from_json(data.get("then", {"reply": "late"}))
        if not isinstance(then, Reply):
            raise ValueError("a trickle step's 'then' must be a reply")
        return Trickle(then=then, interval=float(data["trickle"]))
    raise ValueError(f"unknown step {sorted(data)}: expected one of reply, fail, hang, garbage, drop, trickle")


def load_script(path: str | os.PathLike[str]) -> list[Step]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a JSON list of steps")
    return [step_from_json(item) for item in data]


# --- bridging a ChatModel ------------------------------------------------------------------------

# A model that declines to answer (BadReply) becomes 422: like a content failure, clients do not retry it.
_STATUS_FOR_KIND = {"auth": 401, "rate_limit": 429, "bad_request": 400, "bad_reply": 422, "timeout": 504}


def from_chat_model(model: ChatModel) -> Responder:
    """A responder answering each request through ``model.complete`` (the offline engine, say).

    The request's messages and tools go to the model as they came over the wire; its ChatReply
    goes back as a completion. A ModelError becomes the matching HTTP error.
    """
    from dream_memory.core.chat import ToolSpec
    from dream_memory.errors import ModelError

    def respond(request: dict[str, Any]) -> Step:
        tools = [
            ToolSpec(
                name=t["function"]["name"],
                description=t["function"].get("description", ""),
                parameters=t["function"].get("parameters", {}),
            )
            for t in request.get("tools") or []
            if t.get("type", "function") == "function"
        ]
        try:
            reply = model.complete(request.get("messages") or [], tools=tools or None)
        except ModelError as exc:
            return Fail(_STATUS_FOR_KIND.get(exc.kind, 500), exc.message)
        usage = None
        if reply.usage.prompt_tokens or reply.usage.completion_tokens:
            usage = {"prompt_tokens": reply.usage.prompt_tokens, "completion_tokens": reply.usage.completion_tokens}
        return Reply(
            content=reply.content,
            tool_calls=tuple(ScriptedToolCall(c.name, c.arguments, c.id) for c in reply.tool_calls),
            finish_reason=reply.finish_reason,
            usage=usage,
        )

    return respond
