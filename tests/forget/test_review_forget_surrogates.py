"""`dream forget` over text holding lone surrogates: half an emoji (``"\\ud83d"``, a JSON escape a
UTF-16 client left) and undecodable bytes ``surrogateescape`` kept (a non-UTF-8 `dream append`
argument). history.jsonl stores both as JSON escapes, so it is valid UTF-8.

Before, a purge over a history line holding half an emoji crashed (a traceback, exit 1) and left
its journal behind: every `dream run` then exited 2 and every other purge was refused. A line it
rewrote that held undecodable bytes was written back as those raw bytes (history.jsonl no longer
UTF-8). Now the rewritten lines keep the escapes and read back as the same strings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forget_helpers import Env

from dream_memory.core import forget as rules

VALUE = "Erin-4471"
HALF_EMOJI = f"{VALUE} sent a rocket \ud83d today"
UNDECODABLE = f"Carol likes caf\udce9 and {VALUE}"  # b"caf\xe9" as surrogateescape reads it
ACCENTED = f"D\u00e9p\u00f4t na\u00efve {VALUE}"
JOURNAL = "memory/.forget_journal.json"
DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]


def _dream(env: Env, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`dream ARGS...` as a real process (an argument holding ``\\udcXX`` reaches it as the raw
    byte, as from a Latin-1 terminal)."""
    return subprocess.run(
        [*DREAM, *args],
        env={**os.environ, **env.env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _workspace(tmp_path: Path, *, half_emoji: str = HALF_EMOJI) -> Env:
    """A workspace whose history holds the value next to half an emoji, next to undecodable
    bytes and next to plain accented text (one entry each), and one entry without it."""
    env = Env(tmp_path)
    assert _dream(env, "init").returncode == 0
    assert _dream(env, "append", UNDECODABLE).returncode == 0
    line = json.dumps({"content": half_emoji, "session_key": "cli:direct"})
    appended = _dream(env, "append", "--jsonl", "-", stdin=line + "\n")
    assert appended.returncode == 0, appended.stderr
    assert _dream(env, "append", ACCENTED).returncode == 0
    assert _dream(env, "append", "Dan likes jazz").returncode == 0
    return env


def _history(env: Env, rel: str = "memory/history.jsonl") -> list[str]:
    """The contents of a history file, read as a strict UTF-8 JSON reader reads them."""
    text = (env.ws / rel).read_bytes().decode("utf-8", errors="strict")
    return [json.loads(line)["content"] for line in text.splitlines()]


def _purged(text: str) -> str:
    return text.replace(VALUE, rules.FORGOTTEN)


@pytest.mark.slow
def test_a_purge_over_half_an_emoji_finishes_and_leaves_no_journal(tmp_path: Path) -> None:
    env = _workspace(tmp_path)
    done = _dream(env, "forget", "--purge", VALUE, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["history"] == {"memory/history.jsonl": [1, 2, 3]} and report["cursors"] == [1, 2, 3]
    assert _history(env) == [_purged(UNDECODABLE), _purged(HALF_EMOJI), _purged(ACCENTED), "Dan likes jazz"]
    assert not (env.ws / JOURNAL).exists()
    # Nothing is blocked afterwards: Dream runs, and another value can be purged.
    ran = _dream(env, "run", "--model", "offline", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    again = _dream(env, "forget", "--purge", "Dan likes", "--json")
    assert again.returncode == 0, again.stderr
    assert "[forgotten] jazz" in _history(env)


@pytest.mark.slow
def test_a_purge_killed_midway_over_half_an_emoji_is_finished_by_running_it_again(tmp_path: Path) -> None:
    """The journal a crash leaves (here a SIGKILL right before history.jsonl is rewritten, where
    the old crash stopped) is finished by running the same purge again."""
    env = _workspace(tmp_path)
    killed = env.process("forget", "--purge", VALUE, kill=("history.rewrite", 1))
    assert killed.returncode == -9, f"the kill point was never reached: {killed.stdout}{killed.stderr}"
    assert (env.ws / JOURNAL).exists()
    blocked = _dream(env, "run", "--model", "offline")
    assert blocked.returncode == 2  # until it is finished
    done = _dream(env, "forget", "--purge", VALUE, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resumed"] is True
    assert not (env.ws / JOURNAL).exists()
    assert _history(env) == [_purged(UNDECODABLE), _purged(HALF_EMOJI), _purged(ACCENTED), "Dan likes jazz"]


@pytest.mark.slow
def test_rewritten_history_and_archive_lines_stay_utf8_with_their_escapes(tmp_path: Path) -> None:
    """history.jsonl and memory/archive/: each rewritten line is valid UTF-8, its lone surrogates
    escaped (``\\udce9``), and reads back as the same strings with the value replaced (no half
    emoji here: the undecodable bytes alone)."""
    plain = f"{VALUE} sent a rocket today"
    env = _workspace(tmp_path, half_emoji=plain)
    archive = env.ws / "memory/archive/history-000001.jsonl"
    archive.parent.mkdir(parents=True)
    old = [{"cursor": -1, "timestamp": "2020-01-01 00:00", "content": text} for text in (UNDECODABLE, ACCENTED)]
    archive.write_text("".join(json.dumps(o) + "\n" for o in old), encoding="utf-8")
    done = _dream(env, "forget", "--purge", VALUE, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["history"]["memory/archive/history-000001.jsonl"] == [1, 2]
    for rel in ("memory/history.jsonl", "memory/archive/history-000001.jsonl"):
        first = (env.ws / rel).read_bytes().splitlines()[0]
        assert b"\\udce9" in first and b"\xe9" not in first, first  # the escape, never the raw byte
    assert _history(env)[:3] == [_purged(UNDECODABLE), _purged(plain), _purged(ACCENTED)]
    assert _history(env, "memory/archive/history-000001.jsonl") == [_purged(UNDECODABLE), _purged(ACCENTED)]


@pytest.mark.slow
def test_a_value_holding_undecodable_bytes_is_purged(tmp_path: Path) -> None:
    """``dream forget --purge`` given the same non-UTF-8 bytes the entry was appended with."""
    env = _workspace(tmp_path, half_emoji="no value here")
    done = _dream(env, "forget", "--purge", "Carol likes caf\udce9", "--json")
    assert done.returncode == 0, done.stderr
    assert _history(env)[0] == f"[forgotten] and {VALUE}"


@pytest.mark.parametrize(
    "rel",
    [
        "memory/.dream_state.json",
        "memory/.consolidation.json",
        "memory/.dream_held/1-1.1/change.json",
        "memory/history.jsonl",
        "memory/archive/history-000001.jsonl",
    ],
)
def test_json_files_forget_rewrites_keep_lone_surrogates_escaped(rel: str) -> None:
    """Every JSON file the purge rewrites: UTF-8 after, read back as the same strings."""
    doc = {"facts": [UNDECODABLE, HALF_EMOJI, ACCENTED], "reason": "kept \ud83d"}
    data = (json.dumps(doc, indent=None if rel.endswith(".jsonl") else 2) + "\n").encode("utf-8")
    new = rules.purge_bytes(rel, data, rules.Target("value", VALUE))
    assert new is not None and new != data
    read = json.loads(new.decode("utf-8", errors="strict"))
    assert read == {"facts": [_purged(UNDECODABLE), _purged(HALF_EMOJI), _purged(ACCENTED)], "reason": "kept \ud83d"}
