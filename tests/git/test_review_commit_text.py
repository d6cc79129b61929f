"""A Dream commit lands whatever text its message carries.

A batch's commit message lists the model's facts. A fact may hold a lone UTF-16 surrogate: a
model's JSON reply cut in the middle of an emoji ("\\ud83d"), or an entry appended from bytes
that are not UTF-8 (b"\\xff" kept by surrogateescape) that the model repeats. Before, the message
was encoded as strict UTF-8 after the memory edits were made: the run exited 1 claiming the git
repository was damaged, the batch's edits were rolled back and the cursor stayed behind, on every
run again. Now the surrogate is written in the message as its visible escape (``\\ud83d``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dream_memory.testing import clean_env
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]

# Phase 2's edit: plain text, so only the fact (the commit message) holds the surrogate.
EDIT = tool_call("edit_file", path="USER.md", old_text="## Preferences\n", new_text="## Preferences\n\n- likes it\n")


def dream(env: dict[str, str], *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """`dream ARGS...` as a real process, arguments and output as raw bytes."""
    argv = [a if isinstance(a, bytes) else a.encode() for a in [*DREAM, *args]]
    return subprocess.run(argv, env=env, capture_output=True, timeout=120)


def git(ws: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(ws), *args], capture_output=True, check=True)
    return done.stdout


def run_with_model(tmp_path: Path, appended: str | bytes, replies: list[Reply]) -> tuple[Path, Any, int]:
    """A new workspace, one appended entry, then `dream run` against a model answering
    ``replies``; returns (workspace, the run's JSON report, its exit code)."""
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0
    assert dream(env, "append", appended).returncode == 0
    with ScriptedLLMServer(replies) as server:
        env |= server.write_config(tmp_path / "dream.json")
        done = dream(env, "run")
    return ws, json.loads(done.stdout.decode("utf-8")), done.returncode


def assert_landed(ws: Path, report: Any, code: int, shown: str) -> None:
    """The batch committed: exit 0, its edit in HEAD, the cursor moved, and the commit message
    is valid UTF-8 listing the fact with the surrogate as ``shown``."""
    assert (code, report["status"], report["errors"]) == (0, "ok", [])
    assert report["cursor_after"] == 1
    assert len(report["commits"]) == 1
    assert b"- likes it" in git(ws, "show", "HEAD:USER.md")
    message = git(ws, "log", "-1", "--format=%B").decode("utf-8", errors="strict")
    assert shown in message
    assert git(ws, "status", "--porcelain") == b""  # nothing left uncommitted


@pytest.mark.slow
def test_a_fact_holding_half_an_emoji_is_committed(tmp_path: Path) -> None:
    replies = [Reply("[USER] User likes the rocket emoji \ud83d"), Reply(None, [EDIT]), Reply("done")]
    ws, report, code = run_with_model(tmp_path, "- [durable] User likes the rocket emoji", replies)
    assert_landed(ws, report, code, "[USER] User likes the rocket emoji \\ud83d")


@pytest.mark.slow
def test_a_fact_repeating_a_non_utf8_entry_is_committed(tmp_path: Path) -> None:
    replies = [Reply("[USER] User prefers caf\udcff mode"), Reply(None, [EDIT]), Reply("done")]
    ws, report, code = run_with_model(tmp_path, b"- [durable] User prefers caf\xff mode", replies)
    assert_landed(ws, report, code, "[USER] User prefers caf\\udcff mode")


@pytest.mark.slow
def test_file_text_holding_half_an_emoji_is_refused_to_the_model_and_its_retry_lands(tmp_path: Path) -> None:
    """Memory file text with a lone surrogate is never written (it is not UTF-8): the edit is
    refused with a message the model can act on, and its corrected edit commits as usual."""
    bad = tool_call("edit_file", path="USER.md", old_text="## Preferences\n", new_text="## Preferences\n\n- \ud83d\n")
    replies = [Reply("[USER] User likes it"), Reply(None, [bad]), Reply(None, [EDIT]), Reply("done")]
    ws, report, code = run_with_model(tmp_path, "- [durable] User likes it", replies)
    assert_landed(ws, report, code, "[USER] User likes it")
    assert "\\ud83d" not in (ws / "USER.md").read_text(encoding="utf-8")
