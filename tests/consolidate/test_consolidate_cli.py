"""`dream consolidate` end to end: the CLI in-process, litellm over real HTTP to a scripted
OpenAI-compatible server on 127.0.0.1, real session files and a real workspace on disk."""

from __future__ import annotations

import errno
import json
import random
from pathlib import Path
from typing import Any

import pytest
from consolidate_helpers import (
    Cli,
    echo_responder,
    history,
    markers,
    memory_snapshot,
    progress,
    raw_text,
    session,
    turn,
    turns,
    use_server,
)

from dream_memory.adapters import fsutil
from dream_memory.adapters.tokens import default_counter
from dream_memory.core.consolidation import ENTRY_CAP_BYTES
from dream_memory.core.history import format_timestamp, parse_timestamp
from dream_memory.core.prompts import CONSOLIDATION_MARKER, INSTRUCTION_MARKER
from dream_memory.testing.llm_server import Fail, Reply, ScriptedLLMServer, ScriptedToolCall

REPORT_KEYS = {"status", "sessions", "usage", "errors"}
SESSION_KEYS = {"path", "key", "messages_archived", "entries", "raw_fallback", "tokens_before", "tokens_after"}


def _raw_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, message) of every message line, parsed here independently of the product."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            obj = json.loads(line)
            if obj.get("_type") != "metadata":
                found.append((number, obj))
    return found


def _assert_clean_cut(path: Path, next_line: int) -> None:
    """The consolidated part ends right before a user message, and no tool call before the cut
    has a result after it (nor the other way round)."""
    records = _raw_records(path)
    before = [m for n, m in records if n < next_line]
    after = [m for n, m in records if n >= next_line]
    if after:
        assert after[0]["role"] == "user", f"cut at line {next_line} is not the start of a user turn"
    calls_before = {c["id"] for m in before for c in m.get("tool_calls") or []}
    calls_after = {c["id"] for m in after for c in m.get("tool_calls") or []}
    assert not {m.get("tool_call_id") for m in after if m["role"] == "tool"} & calls_before
    assert not {m.get("tool_call_id") for m in before if m["role"] == "tool"} & calls_after


def test_real_sessions_are_cut_only_between_turns_never_inside_a_tool_group(
    isolated: Cli, offline_server: ScriptedLLMServer, fixture_sessions: list[Path]
) -> None:
    """Every real session of the fixtures, consolidated under ever smaller budgets and then with
    --force, is cut only at the start of a user turn and never between a tool call and its results;
    entries carry the session key and the timestamp of the slice's last message; every request is
    a consolidation request without tools."""
    use_server(isolated, offline_server)
    args = [arg for path in fixture_sessions for arg in ("--session", str(path))]
    cuts = 0
    budgets = (12_000, 8_000, 6_000, 4_000, 2_500, 1_500, 800, 400)
    for options in [["--budget", str(b)] for b in budgets] + [["--force"]]:
        code, report = isolated.consolidate(*args, *options)
        assert code == 0, report
        assert set(report) >= REPORT_KEYS and report["errors"] == []
        state = progress(isolated.workspace)["sessions"]
        for item in report["sessions"]:
            assert set(item) >= SESSION_KEYS
            path = Path(item["path"])
            if item["outcome"] != "consolidated":
                continue
            cuts += 1
            _assert_clean_cut(path, state[item["path"]]["next_line"])
            last = dict(_raw_records(path))[item["lines"]["last"]]
            written = [e for e in history(isolated.workspace) if e["cursor"] in item["entries"]]
            assert all(e["session_key"] == item["key"] for e in written)
            assert all(e["timestamp"] == format_timestamp(parse_timestamp(last["timestamp"])) for e in written)
    assert cuts >= 6
    requests = offline_server.completion_requests()
    assert requests and all(not r.tools and "tools" not in r.body for r in requests)
    assert all(CONSOLIDATION_MARKER in r.messages[-1]["content"] for r in requests)
    # What the agents had consolidated themselves (their last_consolidated) never reached the model.
    eevoo = next(p for p in fixture_sessions if p.name == "cli_direct.jsonl")
    first_seen = [m for _, m in _raw_records(eevoo)][:59]
    sent = "".join(r.messages[-1]["content"] for r in requests)
    assert first_seen[0]["content"] not in sent


