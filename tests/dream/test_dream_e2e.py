"""Dream end to end: `dream run` through litellm against a real HTTP model server on 127.0.0.1.

Most tests answer with the deterministic offline engine behind the server (realistic replies over
the real wire); some script exact replies to provoke failures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dream_helpers import Cli, git, make_workspace, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import Fail, Reply, ScriptedLLMServer, from_chat_model, tool_call

REPORT_KEYS = {
    "status",
    "workspace",
    "version",
    "cursor_before",
    "cursor_after",
    "entries_processed",
    "batches",
    "commits",
    "files_changed",
    "model",
    "usage",
    "changed",
    "held",
    "set_aside",
    "redactions",
    "diff",
    "duration_s",
    "errors",
}
BATCH_KEYS = {"cursor_from", "cursor_to", "entries", "facts", "tool_calls", "commit", "files_changed", "usage", "error"}
USAGE_KEYS = {"prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "llm_calls"}


def dream_cursor(workspace: Path) -> int:
    path = workspace / "memory" / ".dream_cursor"
    return int(path.read_text()) if path.exists() else 0


def snapshot(workspace: Path) -> dict[str, bytes]:
    return {
        p.relative_to(workspace).as_posix(): p.read_bytes()
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and ".git/" not in p.as_posix() and not p.name.endswith(".lock")
    }


@pytest.mark.slow
def test_45_entries_become_three_batches_and_three_commits(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A 45-entry history is drained in batches of 20: three commits, cursor at the last entry,
    a report with every CONTRACT key, and requests in the wire protocol of CONTRACT section 8."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(45))
    code, report = isolated.run_json("run")
    assert code == 0, report
    assert set(report) >= REPORT_KEYS
    assert report["status"] == "ok" and report["changed"] is True
    assert (report["cursor_before"], report["cursor_after"], report["entries_processed"]) == (0, 45, 45)
    assert [(b["cursor_from"], b["cursor_to"]) for b in report["batches"]] == [(1, 20), (21, 40), (41, 45)]
    for batch in report["batches"]:
        assert set(batch) >= BATCH_KEYS
        assert set(batch["usage"]) == USAGE_KEYS
    assert len(report["commits"]) == 3 and all(re.fullmatch(r"[0-9a-f]{40}", c) for c in report["commits"])
    assert report["model"] == "openai/scripted-model"
    assert set(report["usage"]) == USAGE_KEYS and report["usage"]["llm_calls"] >= 6
    assert dream_cursor(isolated.workspace) == 45
    log = git(isolated.workspace, "log", "--format=%H %s").splitlines()
    assert [line.split()[0] for line in log[:3]] == list(reversed(report["commits"]))
    assert all(" dream: " in line for line in log[:3])
    assert "User fact number 45" in (isolated.workspace / "USER.md").read_text()
    git(isolated.workspace, "fsck", "--strict")
    assert git(isolated.workspace, "status", "--porcelain") == ""
    requests = offline_server.completion_requests()
    phase1 = [r for r in requests if not r.tools]
    phase2 = [r for r in requests if r.tools]
    assert phase1 and phase2
    assert {t["function"]["name"] for t in phase2[0].tools} == {"read_file", "edit_file", "write_file"}
    assert "## Conversation History" in phase1[0].messages[-1]["content"]


def test_two_server_errors_then_success_are_retried(isolated: Cli) -> None:
    """Transient 5xx answers are retried with backoff; the run then succeeds normally."""
    with ScriptedLLMServer([Fail(500), Fail(500)], responder=from_chat_model(OfflineModel())) as server:
        use_server(isolated, server, retries=3)
        make_workspace(isolated, sample_entries(3))
        code, report = isolated.run_json("run")
        assert code == 0 and report["status"] == "ok"
        assert dream_cursor(isolated.workspace) == 3
        first_two = server.completion_requests()[:3]
        assert first_two[0].body == first_two[1].body == first_two[2].body  # the same request, retried


def test_auth_failure_is_final_and_changes_nothing(isolated: Cli) -> None:
    """A 401 fails the run at once (exit 1), without retries, leaving cursor and files as they were."""
    with ScriptedLLMServer([Fail(401, "invalid api key")] * 5) as server:
        use_server(isolated, server, retries=3)
        make_workspace(isolated, sample_entries(5))
        isolated.run("init")
        before = snapshot(isolated.workspace)
        head = git(isolated.workspace, "rev-parse", "HEAD")
        code, report = isolated.run_json("run")
        assert code == 1 and report["status"] == "failed"
        assert "auth" in report["errors"][0]
        assert len(server.completion_requests()) == 1
        assert report["cursor_after"] == 0 and dream_cursor(isolated.workspace) == 0
        assert snapshot(isolated.workspace) == before
        assert git(isolated.workspace, "rev-parse", "HEAD") == head
        state = isolated.workspace / "memory" / ".dream_state.json"
        assert not state.exists(), "an auth failure must not count against the batch"


def test_forbidden_ambiguous_and_noop_edits_are_errors_the_model_reads(isolated: Cli) -> None:
    """Traversal, history.jsonl, an ambiguous and a no-op edit get four error results; nothing outside
    memory changes, and a batch whose every edit was rejected is a content failure (exit 1)."""
    bad_calls = Reply(
        tool_calls=[
            tool_call("write_file", path="../../etc/passwd", content="root::0:0"),
            tool_call("edit_file", path="memory/history.jsonl", old_text="", new_text="{}"),
            tool_call("edit_file", path="USER.md", old_text="- same", new_text="- other"),
            tool_call("edit_file", path="USER.md", old_text="## Profile", new_text="## Profile"),
        ]
    )
    with ScriptedLLMServer([Reply("[USER] likes tea"), bad_calls, Reply("I could not do it.")]) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(2), files={"USER.md": "# User\n\n## Profile\n\n- same\n- same\n"})
        history_before = (isolated.workspace / "memory" / "history.jsonl").read_bytes()
        code, report = isolated.run_json("run")
        assert code == 1 and report["status"] == "failed"
        final_request = server.completion_requests()[-1]
        results = [m["content"] for m in final_request.messages if m["role"] == "tool"]
        assert len(results) == 4 and all(r.startswith("Error:") for r in results)
        assert (isolated.workspace / "memory" / "history.jsonl").read_bytes() == history_before
        assert (isolated.workspace / "USER.md").read_text() == "# User\n\n## Profile\n\n- same\n- same\n"
        assert not (isolated.home.parent / "etc").exists()
        state = json.loads((isolated.workspace / "memory" / ".dream_state.json").read_text())
        assert state["failure"]["count"] == 1


def test_a_model_looping_on_read_file_stops_at_the_cap(isolated: Cli) -> None:
    """Endless read_file calls end at maxIterations tool calls; no edit means a content failure."""
    reads = [Reply(tool_calls=[tool_call("read_file", path="USER.md", section=f"S{i}")]) for i in range(30)]
    with ScriptedLLMServer([Reply("[USER] likes tea"), *reads]) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(1))
        code, report = isolated.run_json("run")
        assert code == 1
        assert len(server.completion_requests()) == 1 + 11  # phase 1, ten executed calls, one refused
        assert "no valid edit" in report["errors"][0]


def test_unreadable_analysis_gets_one_corrective_retry(isolated: Cli) -> None:
    """A phase-1 reply without tags is answered with one correction, and the corrected reply is used."""
    with ScriptedLLMServer(
        [Reply("Sure! Here are some thoughts.")], responder=from_chat_model(OfflineModel())
    ) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(2))
        code, report = isolated.run_json("run")
        assert code == 0, report
        second = server.completion_requests()[1]
        assert "could not be used" in second.messages[-1]["content"]
        assert report["batches"][0]["facts"] == 2


def test_content_failures_three_runs_in_a_row_set_the_batch_aside(isolated: Cli) -> None:
    """The same batch failing on its content three runs running is set aside: the cursor passes it,
    the range is recorded, the entries stay in history, and the run exits 0."""
    garbage = Reply("no tags here")
    with ScriptedLLMServer(responder=lambda request: garbage) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(3))
        for attempt in (1, 2):
            code, report = isolated.run_json("run")
            assert code == 1 and report["status"] == "failed"
            state = json.loads((isolated.workspace / "memory" / ".dream_state.json").read_text())
            assert state["failure"]["count"] == attempt
        code, report = isolated.run_json("run")
        assert code == 0, report
        assert report["set_aside"][0]["cursor_from"] == 1 and report["set_aside"][0]["cursor_to"] == 3
        assert dream_cursor(isolated.workspace) == 3
        assert len((isolated.workspace / "memory" / "history.jsonl").read_text().splitlines()) == 3
        assert "set aside 1..3" in git(isolated.workspace, "log", "-1", "--format=%s")


def test_nothing_to_add_commits_only_the_cursor(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A batch with nothing worth keeping ends in a cursor-only commit; changed stays false."""
    use_server(isolated, offline_server)
    make_workspace(isolated, ["(nothing)", "- [ephemeral] asked for the time", "- [skip] said thanks"])
    code, report = isolated.run_json("run")
    assert code == 0 and report["changed"] is False
    assert report["batches"][0]["outcome"] == "nothing_new"
    assert git(isolated.workspace, "log", "-1", "--format=%s").strip() == "dream: nothing new in 1..3"
    assert (
        git(isolated.workspace, "show", "--stat", "--format=", "HEAD").split("|")[0].strip() == "memory/.dream_cursor"
    )


