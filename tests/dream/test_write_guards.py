"""Guards on what Dream writes: deletions weighed over a window of batches (so a model cannot
remove a file's facts a few lines at a time), and the size and content rules of Dream's reads
applied to its writes (so a batch cannot leave a file the next run can no longer edit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, ScriptedToolCall, tool_call

FACTS = 40
MEMORY = "memory/MEMORY.md"


def facts_file(n: int = FACTS) -> str:
    return "# Memory\n\n" + "".join(f"- project fact {i}: the service {i} runs on port {8000 + i}\n" for i in range(n))


class Salami:
    """A model that, in every batch, removes the first ``per_batch`` facts still in MEMORY.md (as
    committed on disk) with one edit_file, then says it is done."""

    def __init__(self, workspace: Path, per_batch: int = 6) -> None:
        self.workspace = workspace
        self.per_batch = per_batch

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        if not request.get("tools"):
            return Reply("[MEMORY] The fact list was tidied.")
        if any(m.get("role") == "tool" for m in messages):
            return Reply("Removed the outdated facts.")
        text = (self.workspace / MEMORY).read_text(encoding="utf-8")
        lines = [line for line in text.splitlines(keepends=True) if line.startswith("- project fact")]
        old = "".join(lines[: self.per_batch])
        return Reply(tool_calls=[tool_call("edit_file", path=MEMORY, old_text=old, new_text="")])


def guard_only(cli_env: Cli, server: ScriptedLLMServer, **dream: Any) -> Path:
    """A config for ``server`` with the write policy letting removals of the imported facts land:
    by default it holds each one at once (they are lines a person wrote, docs/dream.md "Review"),
    and these tests weigh the deletion guard on its own."""
    path = use_server(cli_env, server)
    config = json.loads(path.read_text(encoding="utf-8"))
    config["agents"]["defaults"]["dream"] = {"writePolicy": {"manual": "apply"}, **dream}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def remaining(workspace: Path) -> int:
    return sum(1 for line in (workspace / MEMORY).read_text(encoding="utf-8").splitlines() if "project fact" in line)


def test_salami_deletion_within_one_run_is_held(isolated: Cli) -> None:
    """A model removing 6 of 40 facts per batch over 5 batches of one run (each batch under the
    per-batch limit): once Dream's removals in the window pass the limit (more than 30% of the
    file, at least 10 lines), the next removing batches are held; 28 facts stay, not 10."""
    make_workspace(isolated, [f"- entry {i}" for i in range(5)], files={MEMORY: facts_file()})
    with ScriptedLLMServer(responder=Salami(isolated.workspace)) as server:
        guard_only(isolated, server)
        code, report = isolated.run_json("run", "--batch-size", "1")
    outcomes = [b["outcome"] for b in report["batches"]]
    assert code == 0 and report["status"] == "held", report["errors"]
    assert outcomes == ["committed", "committed", "held", "held", "held"]
    assert remaining(isolated.workspace) == FACTS - 12
    reason = report["held"][0]["reason"]
    assert "would remove 18 of 42 lines from memory/MEMORY.md over the last 3 batches (6 in this one)" in reason


def test_salami_deletion_across_runs_is_held(isolated: Cli) -> None:
    """The same model, one batch per run over 5 scheduled runs: the window reaches back into the
    earlier runs' commits, so the third run's removal is held as in one long run."""
    make_workspace(isolated, [f"- entry {i}" for i in range(5)], files={MEMORY: facts_file()})
    outcomes = []
    with ScriptedLLMServer(responder=Salami(isolated.workspace)) as server:
        guard_only(isolated, server)
        for _ in range(5):
            code, report = isolated.run_json("run", "--batch-size", "1", "--max-batches", "1")
            assert code == 0, report["errors"]
            outcomes += [b["outcome"] for b in report["batches"]]
    assert outcomes == ["committed", "committed", "held", "held", "held"]
    assert remaining(isolated.workspace) == FACTS - 12


def test_a_window_of_zero_batches_weighs_each_batch_alone(isolated: Cli) -> None:
    """deletionGuard.windowBatches 0 turns the window off: each batch is judged on its own, as
    before (a workspace that wants that trade-off can have it, documented in docs/dream.md)."""
    make_workspace(isolated, [f"- entry {i}" for i in range(3)], files={MEMORY: facts_file()})
    with ScriptedLLMServer(responder=Salami(isolated.workspace)) as server:
        guard_only(isolated, server, deletionGuard={"windowBatches": 0})
        _code, report = isolated.run_json("run", "--batch-size", "1")
    assert [b["outcome"] for b in report["batches"]] == ["committed"] * 3
    assert remaining(isolated.workspace) == FACTS - 18


def test_the_window_restarts_after_a_held_batch_is_applied(isolated: Cli) -> None:
    """A person who applies a held removal has accepted the file as it then is: the next batch's
    small removal is weighed on its own again, not against removals already reviewed."""
    make_workspace(isolated, [f"- entry {i}" for i in range(4)], files={MEMORY: facts_file()})
    with ScriptedLLMServer(responder=Salami(isolated.workspace)) as server:
        guard_only(isolated, server)
        _code, report = isolated.run_json("run", "--batch-size", "1", "--max-batches", "3")
        assert [b["outcome"] for b in report["batches"]] == ["committed", "committed", "held"]
        applied = isolated.run("restore", "--apply-held", report["held"][0]["id"])
        assert applied.exit_code == 0, applied.output
        assert remaining(isolated.workspace) == FACTS - 18
        _code, report = isolated.run_json("run", "--batch-size", "1")
    assert [b["outcome"] for b in report["batches"]] == ["committed"]
    assert remaining(isolated.workspace) == FACTS - 24


def test_additions_and_small_edits_are_never_held_by_the_window(isolated: Cli) -> None:
    """Batches that only add facts are not held, however many removals came before them in the
    window: the window holds removals, not every later change to the file."""
    make_workspace(isolated, [f"- entry {i}" for i in range(6)], files={MEMORY: facts_file()})
    salami = Salami(isolated.workspace)
    calls = {"n": 0}

    def model(request: dict[str, Any]) -> Reply:
        if request.get("tools") and not any(m.get("role") == "tool" for m in request.get("messages") or []):
            calls["n"] += 1
            if calls["n"] > 3:  # after two removals and a held one: only additions
                text = (isolated.workspace / MEMORY).read_text(encoding="utf-8")
                last = text.splitlines(keepends=True)[-1]
                new = last + f"- new fact {calls['n']}\n"
                return Reply(tool_calls=[tool_call("edit_file", path=MEMORY, old_text=last, new_text=new)])
        return salami(request)

    with ScriptedLLMServer(responder=model) as server:
        guard_only(isolated, server)
        _code, report = isolated.run_json("run", "--batch-size", "1")
    assert [b["outcome"] for b in report["batches"]] == ["committed", "committed", "held", *["committed"] * 3]


def test_a_write_larger_than_dream_can_read_is_refused_as_a_tool_error(isolated: Cli) -> None:
    """A model writing an 8 MB MEMORY.md (more than Dream reads, so the next run could no longer
    edit it) gets a tool error it can read, and the batch fails instead of committing it; the
    next run still reads and edits the file."""
    huge = "- padding line that keeps going\n" * 270_000  # ~8.6 MB
    current = facts_file(3)
    big_edit = tool_call("edit_file", path=MEMORY, old_text=current, new_text=current + huge)
    scripted = [
        Reply("[MEMORY] The release checklist lives in docs/release.md"),
        Reply(tool_calls=[big_edit]),
        Reply("done"),
    ]
    make_workspace(isolated, ["- entry"], files={MEMORY: current})
    with ScriptedLLMServer(scripted) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
        tool_results = [m for r in server.requests for m in r.body.get("messages", []) if m.get("role") == "tool"]
    assert code == 1 and report["status"] == "failed"
    assert any("bytes" in str(m["content"]) and "larger than" in str(m["content"]) for m in tool_results)
    assert (isolated.workspace / MEMORY).read_text(encoding="utf-8") == current
    assert "larger than" in report["errors"][0]


def test_a_nul_byte_or_a_lone_surrogate_in_a_write_is_refused(isolated: Cli) -> None:
    """A NUL byte (Dream's reads refuse binary files, so the next run would fail on it) or a lone
    UTF-16 surrogate (not encodable as UTF-8: the commit would crash) in write_file or edit_file
    content is a tool error; nothing of it is committed (the fact it was for waits for review)."""
    current = facts_file(3)
    calls = [
        tool_call("write_file", path="entities/nul.md", content="# Nul\n\n- a\x00b\n"),
        # JSON's own escape: the client decodes it into a string holding the lone surrogate.
        ScriptedToolCall("edit_file", json.dumps({"path": MEMORY, "old_text": current, "new_text": "- bad \ud800\n"})),
        tool_call("edit_file", path=MEMORY, old_text=current, new_text=current + "- a good fact\n"),
    ]
    make_workspace(isolated, ["- entry"], files={MEMORY: current})
    with ScriptedLLMServer(
        [
            Reply("[MEMORY] a good fact\n[ENTITY] nul: The nul project has one file"),
            Reply(tool_calls=calls),
            Reply("done"),
        ]
    ) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
        tool_results = [
            str(m["content"]) for r in server.requests for m in r.body.get("messages", []) if m.get("role") == "tool"
        ]
    # The entity's fact, whose only write was refused, is not dropped: it waits for review.
    assert code == 0 and report["status"] == "held", report["errors"]
    assert sorted(h["path"] for h in report["held"]) == ["entities/nul.md", "index.md"], report["held"]
    assert any("NUL" in t for t in tool_results) and any("surrogate" in t for t in tool_results)
    assert not (isolated.workspace / "entities" / "nul.md").exists()
    assert (isolated.workspace / MEMORY).read_text(encoding="utf-8") == current + "- a good fact\n"
    blob = git(isolated.workspace, "show", f"HEAD:{MEMORY}")
    assert "\x00" not in blob and json.dumps(blob)