@pytest.mark.parametrize(
    "failure",
    [
        Fail(500, "upstream exploded"),
        Reply(""),
        Reply("Internal Server Error: upstream timed out"),
        Reply(None, tool_calls=(ScriptedToolCall("read_file", '{"path": "USER.md"}'),)),
        Reply("- half a summary", finish_reason="length"),
        # A small model answering the transcript's last question instead of summarizing it.
        Reply("Sure! To deploy, run make release and then tag the commit."),
    ],
    ids=["http-500", "empty", "error-text", "tool-calls", "cut-off", "answers-the-question"],
)
def test_a_failing_model_archives_every_message_of_the_slice_raw(isolated: Cli, failure: Any) -> None:
    """When the model fails after its retries, or answers with something unusable, the slice is
    archived as [RAW] entries holding every message of it, the run succeeds and says why, and
    the part after the cut is left alone."""
    messages = turns(6, tools=2)
    tail = len(turn(5, tools=2))
    with ScriptedLLMServer(responder=lambda request: failure) as server:
        use_server(isolated, server, retries=1)
        session(isolated, "cli:direct", messages)
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0 and report["status"] == "ok", report
    item = report["sessions"][0]
    assert item["raw_fallback"] is True and item["messages_archived"] == len(messages) - tail
    assert any("archived raw" in e for e in report["errors"])
    entries = history(isolated.workspace)
    assert [e["cursor"] for e in entries] == item["entries"]
    assert entries[0]["content"].startswith(f"[RAW] {len(messages) - tail} messages\n")
    archived = raw_text(entries)
    slice_markers = [mk for m in messages[:-tail] for mk in markers(json.dumps(m))]
    assert len(slice_markers) == len(messages) - tail and all(archived.count(mk) == 1 for mk in slice_markers)
    assert not any(mk in archived for m in messages[-tail:] for mk in markers(json.dumps(m)))
    assert all(e["session_key"] == "cli:direct" for e in entries)


def test_nothing_writes_no_entry_but_advances_and_a_second_run_does_nothing(isolated: Cli) -> None:
    """A `(nothing)` summary appends no entry yet moves the progress past the slice; running again
    with nothing new calls no model and changes no file."""
    with ScriptedLLMServer(responder=lambda request: Reply("(nothing)")) as server:
        use_server(isolated, server)
        session(isolated, "cli:direct", turns(5))
        code, report = isolated.consolidate("--all", "--force")
        assert code == 0 and report["status"] == "ok"
        item = report["sessions"][0]
        assert item["outcome"] == "consolidated" and item["entries"] == [] and item["messages_archived"] == 8
        assert history(isolated.workspace) == []
        assert progress(isolated.workspace)["sessions"]["sessions/cli_direct.jsonl"]["messages"] == 8
        before = memory_snapshot(isolated.workspace)
        calls = len(server.completion_requests())
        for options in (["--force"], []):
            code, again = isolated.consolidate("--all", *options)
            assert code == 0 and again["status"] == "nothing_to_do", again
            assert again["sessions"][0]["outcome"] == "skipped"
        assert len(server.completion_requests()) == calls
        assert memory_snapshot(isolated.workspace) == before


