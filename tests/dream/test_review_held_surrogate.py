"""A held change whose fact holds half an emoji (``"\\ud83d"`` in the model's JSON reply, a UTF-16
client cut it). Before, writing its record (memory/.dream_held/<id>/change.json) failed with
UnicodeEncodeError: the whole batch failed on every run and the cursor never moved. Now the record
keeps the fact escaped (valid UTF-8, read back as the same text), and `dream review` lists, shows
and accepts it (real `dream` processes, a scripted model over HTTP, real git)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.testing import clean_env
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]
FACT = "[USER] User likes coffee in the morning \ud83d"


def _dream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DREAM, *args], env=env, capture_output=True, text=True, timeout=120)


def _strict(done: subprocess.CompletedProcess[str]) -> None:
    """stdout as a strict UTF-8 reader sees it."""
    done.stdout.encode("utf-8", errors="strict")


@pytest.mark.slow
def test_a_held_change_whose_fact_holds_half_an_emoji_is_held_listed_and_accepted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert _dream(env, "init").returncode == 0
    user = ws / "USER.md"
    user.write_text(user.read_text().replace("## Preferences\n", "## Preferences\n\n- likes tea in the morning\n"))
    git = ["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@example.invalid"]
    subprocess.run([*git, "commit", "-qam", "person edit"], check=True)
    assert _dream(env, "append", "- [durable] User now likes coffee in the morning").returncode == 0
    edit = tool_call(
        "edit_file", path="USER.md", old_text="- likes tea in the morning\n", new_text="- likes coffee in the morning\n"
    )
    with ScriptedLLMServer([Reply(FACT), Reply(None, [edit]), Reply("done")] * 3) as server:
        env |= server.write_config(tmp_path / "dream.json")
        ran = _dream(env, "run", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert report["status"] == "held" and report["errors"] == [] and report["cursor_after"] == 1
    [held] = report["held"]

    record = (ws / "memory/.dream_held" / held["id"] / "change.json").read_bytes().decode("utf-8", errors="strict")
    assert json.loads(record)["facts"] == [f"{FACT}  <- unknown"]

    listed = _dream(env, "review", "--json")
    assert listed.returncode == 0, listed.stderr
    _strict(listed)
    assert [c["id"] for c in json.loads(listed.stdout)["changes"]] == [held["id"]]
    shown = _dream(env, "review", "show", held["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    _strict(shown)
    assert json.loads(shown.stdout)["facts"] == [f"{FACT}  <- unknown"]
    text = _dream(env, "review", "show", held["id"])
    assert text.returncode == 0 and "coffee in the morning \\ud83d" in text.stdout  # the escape, visibly

    accepted = _dream(env, "review", "accept", held["id"])
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "- likes coffee in the morning\n" in user.read_text()
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True, check=True).stdout
    assert log.splitlines()[0].startswith(f"dream: apply held {held['id']}")
    assert json.loads(_dream(env, "review", "--json").stdout)["count"] == 0


@pytest.mark.slow
def test_a_content_failure_quoting_half_an_emoji_is_counted_and_set_aside(tmp_path: Path) -> None:
    """A reply refused as content (a placeholder fact) whose line holds half an emoji: the failure
    is recorded in Dream's state (escaped in the file, read back as the same text), so the third run sets the
    batch aside. Before, the state could not be written (UnicodeEncodeError) and every run failed
    on the same batch, the count never moving."""
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert _dream(env, "init").returncode == 0
    assert _dream(env, "append", "- [durable] User likes rockets").returncode == 0
    with ScriptedLLMServer([Reply("[ENTITY] name: likes rockets \ud83d")] * 6) as server:
        env |= server.write_config(tmp_path / "dream.json")
        runs = [_dream(env, "run", "--json") for _ in range(3)]
    for run in runs:
        assert "internal error" not in run.stdout + run.stderr, run.stderr
    assert [r.returncode for r in runs] == [1, 1, 0]
    last = json.loads(runs[-1].stdout)
    assert last["cursor_after"] == 1 and [(s["cursor_from"], s["cursor_to"]) for s in last["set_aside"]] == [(1, 1)]
    state = json.loads((ws / "memory/.dream_state.json").read_bytes().decode("utf-8", errors="strict"))
    assert "likes rockets \ud83d" in state["set_aside"][0]["reason"]  # the very text, read back
