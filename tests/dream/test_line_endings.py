"""A memory file rewritten with other line ends only is no hand edit."""

from __future__ import annotations

from dream_helpers import Cli, git, make_workspace, sample_entries, use_server

from dream_memory.testing.llm_server import ScriptedLLMServer


def test_a_crlf_only_rewrite_is_not_committed_as_manual_edits(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """USER.md and SOUL.md rewritten with CRLF line ends and nothing else: the run makes no
    `memory: manual edits` commit (a real edit of another file still gets one)."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(2))
    isolated.run("init")
    for name in ("USER.md", "SOUL.md"):
        path = isolated.workspace / name
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    code, report = isolated.run_json("run")
    assert code == 0, report
    assert report["manual_edits_commit"] is None
    assert "memory: manual edits" not in git(isolated.workspace, "log", "--format=%s").splitlines()

    memory = isolated.workspace / "memory/MEMORY.md"
    memory.write_text(memory.read_text() + "\nA real hand edit.\n")
    code, report = isolated.run_json("run")
    assert report["manual_edits_commit"] is not None
    files = git(isolated.workspace, "show", "--name-only", "--format=", report["manual_edits_commit"]).split()
    assert files == ["memory/MEMORY.md"]
