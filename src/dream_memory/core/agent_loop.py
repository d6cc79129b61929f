"""Phase 2: the edit loops, run against the ChatModel port and a tool executor.

Three ways to get a batch's facts into the files (the preset's ``editProtocol``):

- ``run_agent_loop``: function calling. Calls a server returned as text in a known dialect
  (``core.dialects``) are executed exactly like native ones and counted by dialect.
- ``run_text_loop``: SEARCH/REPLACE blocks in plain text, for models or servers without
  function calling; the same executor, the same rules, the same errors fed back.
- ``place_with_rules``: no model at all; the deterministic placement rules
  (``core.placement``) file the facts, through the same executor.

Bounded by construction (a weak model once looped read_file/no-op edits for 23 minutes and
>10M tokens): at most ``max_tool_calls`` calls, the same call made a third time ends the
loop, and every reply is judged by ``check_reply``. A tool's failure is a result the model reads,
never an exception here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from dream_memory.core import jsontext, policy
from dream_memory.core.bounded import split_lines
from dream_memory.core.chat import Message, ToolCall, ToolSpec, Usage, check_reply
from dream_memory.core.dialects import read_text_calls
from dream_memory.core.edits import EditBlock, minimal_edit, parse_edit_blocks, whole_file_problem
from dream_memory.core.facts import Fact
from dream_memory.core.placement import place_facts
from dream_memory.core.ports import ChatModel
from dream_memory.core.write_policy import pinned_section_in
from dream_memory.errors import DreamError

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
    dialects: dict[str, int] = field(default_factory=dict)  # tool calls by how they arrived
    replies: list[str] = field(default_factory=list)  # the model's text replies, for reports
    tool_less: bool = False  # the first reply carried no call in any form

    def count(self, dialect: str) -> None:
        self.dialects[dialect] = self.dialects.get(dialect, 0) + 1


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
    calls_run = _Calls(result, {t.name for t in tools}, executor, max_tool_calls, messages)
    allowed = calls_run.allowed
    first = True
    while True:
        reply = model.complete(messages, tools=tools, purpose="dream.phase2")
        result.usage = result.usage + reply.usage
        check_reply(reply, tools_offered=True)
        calls = reply.tool_calls
        content = reply.content or ""
        if content.strip():
            result.replies.append(content)
        if not calls:
            # A server that does not turn the model's calls into tool_calls hands them back as
            # text; they are the model's calls all the same.
            calls = read_text_calls(content, allowed).calls
            if calls:
                content = ""
        assistant: Message = {"role": "assistant", "content": content}
        if calls:
            assistant["tool_calls"] = [c.to_message() for c in calls]
        messages.append(assistant)
        if not calls:
            result.tool_less = result.tool_less or first
            return result
        first = False
        stop = calls_run.run(calls)
        if stop is not None:
            result.stop = stop
            return result


@dataclass
class _Calls:
    """Running one reply's tool calls: each one counted, bounded and answered in ``messages``."""

    result: LoopResult
    allowed: set[str]
    executor: ToolExecutor
    max_tool_calls: int
    messages: list[Message]
    seen: dict[str, int] = field(default_factory=dict)

    def run(self, calls: Sequence[ToolCall]) -> StopReason | None:
        """Run the calls in order; the reason the loop stops, or None to ask the model again."""
        stop: StopReason | None = None
        for call in calls:
            if stop is not None:
                self.messages.append(_tool_message(call, "Not run: the loop has ended."))
                continue
            stop = self._bounded(call)
            if stop is None:
                self._run(call)
        return stop

    def _bounded(self, call: ToolCall) -> StopReason | None:
        """Answer a call the bounds refuse (and say which bound), or None when it may run."""
        if self.result.tool_calls >= self.max_tool_calls:
            self.messages.append(
                _tool_message(call, f"Not run: the limit of {self.max_tool_calls} tool calls is reached.")
            )
            return "cap"
        key = _call_key(call)
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] >= REPEAT_LIMIT:
            self.messages.append(_tool_message(call, "Not run: this exact call was already made twice."))
            return "repeat"
        return None

    def _run(self, call: ToolCall) -> None:
        result = self.result
        result.tool_calls += 1
        result.count(call.dialect)
        outcome = _execute(call, self.allowed, self.executor)
        if call.name in _EDIT_TOOLS:
            if outcome.ok and outcome.changed:
                result.edits_applied += 1
            else:
                result.edits_rejected += 1
        if not outcome.ok:
            result.errors.append(f"{call.name}: {outcome.text}")
        self.messages.append(_tool_message(call, outcome.text if outcome.ok else f"Error: {outcome.text}"))


