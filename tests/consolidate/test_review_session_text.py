"""Session text that is not plain UTF-8: half an emoji escaped in JSON (a lone surrogate, valid
JSON a UTF-16 client writes), and a line of bytes that are not UTF-8 at all. Neither may stop a
run, and history keeps what the session held."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from consolidate_helpers import Cli, echo_responder, history, progress, turn, use_server

from dream_memory.testing.llm_server import Fail, ScriptedLLMServer, Step

HALF_EMOJI = "\ud83d"  # the high half of a surrogate pair, alone
NOT_UTF8 = b"\xff\xfe caf\xe9 \xe2\x82 not json"


def _write(cli_env: Cli, name: str, lines: list[bytes]) -> Path:
    path = cli_env.workspace / "sessions" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode("ascii")  # a lone surrogate is written as its escape, as JSON allows


def _sessions_with_half_emoji(cli_env: Cli) -> None:
    """Session a_bad says half an emoji in each user turn; b_good, after it, is plain."""
    for name, extra in (("a_bad", f" {HALF_EMOJI}"), ("b_good", "")):
        messages = [m for i in range(6) for m in turn(i, keep=True)]
        for m in messages:
            if m["role"] == "user":
                m["content"] = f"{name} {m['content']}{extra}"
        _write(
            cli_env,
            name,
            [_json({"_type": "metadata", "key": f"cli:{name}", "last_consolidated": 0})] + [_json(m) for m in messages],
        )


def _entries_of(cli_env: Cli, key: str) -> list[str]:
    return [str(e["content"]) for e in history(cli_env.workspace) if e.get("session_key") == key]


def test_half_an_emoji_in_a_session_stops_no_consolidation_with_the_offline_engine(isolated: Cli) -> None:
    """With `--model offline`, a session holding a lone surrogate is consolidated like any other,
    the session after it too; the summary keeps it (escaped in history.jsonl); no traceback; the
    next run finds the progress file readable and nothing left to do."""
    _sessions_with_half_emoji(isolated)
    done = isolated.process("consolidate", "--all", "--force", "--model", "offline")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert [s["outcome"] for s in report["sessions"]] == ["consolidated", "consolidated"], report
    bad = _entries_of(isolated, "cli:a_bad")
    assert bad and HALF_EMOJI in "\n".join(bad)
    assert _entries_of(isolated, "cli:b_good")
    (isolated.workspace / "memory" / "history.jsonl").read_bytes().decode("utf-8")  # strict: still UTF-8
    code, again = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0 and again["status"] == "nothing_to_do", again
    assert set(progress(isolated.workspace)["sessions"]) == {"sessions/a_bad.jsonl", "sessions/b_good.jsonl"}


def test_half_an_emoji_reaches_a_remote_model_as_a_replacement_character(isolated: Cli) -> None:
    """Over HTTP the request is sent (U+FFFD in place of the half emoji, which UTF-8 cannot carry)
    instead of failing as a bad request that stopped the run; both sessions are summarized."""
    _sessions_with_half_emoji(isolated)
    with ScriptedLLMServer(responder=echo_responder) as server:
        use_server(isolated, server)
        code, report = isolated.consolidate("--all", "--force")
        sent = [
            str(r.body["messages"][-1]["content"]) for r in server.completion_requests() if isinstance(r.body, dict)
        ]
    assert code == 0, report
    assert [s["outcome"] for s in report["sessions"]] == ["consolidated", "consolidated"], report
    assert report["errors"] == [] and not any(s["raw_fallback"] for s in report["sessions"])
    assert len(sent) == 2 and "a_bad t0-user question - user prefers this \ufffd" in sent[0]
    assert "\ufffd" in "\n".join(_entries_of(isolated, "cli:a_bad"))


def test_a_raw_archive_keeps_half_an_emoji_verbatim(isolated: Cli) -> None:
    """When the model fails, the slice archived raw holds the half emoji exactly as the session
    did (escaped in history.jsonl), not a replacement character."""
    _sessions_with_half_emoji(isolated)

    def overloaded(request: dict[str, Any]) -> Step:
        return Fail(503, "model overloaded")

    with ScriptedLLMServer(responder=overloaded) as server:
        use_server(isolated, server, retries=0)
        code, report = isolated.consolidate("--all", "--force")
    assert code == 0, report
    assert [s["raw_fallback"] for s in report["sessions"]] == [True, True], report
    raw = "\n".join(_entries_of(isolated, "cli:a_bad"))
    assert f"user: a_bad t0-user question - user prefers this {HALF_EMOJI}\n" in raw
    assert "\ufffd" not in raw


def test_an_unreadable_line_of_bytes_that_are_not_utf8_is_archived_with_its_bytes_recoverable(
    isolated: Cli,
) -> None:
    """A session line that is not UTF-8 is archived verbatim: its entry's text, encoded back with
    surrogateescape, is the line's bytes exactly (no U+FFFD in place of them)."""
    messages = [_json(m) for i in range(3) for m in turn(i, keep=True)]
    messages.insert(3, NOT_UTF8)  # after the second turn's question
    _write(isolated, "cli_direct", [_json({"_type": "metadata", "key": "cli:direct"}), *messages])
    code, report = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0, report
    assert [m["line"] for m in report["sessions"][0]["malformed_lines"]] == [5]
    raw = [e for e in _entries_of(isolated, "cli:direct") if e.startswith("[RAW] unreadable session line 5")]
    assert len(raw) == 1, history(isolated.workspace)
    kept = raw[0].split(") ", 1)[1]
    assert kept.encode("utf-8", "surrogateescape") == NOT_UTF8


