"""prompts/dream.md is capped like nanobot's Dream prompt: 32,000 characters, with a note; and
it is read like the store: never through a link out of the workspace, never a pipe or a device."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
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


def test_a_guide_that_is_a_link_out_of_the_workspace_is_never_sent(
    isolated: Cli, offline_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """A prompts/dream.md committed as a symbolic link to a file outside (a key file, say) in a
    cloned repository: its text must not reach the model; the built-in guide is used, and the
    report says why."""
    outside = tmp_path / "credentials.txt"
    outside.write_text("AWS_SECRET=OUTSIDE-KEY-never-sent\n", encoding="utf-8")
    use_server(isolated, offline_server)
    ws = make_workspace(isolated, sample_entries(1))
    (ws / "prompts").mkdir(exist_ok=True)
    (ws / "prompts" / "dream.md").symlink_to(outside)
    code, report = isolated.run_json("run")
    assert code == 0, report
    assert all("OUTSIDE-KEY" not in json.dumps(r.messages) for r in offline_server.completion_requests())
    assert any("leads outside the workspace" in note for note in report["notes"])
    shown = isolated.run("prompt")
    assert "OUTSIDE-KEY" not in shown.stdout and "leads outside the workspace" in shown.output


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_guide_that_is_a_pipe_or_a_device_is_not_read(isolated: Cli, kind: str) -> None:
    """A FIFO would block the run forever and /dev/zero would fill its memory: neither is read."""
    ws = make_workspace(isolated, sample_entries(1))
    (ws / "prompts").mkdir(exist_ok=True)
    guide = ws / "prompts" / "dream.md"
    if kind == "fifo":
        os.mkfifo(guide)
    else:
        try:  # a character device made in the workspace itself: /dev/zero's numbers
            os.mknod(guide, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        except PermissionError:
            pytest.skip("making a device node needs root (CAP_MKNOD)")
    proc = isolated.subprocess("dream", "prompt", "-w", str(ws), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "built-in" in proc.stdout + proc.stderr


def test_a_guide_that_links_to_a_file_elsewhere_in_the_workspace_is_never_sent(
    isolated: Cli, offline_server: ScriptedLLMServer
) -> None:
    """Inside the workspace is not enough: a guide linked to .git/config (a remote URL holding a
    token) is not read; only a link that stays in prompts/ is followed."""
    use_server(isolated, offline_server)
    ws = make_workspace(isolated, sample_entries(1))
    assert isolated.run("init").exit_code == 0
    (ws / ".git" / "config").open("a").write('[remote "o"]\n\turl = https://x:ghp_SECRETTOKEN123@example.invalid/r\n')
    (ws / "prompts").mkdir(exist_ok=True)
    (ws / "prompts" / "dream.md").symlink_to("../.git/config")
    shown = isolated.run("prompt")
    assert "ghp_SECRETTOKEN123" not in shown.output and "outside prompts/" in shown.output
    (ws / "prompts" / "dream.md").unlink()
    (ws / "prompts" / "mine.md").write_text("KEEP ONLY DECISIONS.\n", encoding="utf-8")
    (ws / "prompts" / "dream.md").symlink_to("mine.md")
    assert "KEEP ONLY DECISIONS." in isolated.run("prompt").stdout