def _execute(call: ToolCall, allowed: set[str], executor: ToolExecutor) -> ToolOutcome:
    if call.name not in allowed:
        return ToolOutcome(False, f"unknown tool {call.name!r}; available: {', '.join(sorted(allowed))}")
    try:
        arguments = call.parsed_arguments()
    except ValueError as exc:
        return ToolOutcome(False, f"{exc}; send the arguments as a JSON object")
    return executor.execute(call.name, arguments)


_EDIT_NAMES = ("edit_file", "write_file")


class TargetedExecutor:
    """Lets edits reach only the files this batch's facts go to; reads pass through.

    A weak model once edited a file it was never shown (the template's intro line of another
    file, the line a "closest lines" hint pointed at). The refusal names the file to use.
    """

    def __init__(self, inner: ToolExecutor, targets: Collection[str], hint: Callable[[str], str]) -> None:
        self.inner = inner
        self.targets = tuple(dict.fromkeys(targets))
        self.hint = hint

    def execute(self, name: str, arguments: dict[str, object]) -> ToolOutcome:
        if name in _EDIT_NAMES:
            try:
                path = policy.check_writable(arguments.get("path"))
            except DreamError:
                path = None  # not a memory file at all: the inner executor says what is wrong with it
            if path is not None and path not in self.targets:
                return ToolOutcome(False, f"{path} is not a file this batch's facts go to. {self.hint(path)}")
        return self.inner.execute(name, arguments)


class ScopedExecutor:
    """Confines a batch's tools to its scope (core.scopes): reads to the files it may see, edits
    to its own files. A refused edit is a result the model reads (where the fact may go); each
    one is kept in ``refused`` (the report counts them), and the rest of the batch goes on."""

    def __init__(self, inner: ToolExecutor, scope: str) -> None:
        self.inner = inner
        self.scope = scope
        self.refused: list[str] = []  # the paths of refused cross-scope edits, in order

    def execute(self, name: str, arguments: dict[str, object]) -> ToolOutcome:
        check = policy.check_writable if name in _EDIT_NAMES else policy.check_readable
        try:
            check(arguments.get("path"), self.scope)
        except policy.ScopeDenied as exc:
            if name in _EDIT_NAMES:
                self.refused.append(policy.normalize(arguments.get("path")))
            return ToolOutcome(False, exc.message)
        except DreamError:
            pass  # not a memory file at all: the inner executor says what is wrong with it
        return self.inner.execute(name, arguments)


