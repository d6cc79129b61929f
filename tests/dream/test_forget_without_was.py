"""A request to forget starts "Forget:" and names the line (docs/reference/llm-protocol.md).
Phase 1 wrote `[MEMORY] Forget: User's preferred editor is vim` with no "(was ...)", and the
placement rules filed it as the memory line "- Forget: User's preferred editor is vim", the vim
line kept and no note saying so."""

from __future__ import annotations

from dream_helpers import Cli, make_workspace, use_preset

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

MEMORY = "# Memory\n\n## Preferences\n\n- User's preferred editor is vim\n- Uses tmux\n"


def test_a_forget_naming_a_line_removes_it_and_is_never_written_down(isolated: Cli) -> None:
    """The named line's removal is held for review like any removal of a line a person wrote;
    no "Forget:" line lands, and accepting removes the vim line alone."""
    fact = "[MEMORY] Forget: User's preferred editor is vim [from 1]"
    with ScriptedLLMServer(responder=lambda r: Reply(fact)) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, ["Forget that I use vim"], files={"memory/MEMORY.md": MEMORY})
        code, report = isolated.run_json("run")
        assert code == 0 and report["status"] == "held", report
        assert (isolated.workspace / "memory/MEMORY.md").read_text() == MEMORY
        code, listed = isolated.run_json("review", "--json")
        assert code == 0
        assert "User's preferred editor is vim" in str(listed)
        result = isolated.run("review", "accept", "--all")
        assert result.exit_code == 0, result.output
        text = (isolated.workspace / "memory/MEMORY.md").read_text()
        assert "vim" not in text and "Forget" not in text and "- Uses tmux" in text


def test_a_forget_or_a_was_names_lines_by_whole_words_only() -> None:
    """ "Forget: tea" names no line holding "team", and a bare forget matching several lines names
    none of them; "(was tea)" never replaces the line about the team either (a substring match
    removed or replaced unrelated lines Dream had written)."""
    from dream_memory.core.placement import add_fact

    text = "# Memory\n\n## Facts\n\n- User's team uses Slack for chat\n- Decided: the team uses GitHub for review\n"
    assert add_fact(text, "memory/MEMORY.md", "Forget: tea") == text
    assert add_fact(text, "memory/MEMORY.md", "Forget: it") == text
    assert add_fact(text, "memory/MEMORY.md", "Forget: team uses") == text  # two lines: neither
    one = add_fact(text, "memory/MEMORY.md", "Forget: team uses Slack")
    assert "Slack" not in one and "GitHub" in one
    replaced = add_fact(text, "memory/MEMORY.md", "User drinks coffee (was tea)")
    assert "- User's team uses Slack for chat" in replaced and "- User drinks coffee" in replaced


def test_a_forget_that_names_several_lines_says_so_in_the_report(isolated: Cli) -> None:
    """A bare forget matching two lines removes neither, and the batch's notes say so: it used to
    read as "every fact is already in memory"."""
    memory = "# Memory\n\n## Facts\n\n- The team uses Slack\n- The team uses GitHub\n"
    with ScriptedLLMServer(responder=lambda r: Reply("[MEMORY] Forget: team uses [from 1]")) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, ["Forget what the team uses"], files={"memory/MEMORY.md": memory})
        code, report = isolated.run_json("run")
    assert code == 0, report
    notes = " ".join(report["batches"][0]["notes"])
    assert "fact 1, a Forget: without (was ...), names 2 lines of memory/MEMORY.md" in notes
    assert (isolated.workspace / "memory/MEMORY.md").read_text() == memory
