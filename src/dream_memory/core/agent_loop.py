"""Phase 2: the tool loop, run against the ChatModel port and a tool executor.

Bounded by construction (LESSONS: a weak model once looped read_file/no-op edits for 23 minutes
and >10M tokens): at most ``max_tool_calls`` calls, the same call made a third time ends the
loop, and every reply is judged by ``check_reply``. A tool's failure is a result the model reads,
never an exception here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from dream_memory.core import jsontext
from dream_memory.core.chat import Message, ToolCall, ToolSpec, Usage, check_reply
from dream_memory.core.ports import ChatModel

StopReason = Literal["done", "cap", "repeat"]
REPEAT_LIMIT = 3


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    text: str
    changed: bool = False  # an edit or write that changed the staging copy


class ToolExecutor(Protocol):
    def execute(self, name: str, arguments: dict[str, object]) -> ToolOutcome: ...


@dataclass
class LoopResult:
    stop: StopReason = "done"
    tool_calls: int = 0
    edits_applied: int = 0
    edits_rejected: int = 0
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    final_text: str = ""

    @property
    def edit_attempts(self) -> int:
        return self.edits_applied + self.edits_rejected


_EDIT_TOOLS = frozenset({"edit_file", "write_file"})


def _call_key(call: ToolCall) -> str:
    try:
        args = json.dumps(jsontext.loads(call.arguments or "{}"), sort_keys=True)
    except json.JSONDecodeError:
        args = call.arguments
    return f"{call.name}:{args}"


def _tool_message(call: ToolCall, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}


def run_agent_loop(
    model: ChatModel,
    messages: list[Message],
    tools: Sequence[ToolSpec],
    executor: ToolExecutor,
    *,
    max_tool_calls: int,
) -> LoopResult:
    """Call the model until it answers without tool calls, or a bound stops it.

    ``messages`` is extended in place with the transcript. ModelError (transport) and BadReply
    (content) propagate to the caller, which decides what they mean for the batch.
    """
    result = LoopResult()
    allowed = {t.name for t in tools}
    seen: dict[str, int] = {}
    while True:
        reply = model.complete(messages, tools=tools, purpose="dream.phase2")
        result.usage = result.usage + reply.usage
        check_reply(reply, tools_offered=True)
        assistant: Message = {"role": "assistant", "content": reply.content or ""}
        if reply.tool_calls:
            assistant["tool_calls"] = [c.to_message() for c in reply.tool_calls]
        messages.append(assistant)
        if not reply.tool_calls:
            result.final_text = (reply.content or "").strip()
            return result
        stop: StopReason | None = None
        for call in reply.tool_calls:
            if stop is not None:
                messages.append(_tool_message(call, "Not run: the loop has ended."))
                continue
            if result.tool_calls >= max_tool_calls:
                stop = "cap"
                messages.append(_tool_message(call, f"Not run: the limit of {max_tool_calls} tool calls is reached."))
                continue
            key = _call_key(call)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] >= REPEAT_LIMIT:
                stop = "repeat"
                messages.append(_tool_message(call, "Not run: this exact call was already made twice."))
                continue
            result.tool_calls += 1
            outcome = _execute(call, allowed, executor)
            if call.name in _EDIT_TOOLS:
                if outcome.ok and outcome.changed:
                    result.edits_applied += 1
                else:
                    result.edits_rejected += 1
            if not outcome.ok:
                result.errors.append(f"{call.name}: {outcome.text}")
            messages.append(_tool_message(call, outcome.text if outcome.ok else f"Error: {outcome.text}"))
        if stop is not None:
            result.stop = stop
            return result


def _execute(call: ToolCall, allowed: set[str], executor: ToolExecutor) -> ToolOutcome:
    if call.name not in allowed:
        return ToolOutcome(False, f"unknown tool {call.name!r}; available: {', '.join(sorted(allowed))}")
    try:
        arguments = call.parsed_arguments()
    except ValueError as exc:
        return ToolOutcome(False, f"{exc}; send the arguments as a JSON object")
    return executor.execute(call.name, arguments)
