"""A memory file larger than ``fileContextTokens`` reaches the model as its outline plus the
sections relevant to the batch. The words picked from a batch are no search a user typed: a
batch of digests, or facts with no word long enough to look for, once failed the run with exit 2
("the search query is longer than 1000 characters", "the search query is empty"), the batch
recorded with no tokens though the model was paid, and every later run failed the same way
(found with SmolLM2 behind llama-cpp-python)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_helpers import Cli, dream_in_process, make_workspace, use_preset

from dream_memory.core.chat import ChatReply, Message, ToolSpec, Usage
from dream_memory.errors import InputError
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

DIGESTS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(17)]
RELEASES = "## Releases\n\n- The release of 2026-03 was checked against " + DIGESTS[3] + "\n"
# Well over 200 tokens: shown as outline and sections, the releases section among them.
BIG_MEMORY = (
    "# Memory\n\n"
    + "".join(
        f"## Topic {n}\n\n" + "".join(f"- Filler line {n}.{i} about topic {n}\n" for i in range(8)) for n in range(6)
    )
    + RELEASES
)


def prompt_of(request: Any) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.messages)


def test_a_batch_of_digests_shows_the_sections_that_hold_them(isolated: Cli) -> None:
    """One entry holding 17 sha256 digests: the batch is dreamt (exit 0, committed), and the
    analysis prompt shows the outline and the section naming one of the digests."""
    with ScriptedLLMServer(responder=lambda r: Reply("[MEMORY] Release artifacts are checked by sha256")) as server:
        use_preset(isolated, server, dream={"fileContextTokens": 200}, editProtocol="facts")
        entry = "Release artifacts verified, sha256 digests: " + " ".join(f"{d} ({d})" for d in DIGESTS)
        make_workspace(isolated, [entry], files={"memory/MEMORY.md": BIG_MEMORY})
        code, report = isolated.run_json("run")
        assert code == 0 and report["status"] == "ok", report
        assert report["batches"][0]["outcome"] == "committed"
        prompt = prompt_of(server.completion_requests()[0])
        assert "Outline of memory/MEMORY.md:" in prompt and RELEASES.strip() in prompt
        assert "Release artifacts are checked by sha256" in (isolated.workspace / "memory/MEMORY.md").read_text()


def test_a_batch_with_no_word_to_look_for_shows_the_outline_alone(isolated: Cli) -> None:
    """History "ok" and the fact "Is 42" hold no word to look for: both prompts show the large
    file's outline with no relevant section, and the batch lands its edit (exit 0)."""
    edit = tool_call(
        "edit_file", path="memory/MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n- Is 42\n", facts=[1]
    )

    def respond(request: dict[str, Any]) -> Reply:
        if not request.get("tools"):
            return Reply("[MEMORY] Is 42")
        done = any(m.get("role") == "tool" for m in request.get("messages", []))
        return Reply("Done.") if done else Reply(tool_calls=[edit])

    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, dream={"fileContextTokens": 200}, editProtocol="tools")
        make_workspace(isolated, ["ok"], files={"memory/MEMORY.md": BIG_MEMORY})
        code, report = isolated.run_json("run")
        assert code == 0 and report["status"] == "ok", report
        assert report["batches"][0]["outcome"] == "committed"
        assert "- Is 42" in (isolated.workspace / "memory/MEMORY.md").read_text()
        analysis, edits = server.completion_requests()[0], server.completion_requests()[1]
        for request in (analysis, edits):
            prompt = prompt_of(request)
            assert "Outline of memory/MEMORY.md:" in prompt and "Relevant sections:" not in prompt
            assert "Filler line 0.0" not in prompt


class _RefusingModel:
    """A model whose second call raises an InputError (something in the batch the code could
    not use), after a first call that was paid for."""

    name = "refusing"

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        self.calls += 1
        if self.calls == 1:
            return ChatReply("[MEMORY] Uses dulwich for commits", usage=Usage(100, 20, 0.0, 1))
        raise InputError("the search query is empty")


def test_an_input_error_inside_a_batch_fails_the_batch_not_the_run_setup(tmp_path: Path) -> None:
    """Whatever inside a batch raises an InputError, the batch failed (exit 1, never the exit 2
    a user must fix their setup for), with the tokens it spent and the error named."""
    root = build_workspace(tmp_path / "ws", history=["Switched the commits to dulwich"])
    report = dream_in_process(root, _RefusingModel())
    assert report.status == "failed" and report.exit_code == 1
    batch = report.batches[0]
    assert batch.outcome == "failed" and "the search query is empty" in (batch.error or "")
    assert batch.usage.total_tokens == 120 and batch.usage.calls == 1
    assert any("the search query is empty" in e for e in report.errors)


def test_an_input_error_inside_a_batch_counts_toward_setting_it_aside(tmp_path: Path) -> None:
    """The same entries raise the same error on every run: the third failing run sets the batch
    aside, as for a reply that cannot be used, instead of failing every run for good."""
    root = build_workspace(tmp_path / "ws", history=["Switched the commits to dulwich"])
    outcomes = [dream_in_process(root, _RefusingModel()) for _ in range(3)]
    assert [r.batches[0].outcome for r in outcomes] == ["failed", "failed", "set_aside"]
    assert outcomes[2].exit_code == 0 and outcomes[2].set_aside