def run_text_loop(
    model: ChatModel,
    messages: list[Message],
    executor: ToolExecutor,
    *,
    max_edits: int,
    default_path: str | None = None,
    read: Callable[[str], str | None] | None = None,
    refuse: Collection[str] = (),
) -> LoopResult:
    """Phase 2 without function calling: the model writes SEARCH/REPLACE blocks, each applied as
    an ``edit_file`` (an empty SEARCH creates the file) through ``executor``; the results go back
    as one message and the model corrects the failed blocks. Ends on a reply with no block, when
    every block of a reply applied, at ``max_edits`` blocks, or when a block is sent a third time.
    """
    result = LoopResult()
    seen: dict[str, int] = {}
    first = True
    while True:
        reply = model.complete(messages, purpose="dream.phase2.text")
        result.usage = result.usage + reply.usage
        check_reply(reply, tools_offered=False)
        text = reply.content or ""
        result.replies.append(text)
        messages.append({"role": "assistant", "content": text})
        blocks, problems = parse_edit_blocks(text, default_path)
        if not blocks and not problems:
            result.tool_less = result.tool_less or first
            return result
        first = False
        lines: list[str] = []
        failed = bool(problems)
        for number, block in enumerate(blocks, start=1):
            where = f"{number}. {block.path}"
            if result.tool_calls >= max_edits:
                result.stop = "cap"
                lines.append(f"{where}: not applied: the limit of {max_edits} edits is reached")
                continue
            key = f"{block.path}\0{block.search}\0{block.replace}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] >= REPEAT_LIMIT:
                result.stop = "repeat"
                lines.append(f"{where}: not applied: this exact block was already sent twice")
                continue
            result.tool_calls += 1
            result.count("whole" if block.whole else "text")
            copied = [line for line in split_lines(block.replace) if line.strip() and line.strip() in refuse]
            if copied:
                outcome = ToolOutcome(False, f"{copied[0].strip()!r} is the prompt's example: write the facts instead")
            else:
                outcome = _apply_block(block, executor, read)
            if outcome.ok and outcome.changed:
                result.edits_applied += 1
                lines.append(f"{where}: applied ({outcome.text})")
            else:
                result.edits_rejected += 1
                failed = True
                result.errors.append(f"{block.path}: {outcome.text}")
                lines.append(f"{where}: Error: {outcome.text}")
        lines += [f"Error: {problem}" for problem in problems]
        result.errors += problems
        if result.stop != "done" or not failed:
            return result
        messages.append(
            {
                "role": "user",
                "content": "Results:\n" + "\n".join(lines) + "\n\nSend corrected SEARCH/REPLACE blocks for the "
                "failed ones only, or answer DONE.",
            }
        )


def _apply_block(block: EditBlock, executor: ToolExecutor, read: Callable[[str], str | None] | None) -> ToolOutcome:
    if not block.whole:
        return executor.execute("edit_file", {"path": block.path, "old_text": block.search, "new_text": block.replace})
    try:
        current = read(policy.normalize(block.path)) if read is not None else None
    except DreamError as exc:
        return ToolOutcome(False, exc.message)
    if current is None:
        return executor.execute("edit_file", {"path": block.path, "old_text": "", "new_text": block.replace})
    problem = whole_file_problem(current, block.replace)
    if problem is not None:
        return ToolOutcome(False, problem)
    return executor.execute("edit_file", {"path": block.path, "old_text": current, "new_text": block.replace})


def place_with_rules(
    facts: Sequence[Fact], executor: ToolExecutor, read: Callable[[str], str | None], today: str
) -> LoopResult:
    """Phase 2 with no model: the placement rules decide each file's new text, and each change
    goes through ``executor`` as the edit a model would have made (same policy, same guards)."""
    result = LoopResult()
    avoid: dict[str, set[str]] = {}
    todo = list(facts)
    while todo:
        refused: set[str] = set()
        for path, (before, after) in place_facts(todo, read, today, avoid).items():
            if before is None:
                name, arguments = "write_file", {"path": path, "content": after}
            else:
                old_text, new_text = minimal_edit(before, after)
                name, arguments = "edit_file", {"path": path, "old_text": old_text, "new_text": new_text}
            result.tool_calls += 1
            result.count("rules")
            outcome = executor.execute(name, dict(arguments))
            if outcome.ok and outcome.changed:
                result.edits_applied += 1
                continue
            result.edits_rejected += 1
            result.errors.append(f"{name}: {outcome.text}")
            pinned = pinned_section_in(outcome.text)
            if pinned and pinned[0] == path and pinned[1] not in avoid.get(path, set()):
                # A pinned section: the file's facts go again, each under the next fitting section.
                avoid.setdefault(path, set()).add(pinned[1])
                refused.add(path)
        todo = [f for f in todo if f.target in refused]
    return result