def _big_payload(chars: int) -> str:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "kubernetes", "postgres", "42", "ü", "漢字"]
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def test_a_200000_character_tool_result_is_archived_whole_when_the_model_fails(isolated: Cli) -> None:
    """A 200,000-character tool result in a slice the model cannot summarize is archived raw in
    several entries of at most 16 KiB, which hold it exactly: nothing truncated, the run succeeds."""
    payload = _big_payload(200_000)
    messages = [*turn(0, tools=1), *turn(1), *turn(2)]
    messages[2]["content"] = payload
    with ScriptedLLMServer(responder=lambda request: Fail(503)) as server:
        use_server(isolated, server, retries=0)
        session(isolated, "cli:direct", messages)
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0 and report["status"] == "ok", report
    entries = history(isolated.workspace)
    assert len(entries) > 12
    assert all(len(e["content"].encode("utf-8")) <= ENTRY_CAP_BYTES for e in entries)
    assert all(
        e["content"].startswith(f"[RAW] 6 messages (part {i} of {len(entries)})\n") for i, e in enumerate(entries, 1)
    )
    assert payload in raw_text(entries)


def test_a_200000_character_tool_result_is_summarized_in_parts_within_the_window(isolated: Cli) -> None:
    """The same slice with a working model whose window is small is summarized in several calls,
    each within the window; together they carry the whole tool result, and the run succeeds."""
    payload = _big_payload(200_000)
    messages = [*turn(0, tools=1), *turn(1), *turn(2)]
    messages[2]["content"] = payload
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server, context_window=16_000, max_tokens=1_000)
        session(isolated, "cli:direct", messages)
        code, report = isolated.consolidate("--all", "--force")
        requests = server.completion_requests()
    assert code == 0 and report["status"] == "ok", report
    assert report["sessions"][0]["raw_fallback"] is False
    assert len(requests) > 2
    counter = default_counter()
    for request in requests:
        prompt = sum(counter.count(m["content"]) for m in request.messages)
        assert prompt <= 16_000 - 1_000
    # After the header and a blank line, before the instruction repeated at the end.
    bodies = [r.messages[-1]["content"].split("\n", 2)[2].split(f"\n\n{INSTRUCTION_MARKER}")[0] for r in requests]
    assert payload in "".join(bodies)
    assert all(len(e["content"].encode("utf-8")) <= ENTRY_CAP_BYTES for e in history(isolated.workspace))


def test_a_slice_larger_than_one_call_is_summarized_in_parts_that_cover_it_once(isolated: Cli) -> None:
    """A slice that exceeds the model's input budget goes out as parts marked "part i of n"; every
    message of the slice is sent in exactly one part, and every part's summary is kept."""
    messages = turns(40, tools=1, size=25)
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server, context_window=4_000, max_tokens=500)
        session(isolated, "cli:direct", messages)
        code, report = isolated.consolidate("--all", "--force")
        requests = server.completion_requests()
    assert code == 0, report
    n = len(requests)
    assert n > 2
    assert [f"(part {i} of {n})" in r.messages[-1]["content"].split("\n", 1)[0] for i, r in enumerate(requests, 1)]
    sent = [mk for r in requests for mk in markers(r.messages[-1]["content"])]
    expected = [mk for m in messages[:-4] for mk in markers(json.dumps(m))]
    assert sorted(sent) == sorted(expected)
    archived = "\n".join(e["content"] for e in history(isolated.workspace))
    assert all(archived.count(mk) == 1 for mk in expected)


def test_no_model_configured_and_missing_key_are_usage_errors(isolated: Cli) -> None:
    """Without a configured model, consolidate refuses (exit 2) and says how to choose one,
    `--model offline` included; a preset whose key variable is unset is exit 2 naming it."""
    session(isolated, "cli:direct", turns(3))
    result = isolated.run("consolidate", "--all")
    assert result.exit_code == 2
    assert "--model" in result.stderr and "offline" in result.stderr
    assert not (isolated.workspace / "memory" / "history.jsonl").exists()
    with ScriptedLLMServer() as server:
        use_server(isolated, server)
        del isolated.env["SCRIPTED_API_KEY"]
        result = isolated.run("consolidate", "--all")
    assert result.exit_code == 2 and "SCRIPTED_API_KEY" in result.stderr
    result = isolated.run("consolidate", "--model", "offline")
    assert result.exit_code == 2 and "--all" in result.stderr


