"""The Consolidator as real processes: SIGKILL at the durable steps of an archive, an agent
appending to the session while it is consolidated, and two consolidations at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from consolidate_helpers import (
    Cli,
    echo_responder,
    history,
    markers,
    progress,
    session,
    spoken_markers,
    turn,
    turns,
    use_server,
)

from dream_memory.testing.llm_server import ScriptedLLMServer

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

# The write sites of one archived slice, in the order they happen. The step the acceptance names
# (between the append and the progress update) also runs through the scripted server; the others
# use the offline engine, which keeps these turns whole, so the killed process starts in a second
# instead of importing litellm.
CASES = [
    ("consolidation.progress", True),
    ("consolidation.pending", False),
    ("history.append", False),
    ("cursor.write", False),
    ("consolidation.progress", False),
]


@pytest.mark.parametrize(
    ("site", "through_server"), CASES, ids=[f"{s}-{'server' if v else 'offline'}" for s, v in CASES]
)
def test_sigkill_at_any_step_of_an_archive_then_a_rerun_leaves_exactly_one_copy(
    isolated: Cli, site: str, through_server: bool
) -> None:
    """`dream consolidate` killed with SIGKILL at each durable step of archiving a slice (before the
    pending record, before the append, between the append and the cursor, between the append and
    the progress update) leaves, after the next run, every message of the slice in history exactly
    once; a slice already planned is finished without calling the model again."""
    messages = turns(6, tools=1, keep=True)
    tail = len(turn(5, tools=1))
    # The echoing server shows every line of the slice; the offline engine only what was said.
    if through_server:
        slice_markers = [mk for m in messages[:-tail] for mk in markers(json.dumps(m))]
    else:
        slice_markers = spoken_markers(messages[:-tail])
    model = [] if through_server else ["--model", "offline"]
    with ScriptedLLMServer(responder=echo_responder) as server:
        if through_server:
            use_server(isolated, server)
        session(isolated, "cli:direct", messages)
        killed = isolated.process("consolidate", "--all", "--force", *model, kill_at=site)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        after_kill = "\n".join(e["content"] for e in history(isolated.workspace))
        appended = site in ("cursor.write", "consolidation.progress")
        assert all(after_kill.count(mk) == (1 if appended else 0) for mk in slice_markers)
        state = progress(isolated.workspace)
        assert state["sessions"] == {}
        assert (state["pending"] is not None) == (site != "consolidation.pending")
        calls = len(server.completion_requests())
        code, report = isolated.consolidate("--all", "--force", *model)
        assert code == 0, report
        if site == "consolidation.pending":
            assert report["recovered"] == [] and report["usage"]["llm_calls"] == 1
        else:
            assert report["usage"]["llm_calls"] == 0, "the rerun must not ask the model again"
            assert len(server.completion_requests()) == calls
            (item,) = report["recovered"]
            assert item["outcome"] == "finished" and len(item["appended"]) == (0 if appended else item["planned"])
    text = "\n".join(e["content"] for e in history(isolated.workspace))
    assert all(text.count(mk) == 1 for mk in slice_markers)
    assert not any(mk in text for m in messages[-tail:] for mk in markers(json.dumps(m)))
    state = progress(isolated.workspace)
    assert state["pending"] is None
    assert state["sessions"]["sessions/cli_direct.jsonl"]["messages"] == len(messages) - tail
    code, again = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0 and again["status"] == "nothing_to_do"


WRITER = r"""
import json, os, sys, time
import filelock
path, stop, use_lock = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
lock = filelock.FileLock(path + ".lock")
def write(text):
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
i = 0
while not os.path.exists(stop):
    stamp = "2026-04-03T10:%02d:%02d" % (i // 60 % 60, i % 60)
    call = "call-%d" % i
    for message in (
        {"role": "user", "content": "t%d-user question" % i, "timestamp": stamp},
        {"role": "assistant", "content": "", "timestamp": stamp, "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "exec", "arguments": "{\"n\": \"t%d-args0\"}" % i}}]},
        {"role": "tool", "tool_call_id": call, "name": "exec", "content": "t%d-result0 " % i + "x" * 200, "timestamp": stamp},
        {"role": "assistant", "content": "t%d-answer" % i, "timestamp": stamp},
    ):
        line = json.dumps(message) + "\n"
        half = len(line) // 2
        if use_lock:
            lock.acquire()
        try:
            # A line arrives in two writes, so a reader can see half of it.
            write(line[:half])
            time.sleep(0.0005)
            write(line[half:])
        finally:
            if use_lock:
                lock.release()
    time.sleep(0.005)
    i += 1
"""


@pytest.mark.parametrize("update_sessions", [False, True], ids=["read-only", "update-sessions"])
def test_an_agent_appending_while_consolidating_loses_no_message(isolated: Cli, update_sessions: bool) -> None:
    """A real writer process keeps appending turns (each line in two writes) while consolidate runs
    again and again; with --update-sessions the writer honours sessions/<file>.lock. Afterwards
    the session file holds every message written, in order, and history holds every consolidated
    message exactly once and none of the others."""
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        path = session(isolated, "cli:direct", [])
        stop = path.parent / "stop-writing"
        extra = ["--update-sessions"] if update_sessions else []
        # Warm up (litellm's first import takes seconds) so the runs below overlap the writer.
        assert isolated.consolidate("--all", *extra)[0] == 0
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(stop), "1" if update_sessions else "0"],
            env={**os.environ, **isolated.env},
        )
        consolidated = 0
        deadline = time.monotonic() + 60
        try:
            while consolidated < 5 and writer.poll() is None and time.monotonic() < deadline:
                code, report = isolated.consolidate("--all", "--budget", "400", *extra)
                assert code == 0, report
                consolidated += report["sessions"][0]["outcome"] == "consolidated"
        finally:
            stop.write_text("")
            assert writer.wait(timeout=30) == 0
        assert consolidated == 5
        code, report = isolated.consolidate("--all", "--force", *extra)
        assert code == 0, report
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    meta, written = json.loads(lines[0]), [json.loads(line) for line in lines[1:-1]]
    total_turns = len(written) // 4
    assert total_turns > 10
    assert [mk for m in written for mk in markers(json.dumps(m))] == [
        f"t{i}-{part}" for i in range(total_turns) for part in ("user", "args0", "result0", "answer")
    ]
    done = progress(isolated.workspace)["sessions"]["sessions/cli_direct.jsonl"]["messages"]
    assert done == len(written) - 4
    if update_sessions:
        assert meta["last_consolidated"] == done
    counts = Counter(markers("\n".join(e["content"] for e in history(isolated.workspace))))
    for index, message in enumerate(written):
        (marker,) = markers(json.dumps(message))
        assert counts[marker] == (1 if index < done else 0), (marker, index, done)


def test_a_second_consolidation_of_the_same_workspace_exits_75(isolated: Cli) -> None:
    """While one consolidation holds the workspace, another one does nothing and exits 75."""
    session(isolated, "cli:direct", turns(4))
    lock_path = isolated.workspace / "memory" / ".consolidation.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import filelock, sys, time\nwith filelock.FileLock(sys.argv[1]):\n"
            "    print('held', flush=True)\n    time.sleep(30)\n",
            str(lock_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, report = isolated.consolidate("--all", "--force", "--model", "offline")
    finally:
        holder.kill()
        holder.wait()
    assert code == 75 and report["status"] == "locked" and report["sessions"] == []
    assert history(isolated.workspace) == []
    code, report = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0 and report["status"] == "ok"