def test_nothing_pending_is_a_clean_exit(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """With no history after the cursor the run does nothing, says so, and exits 0."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(2), dream_cursor=2)
    code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "nothing_to_do" and report["commits"] == []


def test_dry_run_changes_nothing_and_reports_the_diff(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """--dry-run touches no file, cursor or commit; the would-be diff is in the report."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(25))
    isolated.run("init")
    before = snapshot(isolated.workspace)
    head = git(isolated.workspace, "rev-parse", "HEAD")
    code, report = isolated.run_json("run", "--dry-run")
    assert code == 0 and report["status"] == "dry_run"
    assert "+- User fact number 25" in report["diff"].replace("+- user", "+- User")
    assert report["commits"] == [] and report["cursor_after"] == 0
    assert snapshot(isolated.workspace) == before
    assert git(isolated.workspace, "rev-parse", "HEAD") == head


def test_hand_edits_are_committed_before_dream(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """Edits a person made are their own commit; Dream's commit holds only Dream's lines."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(2))
    isolated.run("init")
    user = isolated.workspace / "USER.md"
    user.write_text(user.read_text() + "\nHand-written note.\n")
    code, report = isolated.run_json("run")
    assert code == 0
    subjects = git(isolated.workspace, "log", "--format=%s").splitlines()
    assert subjects[:2] == [subjects[0], "memory: manual edits"] and subjects[0].startswith("dream: 1..2")
    dream_diff = git(isolated.workspace, "show", "HEAD", "--", "USER.md")
    assert "Hand-written note" not in "\n".join(line for line in dream_diff.splitlines() if line.startswith("+"))
    assert report["manual_edits_commit"] == git(isolated.workspace, "rev-parse", "HEAD~1").strip()


def test_mass_deletion_is_held_and_can_be_applied(isolated: Cli) -> None:
    """An edit removing most of a file is held: cursor passes, the diff waits under
    memory/.dream_held/, status lists it, and restore --apply-held lands it."""
    body = "# User\n\n" + "".join(f"- kept fact {i}\n" for i in range(20))
    shrink = Reply(tool_calls=[tool_call("edit_file", path="USER.md", old_text=body[8:], new_text="- one fact\n")])
    with ScriptedLLMServer([Reply("[USER] one fact"), shrink, Reply("done")]) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(2), files={"USER.md": body})
        code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "held"
    held_id = report["held"][0]["id"]
    assert "would remove 19 of 22 lines from USER.md" in report["held"][0]["reason"]
    assert (isolated.workspace / "USER.md").read_text() == body
    assert dream_cursor(isolated.workspace) == 2
    assert (isolated.workspace / "memory" / ".dream_held" / held_id / "changes.diff").exists()
    code, status = isolated.run_json("status", "--json")
    assert status["held"] == [held_id]
    result = isolated.run("restore", "--apply-held", held_id)
    assert result.exit_code == 0, result.output
    assert (isolated.workspace / "USER.md").read_text() == "# User\n\n- one fact\n"
    assert not (isolated.workspace / "memory" / ".dream_held" / held_id).exists()
    assert isolated.run_json("status", "--json")[1]["held"] == []


def test_budget_stops_between_batches(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A token budget stops the run cleanly: status budget_exhausted, exit 0, cursor at the last commit."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(45))
    code, report = isolated.run_json("run", "--max-tokens", "12000", "--batch-size", "5")
    assert code == 0 and report["status"] == "budget_exhausted", report
    committed = [b for b in report["batches"] if b["outcome"] == "committed"]
    assert committed and dream_cursor(isolated.workspace) == committed[-1]["cursor_to"] < 45
    assert report["errors"] == []


def test_a_budget_no_batch_fits_in_fails_the_run(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A budget spent inside the run's first batch: every run would pay for that batch and stop
    at the same place, so it is a failure (exit 1) saying what to change, not budget_exhausted
    with exit 0 run after run while no entry is ever dreamt."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(45))
    for _ in range(2):
        code, report = isolated.run_json("run", "--max-tokens", "500")
        assert code == 1 and report["status"] == "failed", report
        assert report["usage"]["total_tokens"] > 0 and dream_cursor(isolated.workspace) == 0
        (error,) = report["errors"]
        assert "ran out inside its first batch" in error and "--max-tokens" in error and "--batch-size" in error


def test_branch_option_commits_on_that_branch(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """--branch NAME creates the branch from HEAD and commits there; main keeps its commit."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(3))
    isolated.run("init")
    main_head = git(isolated.workspace, "rev-parse", "main").strip()
    code, report = isolated.run_json("run", "--branch", "dream/memory")
    assert code == 0
    assert git(isolated.workspace, "rev-parse", "main").strip() == main_head
    assert git(isolated.workspace, "rev-parse", "dream/memory").strip() == report["commits"][-1]
    assert git(isolated.workspace, "symbolic-ref", "--short", "HEAD").strip() == "dream/memory"


def test_workspace_inside_a_user_repository(isolated: Cli, offline_server: ScriptedLLMServer, tmp_path: Path) -> None:
    """Inside an existing repository Dream stages only memory paths, carries the history files the
    repository already tracks, and leaves the tree clean and other files untouched."""
    use_server(isolated, offline_server)
    repo = tmp_path / "repo"
    workspace = repo / "agent"
    isolated.env["DREAM_WORKSPACE"] = str(workspace)
    from dream_memory.testing import build_workspace

    build_workspace(workspace, history=sample_entries(3))
    (repo / "app.py").write_text("print('hi')\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    (repo / "app.py").write_text("print('work in progress')\n")
    code, _report = isolated.run_json("run")
    assert code == 0
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert "agent/memory/.dream_cursor" in changed and "agent/USER.md" in changed
    assert "app.py" not in changed
    assert git(repo, "status", "--porcelain").strip() == "M app.py"
    assert not (workspace / ".gitignore").exists()


def test_a_huge_entry_is_given_in_parts_never_cut(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """An entry larger than the batch budget reaches the model in several parts whose text adds up
    to the whole entry; the cursor then passes it."""
    use_server(isolated, offline_server)
    config = json.loads(Path(isolated.env["DREAM_CONFIG"]).read_text())
    config["agents"]["defaults"]["dream"] = {"batchTokens": 600}
    Path(isolated.env["DREAM_CONFIG"]).write_text(json.dumps(config))
    big = "\n".join(f"- [durable] line {i} of a long tool result with some padding text" for i in range(400))
    make_workspace(isolated, [big])
    code, report = isolated.run_json("run")
    assert code == 0, report
    phase1 = [r for r in offline_server.completion_requests() if not r.tools]
    assert len(phase1) > 1
    sent = "".join(
        r.messages[-1]["content"].split("## Conversation History\n\n", 1)[1].split("\n", 1)[1] for r in phase1
    )
    for i in (0, 199, 399):
        assert f"line {i} of a long" in sent
    assert dream_cursor(isolated.workspace) == 1


def test_offline_engine_runs_the_same_flow(isolated: Cli) -> None:
    """--model offline drains the same 45 entries in three commits with no network at all."""
    make_workspace(isolated, sample_entries(45))
    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0 and report["model"] == "offline"
    assert len(report["commits"]) == 3 and dream_cursor(isolated.workspace) == 45
    assert report["usage"]["cost_usd"] == 0.0


def test_no_model_configured_exits_2_with_guidance(isolated: Cli) -> None:
    """Real history is never consumed by an engine nobody chose: exit 2 explains how to choose."""
    make_workspace(isolated, sample_entries(2))
    result = isolated.run("run")
    assert result.exit_code == 2
    assert "no model is configured" in result.stderr and "--model" in result.stderr and "offline" in result.stderr
    assert dream_cursor(isolated.workspace) == 0


def test_missing_key_variable_is_exit_2_naming_it(isolated: Cli) -> None:
    """A preset whose key variable is unset fails before any lock, naming the variable."""
    config = {
        "modelPresets": {"fast": {"model": "openai/gpt-4o-mini", "apiKeyEnv": "MY_OPENAI_KEY"}},
        "agents": {"defaults": {"model": "fast"}},
    }
    path = isolated.home / "c.json"
    path.write_text(json.dumps(config))
    make_workspace(isolated, sample_entries(1))
    result = isolated.run("run", "--config", str(path))
    assert result.exit_code == 2 and "MY_OPENAI_KEY" in result.stderr
    assert not (isolated.workspace / "memory" / ".dream.lock").exists()


def test_prompt_shows_and_inits_the_guide(isolated: Cli) -> None:
    """`dream prompt` says which guide is in use; `init` creates prompts/dream.md once, never overwriting."""
    result = isolated.run("prompt")
    assert result.exit_code == 0 and "built-in guide" in result.stderr
    assert isolated.run("prompt", "init").exit_code == 0
    guide = isolated.workspace / "prompts" / "dream.md"
    guide.write_text("# My guide\nKeep only decisions.\n")
    isolated.run("prompt", "init")
    assert guide.read_text() == "# My guide\nKeep only decisions.\n"
    _code, shown = isolated.run_json("prompt", "--json")
    assert shown["source"] == "prompts/dream.md" and "Keep only decisions." in shown["text"]


def test_workspace_guide_reaches_the_model(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A non-empty prompts/dream.md replaces the built-in guide in phase 1's system message."""
    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(1), files={"prompts/dream.md": "ONLY KEEP DECISIONS.\n"})
    assert isolated.run("run").exit_code == 0
    system = offline_server.completion_requests()[0].messages[0]["content"]
    assert system.startswith("ONLY KEEP DECISIONS.") and "[SKIP]" in system


def test_report_file_and_locked_workspace(isolated: Cli, offline_server: ScriptedLLMServer, tmp_path: Path) -> None:
    """--report writes the same JSON; a held lock gives exit 75 with status locked and no change."""
    import fcntl

    use_server(isolated, offline_server)
    make_workspace(isolated, sample_entries(2))
    lock_path = isolated.workspace / "memory" / ".dream.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"pid": 4242, "host": "elsewhere", "started": "2026-01-01T00:00:00"}))
        handle.flush()
        result = isolated.run("run")
        assert result.exit_code == 75
        assert json.loads(result.stdout)["status"] == "locked"
        assert "pid 4242 on elsewhere" in result.stderr
    out = tmp_path / "out" / "report.json"
    code, report = isolated.run_json("run", "--report", str(out))
    assert code == 0 and json.loads(out.read_text()) == report


@pytest.mark.parametrize("bad", ["0", "21"])
def test_batch_size_is_bounded(isolated: Cli, bad: str) -> None:
    """--batch-size outside 1..20 is a usage error."""
    assert isolated.run("run", "--model", "offline", "--batch-size", bad).exit_code == 2