def test_a_session_with_no_safe_cut_is_left_alone_and_says_why(isolated: Cli) -> None:
    """One user message followed by a long run of tool calls is over budget but cannot be cut
    anywhere safe: the session is skipped with the reason, nothing is written or sent."""
    messages = turn(0, tools=30, size=30)
    with ScriptedLLMServer() as server:
        use_server(isolated, server)
        session(isolated, "cli:direct", messages)
        code, report = isolated.consolidate("--all", "--budget", "200")
        assert server.completion_requests() == []
    assert code == 0 and report["status"] == "nothing_to_do"
    item = report["sessions"][0]
    assert item["outcome"] == "skipped" and "no safe cut" in item["reason"]
    assert item["tokens_before"] > 200 and item["entries"] == []
    assert history(isolated.workspace) == [] and not (isolated.workspace / "memory" / ".consolidation.json").exists()


def test_over_budget_leaves_about_half_the_budget(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A session over its budget is folded at the earliest turn boundary that leaves at most half
    the budget unconsolidated; a session within budget is left alone."""
    use_server(isolated, offline_server, budget=1_000)
    session(isolated, "long", turns(30, tools=1, size=10))
    session(isolated, "short", turns(2))
    code, report = isolated.consolidate("--all")
    assert code == 0
    by_key = {s["key"]: s for s in report["sessions"]}
    assert by_key["long"]["outcome"] == "consolidated" and by_key["long"]["tokens_before"] > 1_000
    assert 250 < by_key["long"]["tokens_after"] <= 500
    assert report["budget_tokens"] == 1_000 and report["budget_source"] == "agents.defaults.consolidate.budgetTokens"
    assert by_key["short"]["outcome"] == "skipped" and "within budget" in by_key["short"]["reason"]


def test_update_sessions_changes_only_the_last_consolidated_digits(
    isolated: Cli, offline_server: ScriptedLLMServer
) -> None:
    """--update-sessions writes last_consolidated into the metadata line and nothing else: every
    other byte of that line and every other line stay as they were; a second run writes nothing."""
    use_server(isolated, offline_server)
    path = isolated.workspace / "sessions" / "telegram_42.jsonl"
    path.parent.mkdir(parents=True)
    meta = (
        '{"_type": "metadata", "key": "telegram:42", "created_at": "2026-03-02T00:59:06.464904", '
        '"updated_at": "2026-03-02T02:19:07.053154", "metadata": {"lang": "ü", "n": [1, 2]}, "last_consolidated": 4}'
    )
    body = [json.dumps(m, ensure_ascii=False) for m in turns(6, tools=1)]
    body[3] = body[3].replace('", "', '",  "')  # odd spacing that a rewrite would normalise
    original = (meta + "\n" + "\n".join(body) + "\n").encode("utf-8")
    path.write_bytes(original)
    code, report = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0, report
    item = report["sessions"][0]
    value = progress(isolated.workspace)["sessions"]["sessions/telegram_42.jsonl"]["messages"]
    assert item["last_consolidated"] == value == 20 and item["session_file"].startswith("written")
    after = path.read_bytes()
    assert after == original.replace(b'"last_consolidated": 4}', b'"last_consolidated": 20}', 1)
    assert (path.parent / "telegram_42.jsonl.lock").exists()
    code, again = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0 and again["status"] == "nothing_to_do"
    assert path.read_bytes() == after


def test_update_sessions_adds_a_missing_last_consolidated_at_the_end(
    isolated: Cli, offline_server: ScriptedLLMServer
) -> None:
    """A metadata line without last_consolidated gets it appended; the rest stays as it was."""
    use_server(isolated, offline_server)
    path = session(isolated, "cli:direct", turns(3))
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] = '{"_type": "metadata", "key": "cli:direct"}'
    path.write_text("\n".join(lines), encoding="utf-8")
    code, _ = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0
    new = path.read_text(encoding="utf-8").split("\n")
    assert new[0] == '{"_type": "metadata", "key": "cli:direct", "last_consolidated": 4}'
    assert new[1:] == lines[1:]


def test_dry_run_changes_nothing_and_calls_no_model(isolated: Cli) -> None:
    """--dry-run reports the slice it would fold (lines, messages, tokens) and touches no file,
    not even to create the workspace's templates, and sends no request."""
    with ScriptedLLMServer() as server:
        use_server(isolated, server)
        session(isolated, "cli:direct", turns(8, tools=1))
        before = {p: p.read_bytes() for p in isolated.workspace.rglob("*") if p.is_file()}
        code, report = isolated.consolidate("--all", "--force", "--dry-run")
        assert server.completion_requests() == []
    assert code == 0 and report["status"] == "dry_run" and report["dry_run"] is True
    item = report["sessions"][0]
    assert item["outcome"] == "would_consolidate" and item["messages_archived"] == 28
    assert item["lines"] == {"first": 2, "last": 29} and item["tokens_after"] < item["tokens_before"]
    assert {p: p.read_bytes() for p in isolated.workspace.rglob("*") if p.is_file()} == before


def test_a_malformed_line_is_reported_with_its_number_and_archived_raw(isolated: Cli) -> None:
    """An unreadable line inside the slice is reported with its line number and kept verbatim in a
    [RAW] entry; one in the unconsolidated tail is reported and left for later."""
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        path = session(isolated, "cli:direct", turns(4))
        lines = path.read_text(encoding="utf-8").split("\n")
        broken = '{"role": "user", "content": "t1-broken half a li'
        lines.insert(6, broken)  # line 7, inside the second turn
        lines.insert(len(lines) - 2, "not json at all t3-tail")  # inside the last turn
        path.write_text("\n".join(lines), encoding="utf-8")
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0, report
    item = report["sessions"][0]
    assert [m["line"] for m in item["malformed_lines"]] == [7, len(lines) - 2]
    assert any("line 7" in w for w in report["warnings"])
    entries = history(isolated.workspace)
    raw = [e for e in entries if e["content"].startswith("[RAW] unreadable session line 7")]
    assert len(raw) == 1 and broken in raw[0]["content"]
    assert not any("t3-tail" in e["content"] for e in entries)
    assert any("t1-answer" in e["content"] for e in entries)


def test_the_first_run_starts_from_the_sessions_own_last_consolidated(isolated: Cli) -> None:
    """Messages the agent had already consolidated (its last_consolidated) are never sent again."""
    messages = turns(10)
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        session(isolated, "cli:direct", messages, last_consolidated=8)
        code, report = isolated.consolidate("--all", "--force")
        sent = "".join(r.messages[-1]["content"] for r in server.completion_requests())
    assert code == 0
    assert report["sessions"][0]["lines"]["first"] == 10 and report["sessions"][0]["messages_archived"] == 10
    assert "t0-" not in sent and "t3-" not in sent and "t4-user" in sent


def test_a_reset_session_starts_over_and_an_agent_ahead_is_followed(isolated: Cli) -> None:
    """A session file rewritten from scratch (the agent's /new) is consolidated again from its own
    last_consolidated, with a note; when the agent's own last_consolidated has moved past our
    progress, those messages are not archived a second time."""
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        path = session(isolated, "cli:direct", turns(4))
        assert isolated.consolidate("--all", "--force")[0] == 0
        session(isolated, "cli:direct", [turn(i)[j] for i in range(50, 53) for j in range(2)])
        code, report = isolated.consolidate("--all", "--force")
        assert code == 0
        item = report["sessions"][0]
        assert any("rewritten or reset" in n for n in item["notes"]) and item["messages_archived"] == 4
        session(isolated, "cli:direct", [turn(i)[j] for i in range(50, 56) for j in range(2)], last_consolidated=8)
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0
    item = report["sessions"][0]
    assert any("ahead" in n for n in item["notes"]) and item["lines"]["first"] == 10
    text = "\n".join(e["content"] for e in history(isolated.workspace))
    assert text.count("t50-user") == text.count("t51-user") == text.count("t54-user") == 1
    assert "t52-user" not in text and "t53-user" not in text and "t55-user" not in text
    assert path.exists()


def test_all_takes_every_session_file_and_ignores_lock_files(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """--all consolidates each sessions/*.jsonl once (a sessions/<file>.lock is no session)."""
    use_server(isolated, offline_server)
    for key in ("a", "b:c"):
        session(isolated, key, turns(3))
    (isolated.workspace / "sessions" / "a.jsonl.lock").write_text("")
    code, report = isolated.consolidate("--all", "--force", "--session", "sessions/a.jsonl")
    assert code == 0
    assert sorted(s["path"] for s in report["sessions"]) == ["sessions/a.jsonl", "sessions/b_c.jsonl"]
    assert sorted(s["key"] for s in report["sessions"]) == ["a", "b:c"]
    result = isolated.run("consolidate", "--session", "nope.jsonl", "--model", "offline")
    assert result.exit_code == 2 and "nope.jsonl" in result.stderr


def test_all_warns_of_a_session_name_it_cannot_read(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """A sessions/*.jsonl that is a link to a moved file (or a folder) is named in the report's
    warnings, not left out of it: the user learns that a session went unread."""
    use_server(isolated, offline_server)
    session(isolated, "a", turns(3))
    sessions = isolated.workspace / "sessions"
    (sessions / "moved.jsonl").symlink_to(isolated.workspace / "elsewhere" / "moved.jsonl")
    (sessions / "odd.jsonl").mkdir()
    code, report = isolated.consolidate("--all", "--force")
    assert code == 0
    assert [s["path"] for s in report["sessions"]] == ["sessions/a.jsonl"]
    warned = "\n".join(report["warnings"])
    assert "moved.jsonl is a link that leads to no file" in warned and "odd.jsonl is not a file" in warned


def test_after_a_reset_no_stale_position_is_written_back(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """When the agent resets a session (/new) to a short one, --update-sessions does not write the
    old file's position into it, and the stale progress is forgotten (no second detection)."""
    use_server(isolated, offline_server)
    path = session(isolated, "cli:direct", turns(6))
    assert isolated.consolidate("--all", "--force", "--update-sessions")[0] == 0
    assert json.loads(path.read_text(encoding="utf-8").split("\n")[0])["last_consolidated"] == 10
    session(isolated, "cli:direct", turn(60))
    code, report = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0 and report["sessions"][0]["outcome"] == "skipped"
    assert any("reset" in n for n in report["sessions"][0]["notes"])
    assert json.loads(path.read_text(encoding="utf-8").split("\n")[0])["last_consolidated"] == 0
    assert progress(isolated.workspace)["sessions"] == {}
    code, again = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0 and again["sessions"][0]["notes"] == []


def test_a_full_disk_fails_the_run_and_the_next_run_finishes_the_slice(
    isolated: Cli, offline_server: ScriptedLLMServer
) -> None:
    """When history.jsonl cannot be appended to (ENOSPC), the run stops with exit 1 and says so,
    the other sessions are not attempted, and the next run appends the planned slice once,
    without asking the model again, then carries on."""
    use_server(isolated, offline_server)
    first = turns(4, keep=True)
    second = [dict(m, content=str(m["content"]).replace("t", "s", 1)) for m in turns(4, keep=True)]
    session(isolated, "a", first)
    session(isolated, "b", second)

    def full_disk(site: str, path: Path) -> None:
        if site == "history.append":
            raise OSError(errno.ENOSPC, "No space left on device")

    fsutil.set_fault_injector(full_disk)
    try:
        code, report = isolated.consolidate("--all", "--force")
    finally:
        fsutil.set_fault_injector(None)
    assert code == 1 and report["status"] == "failed"
    assert [s["outcome"] for s in report["sessions"]] == ["failed", "not_attempted"]
    assert "no space left" in report["sessions"][0]["error"]
    assert history(isolated.workspace) == [] and progress(isolated.workspace)["pending"] is not None
    calls = len(offline_server.completion_requests())
    code, report = isolated.consolidate("--all", "--force")
    assert code == 0 and report["status"] == "ok", report
    assert report["recovered"][0]["outcome"] == "finished" and report["recovered"][0]["path"] == "sessions/a.jsonl"
    assert len(offline_server.completion_requests()) == calls + 1  # session b only
    text = "\n".join(e["content"] for e in history(isolated.workspace))
    for mk in markers(json.dumps(first[:-2])):
        assert text.count(mk) == 1, mk


def test_a_rejected_key_stops_the_run_and_archives_nothing(isolated: Cli) -> None:
    """A 401 is a configuration problem every session would hit: the run stops with exit 1, no
    [RAW] copies are written, no progress moves, and the sessions wait for a working model."""
    with ScriptedLLMServer(responder=lambda request: Fail(401, "invalid api key")) as server:
        use_server(isolated, server, retries=1)
        session(isolated, "cli:direct", turns(6))
        session(isolated, "tg:1", turns(6))
        code, report = isolated.consolidate("--all", "--force")
        assert len(server.completion_requests()) == 1
    assert code == 1 and report["status"] == "failed", report
    outcomes = sorted(s["outcome"] for s in report["sessions"])
    assert outcomes == ["failed", "not_attempted"]
    assert history(isolated.workspace) == []
    assert all(not s["raw_fallback"] for s in report["sessions"])


@pytest.mark.parametrize("rewrite", ["provider_state", "crlf", "spacing"])
def test_a_save_that_moves_or_re_serialises_lines_is_no_reset(isolated: Cli, rewrite: str) -> None:
    """nanobot's own saves re-write the whole file: a provider_state line added after the
    metadata moves every message down a line, and a save turns CRLF into LF or re-spaces the
    JSON. None of this is a reset (/new): the next run continues after the last consolidated
    message, found by what it holds, and never archives a message a second time."""
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        path = session(isolated, "cli:direct", turns(4))
        assert isolated.consolidate("--all", "--force")[0] == 0
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        lines += [json.dumps(m) for i in range(4, 6) for m in turn(i)]
        if rewrite == "provider_state":
            lines.insert(1, json.dumps({"_type": "provider_state", "kind": "responses", "payload": {"enc": "x"}}))
            text = "\n".join(lines) + "\n"
        elif rewrite == "crlf":
            text = "\r\n".join(lines) + "\r\n"
        else:
            text = "\n".join(json.dumps(json.loads(line), indent=None, separators=(",", ":")) for line in lines) + "\n"
        path.write_bytes(text.encode("utf-8"))
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0, report
    item = report["sessions"][0]
    assert item["messages_archived"] == 4, item
    assert any("re-written" in n for n in item["notes"]) and not any("reset" in n for n in item["notes"])
    text = "\n".join(e["content"] for e in history(isolated.workspace))
    assert [text.count(f"t{i}-user") for i in range(6)] == [1, 1, 1, 1, 1, 0], text  # the last turn waits


def test_a_consolidated_line_deleted_by_hand_skips_no_later_message(isolated: Cli) -> None:
    """With --update-sessions the file's own watermark is this consolidator's count: after a
    consolidated message is deleted by hand it counts one too many, and following it skipped the
    first message never archived. The run continues after the last consolidated message instead."""
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        path = session(isolated, "cli:direct", turns(4))
        assert isolated.consolidate("--all", "--force", "--update-sessions")[0] == 0
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        del lines[3]  # t1-user, consolidated already
        lines += [json.dumps(m) for i in range(4, 6) for m in turn(i)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, report = isolated.consolidate("--all", "--force", "--update-sessions")
    assert code == 0, report
    assert report["sessions"][0]["messages_archived"] == 4
    text = "\n".join(e["content"] for e in history(isolated.workspace))
    assert [text.count(f"t{i}-user") for i in range(6)] == [1, 1, 1, 1, 1, 0], text  # the last turn waits
