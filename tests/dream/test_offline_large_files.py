"""The offline engine on a memory file too large for the prompt: it files the batch into the
sections the prompt already shows (no read_file round for them), and still reads the last
section when a fact needs a heading the file lacks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from dream_helpers import dream_in_process

from dream_memory.adapters.offline import OfflineModel
from dream_memory.core.chat import ChatReply, Message, ToolCall, ToolSpec
from dream_memory.core.markdown import find_section
from dream_memory.testing import build_workspace


class _Recording:
    def __init__(self) -> None:
        self.inner = OfflineModel()
        self.calls: list[ToolCall] = []

    @property
    def name(self) -> str:
        return "offline-recorded"

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        reply = self.inner.complete(messages, tools=tools, purpose=purpose)
        self.calls += reply.tool_calls
        return reply


def _large_memory() -> str:
    core = "# Memory\n\n## Decisions\n\n- Use PostgreSQL.\n\n## Solutions\n\n- Restart fixes it.\n\n"
    archive = "".join(
        f"## Archive topic {i}\n\n" + "".join(f"- old note {i}.{j} on part {i}\n" for j in range(20)) + "\n"
        for i in range(300)
    )
    return core + archive


def _dream(tmp_path: Path, history: list[str]) -> tuple[str, list[ToolCall]]:
    root = build_workspace(tmp_path / "ws", history=history, files={"memory/MEMORY.md": _large_memory()})
    model = _Recording()
    report = dream_in_process(root, model)
    assert report.status == "ok", report.to_json()
    return (root / "memory" / "MEMORY.md").read_text(), model.calls


def test_sections_shown_in_the_prompt_are_edited_without_reading_them(tmp_path: Path) -> None:
    after, calls = _dream(
        tmp_path,
        ["- Decisions: service 1 talks to the queue.", "- Solutions: timeout 2 was fixed by a larger pool."],
    )
    decisions, solutions = find_section(after, "Decisions"), find_section(after, "Solutions")
    assert decisions is not None and "service 1 talks to the queue" in decisions.text.lower()
    assert solutions is not None and "timeout 2 was fixed" in solutions.text.lower()
    assert "Archive topic 299" in after and "- old note 150.7 on part 150" in after  # nothing else lost
    assert [c.name for c in calls if c.name == "read_file"] == []
    edits = [json.loads(c.arguments) for c in calls if c.name == "edit_file"]
    assert edits and all(len(e["old_text"]) < 200 for e in edits)


def test_a_fact_without_its_section_still_reads_the_last_section(tmp_path: Path) -> None:
    after, calls = _dream(tmp_path, ["- Environment: worker 3 runs Python 3.12."])
    assert "worker 3 runs python 3.12" in after.lower()
    assert "Archive topic 299" in after
    reads = [json.loads(c.arguments) for c in calls if c.name == "read_file"]
    assert any(r.get("section") == "Archive topic 299" for r in reads), reads
