"""A memory file saved with CRLF line ends (a Windows editor's) keeps them.

A model's edit_file already matched such a file (core.edits reads old_text's line ends loosely
and writes the matched lines' own). What Dream wrote itself did not: the offline engine's lines
were LF among CRLF ones, and the blank line before the next heading was lost, since a line
holding only a carriage return did not read as blank. The tools now see the file with LF line
ends, and its changes go back with CRLF.
"""

from __future__ import annotations

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

USER_LF = "# User\n\n## Profile\n\n- User's name is Ada.\n\n## Preferences\n\n## Work Context\n"
USER_CRLF = USER_LF.replace("\n", "\r\n")


def test_a_models_edit_of_a_crlf_file_matches_and_keeps_crlf(isolated: Cli) -> None:
    edit = Reply(
        tool_calls=[
            tool_call(
                "edit_file",
                path="USER.md",
                old_text="## Preferences\n\n## Work Context\n",
                new_text="## Preferences\n\n- User likes tea.\n\n## Work Context\n",
            )
        ]
    )
    with ScriptedLLMServer([Reply("[USER] likes tea"), edit, Reply("done")]) as server:
        use_server(isolated, server)
        make_workspace(isolated, ["- [durable] User likes tea."], files={"USER.md": USER_CRLF})
        code, report = isolated.run_json("run")
        assert code == 0, report
        results = [m["content"] for m in server.completion_requests()[-1].messages if m["role"] == "tool"]
        assert results and not results[0].startswith("Error:"), results
    after = (isolated.workspace / "USER.md").read_bytes()
    assert (
        after == USER_CRLF.replace("## Preferences\r\n\r\n", "## Preferences\r\n\r\n- User likes tea.\r\n\r\n").encode()
    )
    # The commit adds two lines and changes none of the person's.
    assert git(isolated.workspace, "diff", "--numstat", "HEAD~1", "HEAD", "--", "USER.md").split()[:2] == ["2", "0"]


def test_the_offline_engine_writes_a_crlf_file_as_it_writes_an_lf_one(isolated: Cli, tmp_path) -> None:
    entries = ["- [durable] User's cat is called Miso.", "- [durable] User prefers tea over coffee."]
    ws = make_workspace(isolated, entries, files={"USER.md": USER_CRLF})
    lf = Cli(isolated.home, tmp_path / "lf", isolated.env)
    make_workspace(lf, entries, files={"USER.md": USER_LF})
    for where in (ws, lf.workspace):
        assert isolated.run("run", "--model", "offline", "--workspace", str(where)).exit_code == 0
    crlf_after, lf_after = (ws / "USER.md").read_bytes(), (lf.workspace / "USER.md").read_bytes()
    assert b"Miso" in lf_after and b"\r" not in lf_after
    assert crlf_after == lf_after.replace(b"\n", b"\r\n")


def test_a_file_with_mixed_line_ends_keeps_each_line_as_it_was(isolated: Cli) -> None:
    """Only a file CRLF throughout is converted: in a mixed one, which end a new line should get
    is a guess, so the file is shown as it is and the person's lines keep their bytes."""
    mixed = "# User\r\n\r\n## Profile\n\n- User's name is Ada.\r\n"
    edit = Reply(
        tool_calls=[
            tool_call("edit_file", path="USER.md", old_text="## Profile\n", new_text="## Profile\n- User likes tea.\n")
        ]
    )
    with ScriptedLLMServer([Reply("[USER] likes tea"), edit, Reply("done")]) as server:
        use_server(isolated, server)
        make_workspace(isolated, ["- [durable] User likes tea."], files={"USER.md": mixed})
        code, report = isolated.run_json("run")
        assert code == 0, report
    after = (isolated.workspace / "USER.md").read_bytes()
    assert after == b"# User\r\n\r\n## Profile\n- User likes tea.\n\n- User's name is Ada.\r\n"


def test_a_line_ending_in_two_carriage_returns_is_left_as_it_is(tmp_path) -> None:
    """`\r\r\n` read as CRLF would come back `\r\n`: the text on disk would no longer match what
    Dream read, and a batch editing near it was taken for a person's edit on every run."""
    from dream_memory.adapters.staging import StagingWorkspace

    text = "# User\r\n\r\n- User's name is Ada.\r\r\n- User likes tea.\r\n"
    (tmp_path / "USER.md").write_bytes(text.encode())
    staging = StagingWorkspace(tmp_path, count_tokens=len, file_budget_tokens=10_000)
    assert staging.read("USER.md") == text
    staging.write("USER.md", text + "- User has a cat.\n")
    assert staging.changes() == {"USER.md": (text, text + "- User has a cat.\n")}