def test_progress_recorded_at_a_line_that_is_not_utf8_still_applies(isolated: Cli) -> None:
    """Progress recorded when such a line was read with U+FFFD in place of its bytes (its
    fingerprint of that text) still finds the line: nothing is archived again, no reset."""
    messages = [_json(m) for i in range(3) for m in turn(i, keep=True)]
    messages.insert(2, NOT_UTF8)  # line 4, right before the second turn
    _write(isolated, "cli_direct", [_json({"_type": "metadata", "key": "cli:direct"}), *messages])
    seen_as = hashlib.sha256(NOT_UTF8.decode("utf-8", "replace").encode("utf-8")).hexdigest()[:16]
    state = {
        "version": 1,
        "sessions": {
            "sessions/cli_direct.jsonl": {
                "key": "cli:direct",
                "next_line": 5,
                "messages": 2,
                "last_line": 4,
                "last_sha": seen_as,
                "updated": "2026-04-03T10:00:00+00:00",
                "last_id": seen_as,
            }
        },
        "pending": None,
    }
    (isolated.workspace / "memory" / ".consolidation.json").write_text(json.dumps(state), "utf-8")
    code, report = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0, report
    item = report["sessions"][0]
    assert item["outcome"] == "consolidated" and item["lines"] == {"first": 5, "last": 6}, item
    assert item["notes"] == [] and item["malformed_lines"] == []
    assert "t0-user" not in "\n".join(_entries_of(isolated, "cli:direct"))


def test_dream_learns_from_a_summary_holding_half_an_emoji_with_the_offline_engine(isolated: Cli) -> None:
    """The consolidated summary keeps the half emoji; `dream run --model offline` then files the
    preference (U+FFFD in its place, as a remote model is sent it) instead of failing the batch
    on every run because each edit quoting it was refused."""
    assert isolated.run("init").exit_code == 0
    _sessions_with_half_emoji(isolated)
    code, report = isolated.consolidate("--all", "--force", "--model", "offline")
    assert code == 0, report
    run = isolated.run("run", "--model", "offline", "--json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["status"] == "ok"
    learnt = (isolated.workspace / "USER.md").read_text(encoding="utf-8")
    assert "a_bad t0-user question" in learnt.lower() and "\ufffd" in learnt
