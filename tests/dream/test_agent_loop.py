"""The phase-2 tool loop's bounds, against an in-process scripted model (a fake, not a mock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.core.agent_loop import run_agent_loop
from dream_memory.core.chat import ChatReply, Message, ToolCall, ToolSpec
from dream_memory.core.prompts import dream_tools
from dream_memory.testing import build_workspace


class ScriptedModel:
    """Answers from a list of replies; records what it was sent."""

    def __init__(self, replies: Sequence[ChatReply]) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []

    @property
    def name(self) -> str:
        return "scripted"

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        self.seen.append([dict(m) for m in messages])
        return self.replies.pop(0) if self.replies else ChatReply(content="done")


def call(name: str, n: int, **args: object) -> ToolCall:
    return ToolCall(id=f"c{n}", name=name, arguments=json.dumps(args))


def staging(tmp_path: Path) -> StagingWorkspace:
    root = build_workspace(tmp_path / "ws", files={"USER.md": "# User\n\n- a\n- b\n- a\n"})
    return StagingWorkspace(root, count_tokens=lambda t: len(t) // 4, file_budget_tokens=1000)


def tool_results(messages: list[Message]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def test_refusals_come_back_as_error_results(tmp_path: Path) -> None:
    """Traversal, history, ambiguous and no-op edits are four error results; nothing is staged."""
    work = staging(tmp_path)
    model = ScriptedModel(
        [
            ChatReply(
                None,
                (
                    call("write_file", 1, path="../../etc/passwd", content="x"),
                    call("edit_file", 2, path="memory/history.jsonl", old_text="", new_text="x"),
                    call("edit_file", 3, path="USER.md", old_text="- a", new_text="- c"),
                    call("edit_file", 4, path="USER.md", old_text="- b", new_text="- b"),
                ),
            ),
            ChatReply("I give up."),
        ]
    )
    messages: list[Message] = [{"role": "user", "content": "apply"}]
    result = run_agent_loop(model, messages, dream_tools(), work, max_tool_calls=10)
    results = tool_results(messages)
    assert len(results) == 4 and all(r.startswith("Error:") for r in results)
    assert "leaves the workspace" in results[0]
    assert "not a memory file" in results[1]
    assert "appears 2 times" in results[2]
    assert "no-op" in results[3]
    assert result.edits_rejected == 4 and result.edits_applied == 0
    assert work.changes() == {}


def test_a_model_looping_on_read_file_stops_at_the_cap(tmp_path: Path) -> None:
    """A model that keeps reading is stopped after max_tool_calls, with the cap as the reason."""
    replies = [ChatReply(None, (call("read_file", i, path="USER.md", section=f"s{i}"),)) for i in range(50)]
    model = ScriptedModel(replies)
    result = run_agent_loop(
        model, [{"role": "user", "content": "go"}], dream_tools(), staging(tmp_path), max_tool_calls=5
    )
    assert result.stop == "cap"
    assert result.tool_calls == 5
    assert len(model.seen) == 6  # five executed calls, the sixth reply is refused


def test_the_same_call_a_third_time_ends_the_loop(tmp_path: Path) -> None:
    """Repeating an identical call three times is a loop, even under the cap."""
    replies = [ChatReply(None, (call("read_file", i, path="USER.md"),)) for i in range(10)]
    result = run_agent_loop(
        ScriptedModel(replies), [{"role": "user", "content": "go"}], dream_tools(), staging(tmp_path), max_tool_calls=10
    )
    assert result.stop == "repeat"
    assert result.tool_calls == 2


def test_valid_edits_are_staged_not_written(tmp_path: Path) -> None:
    """An accepted edit changes the staging copy only; the file on disk is untouched until commit."""
    work = staging(tmp_path)
    model = ScriptedModel(
        [
            ChatReply(None, (call("edit_file", 1, path="USER.md", old_text="- b\n", new_text="- b\n- new fact\n"),)),
            ChatReply("Done."),
        ]
    )
    result = run_agent_loop(model, [{"role": "user", "content": "go"}], dream_tools(), work, max_tool_calls=10)
    assert result.stop == "done" and result.edits_applied == 1
    assert "- new fact" in work.changes()["USER.md"][1]
    assert "- new fact" not in (work.root / "USER.md").read_text()


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    """A memory path that is a symlink pointing outside the workspace is never read or written."""
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    work = staging(tmp_path)
    (work.root / "entities").mkdir()
    (work.root / "entities" / "evil.md").symlink_to(outside)
    outcome = work.execute("read_file", {"path": "entities/evil.md"})
    assert not outcome.ok and "symbolic link" in outcome.text
    outcome = work.execute("edit_file", {"path": "entities/evil.md", "old_text": "secret", "new_text": "x"})
    assert not outcome.ok
    assert outside.read_text() == "secret\n"
