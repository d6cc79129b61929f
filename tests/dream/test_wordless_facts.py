"""Tagged lines with no word in them are no facts. SmolLM2 behind llama-cpp-python echoed the
prompt's tag list (`[SOUL] ,`, `[MEMORY] ,`, `[OBSERVATION] ) or`): the batch was committed
with status ok and exit 0, the cursor passed it, and the only change was the line
`- 2026-12-07: ) or` in observations.md."""

from __future__ import annotations

from typing import Any

from dream_helpers import Cli, make_workspace, use_preset

from dream_memory.core.facts import parse_facts
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

ECHOED = "[SOUL] ,\n[MEMORY] ,\n[OBSERVATION] ) or"


def notes_of(report: dict[str, Any]) -> str:
    return " ".join(report["batches"][0]["notes"])


def test_a_reply_of_wordless_tagged_lines_is_a_content_failure(isolated: Cli) -> None:
    """Wordless lines twice (the reply, then the corrective retry): the batch failed on its
    content (exit 1), the cursor stays, no memory file changed, and the notes count the lines."""
    with ScriptedLLMServer(responder=lambda r: Reply(ECHOED)) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, ["Switched the release checks to sha256"])
        before = {p: p.read_bytes() for p in isolated.workspace.rglob("*.md") if ".git" not in p.parts}
        code, report = isolated.run_json("run")
        assert code == 1 and report["status"] == "failed", report
        batch = report["batches"][0]
        assert batch["outcome"] == "failed" and "no tagged line with a word in it" in batch["error"]
        assert "content failure 1 of 3" in notes_of(report)
        assert notes_of(report).count("3 tagged line(s) with no word in them left out") == 2
        assert len(server.completion_requests()) == 2  # the reply and its one corrective retry
        assert report["cursor_after"] == 0
        after = {p: p.read_bytes() for p in isolated.workspace.rglob("*.md") if ".git" not in p.parts}
        assert after == before and not (isolated.workspace / "observations.md").exists()


def test_wordless_lines_beside_facts_are_dropped_and_counted(isolated: Cli) -> None:
    """A fact said in words lands; the wordless lines beside it are left out, counted and
    quoted in the notes."""
    with ScriptedLLMServer(responder=lambda r: Reply(ECHOED + "\n[MEMORY] Release checks use sha256")) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, ["Switched the release checks to sha256"])
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["outcome"] == "committed", report
        assert report["batches"][0]["facts"] == 1
        assert "Release checks use sha256" in (isolated.workspace / "memory/MEMORY.md").read_text()
        assert not (isolated.workspace / "observations.md").exists()
        assert "3 tagged line(s) with no word in them left out: '[SOUL] ,'" in notes_of(report)
        assert "'[OBSERVATION] ) or'" in notes_of(report)


def test_a_fact_with_any_word_or_number_is_kept() -> None:
    """Only lines with nothing said go: a number, a short word, a word after punctuation stay."""
    found = parse_facts("[MEMORY] 42\n[USER] ) or uses vi\n[SOUL] Ok\n[ENTITY] nix: ,\n[OBSERVATION] ...or")
    assert [f.text for f in found.facts] == ["42", ") or uses vi", "Ok"]
    assert found.wordless == ("[OBSERVATION] ...or",)
    assert any("nix" in line for line in found.rejected)
