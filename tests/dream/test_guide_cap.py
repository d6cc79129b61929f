"""prompts/dream.md is capped like nanobot's Dream prompt: 32,000 characters, with a note."""

from __future__ import annotations

from dream_helpers import Cli, make_workspace, sample_entries, use_server

from dream_memory.testing.llm_server import ScriptedLLMServer


def test_a_40000_character_guide_is_cut_at_32000_with_a_note(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A 40,000-character guide reaches the model as its first 32,000 characters and nanobot's
    "... (truncated)" marker, never the tail; the report says so."""
    guide = "KEEP DECISIONS.\n" + "x" * 31_984 + "TAIL-NEVER-SENT" + "y" * 7_985
    assert len(guide) == 40_000
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(1), files={"prompts/dream.md": guide})
    code, report = isolated.run_json("run")
    assert code == 0, report
    system = offline_server.completion_requests()[0].messages[0]["content"]
    assert system.startswith(guide[:32_000] + "\n... (truncated)")
    assert "TAIL-NEVER-SENT" not in system
    assert any("40000 characters; only the first 32000" in note for note in report["notes"])
