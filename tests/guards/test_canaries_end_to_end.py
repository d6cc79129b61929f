"""End to end: fake secrets of every promised kind planted everywhere an agent's data enters,
none comes out.

The canaries of ``dream_memory.testing.canaries`` (a value of every kind the guard promises: AWS,
GitHub, Slack, Discord webhooks, PEM keys, JWT, passwords in URLs, in assignments and in prose,
Twilio, PyPI, Hugging Face, Vault, DigitalOcean, Shopify, authorization headers, ...) go in
through every door: `dream append`, lines an agent wrote into history.jsonl itself, session files
consolidated by `dream consolidate` (summarized by the model, and archived raw when the model
fails), and the model's own replies (phase-1 facts, phase-2 write_file and edit_file arguments,
an edit big enough to be held for review, and the paths and tool names of calls Dream refuses).
Then consolidate and Dream run as real processes against a model server on 127.0.0.1, with
history compaction. No canary value may appear in a tracked file or its name, in any commit
(`git log -p --all`, messages included), in a history entry the product wrote, in
memory/.consolidation.json, memory/.dream_state.json or memory/.dream_held/, in a report on
stdout or in a `--report` file, in a log line on stderr, or in what `dream log` and
`dream status` print afterwards. The files the agent wrote are input and stay as they are.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from dream_memory.adapters.offline import OfflineModel
from dream_memory.core.history import HistoryEntry
from dream_memory.core.prompts import CONSOLIDATION_MARKER, HISTORY_MARKER
from dream_memory.testing import build_workspace, clean_env, write_session
from dream_memory.testing.canaries import CANARIES, CONTEXT_KINDS, Canary
from dream_memory.testing.invariants import read_ledger, versioned_on_disk
from dream_memory.testing.llm_server import Fail, Reply, ScriptedLLMServer, ScriptedToolCall, from_chat_model

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]

# Every kind goes through every door over the test's runs; each canary enters through one door.
APPENDED = CANARIES[0::4]  # through `dream append`
AGENT_HISTORY = CANARIES[1::4]  # lines an agent wrote into history.jsonl itself
SESSIONS = CANARIES[2::4]  # in session files, consolidated
MODEL = CANARIES[3::4]  # in the model's replies
assert len(CANARIES) >= 80 and len(MODEL) >= 8


def one_line(canary: Canary) -> str:
    return canary.text.replace("\n", " ")


class Model:
    """The model server's answers: the offline engine, with canaries added to its replies.

    Consolidation: every transcript line is echoed back as a bullet (so each secret in a session
    reaches the summary), except for the session holding ``fail_marker``, which gets a 503 (its
    slice is archived raw). Dream phase 1: the engine's facts plus facts carrying canaries (first
    batch). Phase 2: the engine's edits plus write_file / edit_file calls carrying canaries (first
    batch), and in the second batch an edit that empties USER.md, which the deletion guard holds.
    """

    def __init__(self, workspace: Path, fail_marker: str) -> None:
        self.workspace = workspace
        self.fail_marker = fail_marker
        self.offline = from_chat_model(OfflineModel())
        self.phase1 = 0
        self.phase2_batches = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        prompt = str(messages[-1].get("content") or "") if messages else ""
        if CONSOLIDATION_MARKER in prompt:
            if self.fail_marker in prompt:
                return Fail(503, "model overloaded")
            body = prompt.split(CONSOLIDATION_MARKER, 1)[1]
            return Reply("\n".join(f"- {line}" for line in body.splitlines() if line.strip()) or "(nothing)")
        answer = self.offline(request)
        if not request.get("tools") and HISTORY_MARKER in prompt:
            self.phase1 += 1
            if self.phase1 == 1 and isinstance(answer, Reply):
                extra = [f"[USER] Noted from the chat: {one_line(MODEL[0])}", f"[MEMORY] {one_line(MODEL[1])}"]
                extra += [f"[ENTITY] vault: {one_line(MODEL[2])}", f"[OBSERVATION] {one_line(MODEL[3])}"]
                # Facts naming the files phase 2 writes below: Dream refuses edits to files no
                # fact of the batch goes to.
                extra += ["[ENTITY] credentials: where the rotation notes live", "[SKILL] rotate-keys: rotate keys"]
                facts = [] if (answer.content or "").strip() == "[SKIP]" else [answer.content or ""]
                return Reply("\n".join([*facts, *extra]))
            return answer
        if request.get("tools") and isinstance(answer, Reply) and not any(m.get("role") == "tool" for m in messages):
            self.phase2_batches += 1
            calls = list(answer.tool_calls)
            if self.phase2_batches == 1:
                own = ("entities/credentials.md", "skills/rotate-keys/SKILL.md")
                calls = [c for c in calls if json.loads(c.arguments).get("path") not in own]
                secrets = "\n".join(f"- {c.text}" for c in MODEL[4:])
                calls.append(
                    ScriptedToolCall(
                        "write_file",
                        json.dumps({"path": "entities/credentials.md", "content": f"# Credentials\n\n{secrets}\n"}),
                    )
                )
                skill = f"---\nname: rotate-keys\ndescription: rotate keys\n---\n\nUse {one_line(MODEL[5])} when rotating.\n"
                calls.append(
                    ScriptedToolCall(
                        "write_file", json.dumps({"path": "skills/rotate-keys/SKILL.md", "content": skill})
                    )
                )
            elif self.phase2_batches == 2:
                current = (self.workspace / "USER.md").read_text(encoding="utf-8")
                replacement = f"# User\n\n- {MODEL[6].text}\n"
                calls.insert(
                    0,
                    ScriptedToolCall(
                        "edit_file", json.dumps({"path": "USER.md", "old_text": current, "new_text": replacement})
                    ),
                )
            if calls:
                return Reply(answer.content, tool_calls=tuple(calls))
        return answer


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DREAM, *args], env=env, input=stdin, capture_output=True, text=True, timeout=180)


def leaked(text: str, canaries: Iterable[Canary] = CANARIES) -> list[str]:
    """Kinds of the canaries whose value, or any long line of it, appears in ``text`` (never the
    values themselves)."""
    return [
        c.kind
        for c in canaries
        if c.value in text or any(len(line) >= 16 and line in text for line in c.value.splitlines())
    ]


def test_no_canary_reaches_a_commit_a_written_entry_a_report_or_a_log(tmp_path: Path) -> None:
    """Secrets of every kind in appends, agent-written history, sessions and model replies: after
    consolidate and Dream, none is in any tracked file, commit, entry the product wrote, progress
    file, held batch, report or log line; reports count the redactions; the agent's own files are
    unchanged."""
    ws = tmp_path / "ws"
    agent_lines = [
        HistoryEntry(i, "2026-04-03T09:00:00", f"- [durable] User noted: {c.text}", "telegram:42").to_json_line()
        for i, c in enumerate(AGENT_HISTORY, start=1)
    ]
    build_workspace(ws)
    (ws / "memory" / "history.jsonl").write_text("".join(line + "\n" for line in agent_lines), encoding="utf-8")
    sessions = [
        write_session(
            ws,
            "cli:ops",
            [
                m
                for i, c in enumerate(SESSIONS[:5])
                for m in (
                    {"role": "user", "content": f"Remember this: {c.text}", "timestamp": f"2026-04-03T10:{i:02d}:00"},
                    {
                        "role": "assistant",
                        "content": "Noted, I will remember it.",
                        "timestamp": f"2026-04-03T10:{i:02d}:05",
                    },
                )
            ]
            + [{"role": "user", "content": "Thanks.", "timestamp": "2026-04-03T10:59:00"}],
        ),
        write_session(
            ws,
            "cli:failing",
            [
                m
                for i, c in enumerate(SESSIONS[5:])
                for m in (
                    {"role": "user", "content": f"FAILME: keep {c.text}", "timestamp": f"2026-04-03T11:{i:02d}:00"},
                    {"role": "assistant", "content": "Stored.", "timestamp": f"2026-04-03T11:{i:02d}:05"},
                )
            ]
            + [{"role": "user", "content": "Bye.", "timestamp": "2026-04-03T11:59:00"}],
        ),
    ]
    session_bytes = {p: p.read_bytes() for p in sessions}
    home = tmp_path / "home"
    home.mkdir()
    outputs: list[tuple[str, str, str]] = []  # (command, stdout, stderr)

    with ScriptedLLMServer(responder=Model(ws, "FAILME")) as server:
        config = {
            "agents": {
                "defaults": {"model": "scripted", "dream": {"maxHistoryEntries": 10, "deletionGuard": {"minLines": 3}}}
            },
            "modelPresets": {
                "scripted": {
                    "model": "openai/scripted-model",
                    "apiBase": server.base_url,
                    "apiKeyEnv": "SCRIPTED_API_KEY",
                    "maxRetries": 0,
                    "timeout": 30,
                }
            },
        }
        (home / "dream.json").write_text(json.dumps(config), encoding="utf-8")
        env = clean_env(
            home,
            DREAM_WORKSPACE=str(ws),
            DREAM_CONFIG=str(home / "dream.json"),
            SCRIPTED_API_KEY="test-key-not-secret",
        )
        appended_cursors = []
        for c in APPENDED:
            done = run(env, "append", "-", "--session-key", "cli:direct", stdin=f"- [durable] User shared: {c.text}\n")
            assert done.returncode == 0, done.stderr
            appended_cursors.append(int(done.stdout.strip()))
            outputs.append(("append", "", done.stderr))
        consolidated = run(env, "consolidate", "--all", "--force")
        assert consolidated.returncode == 0, consolidated.stderr
        outputs.append(("consolidate", consolidated.stdout, consolidated.stderr))
        before_dream = set((ws / "memory" / "history.jsonl").read_text(encoding="utf-8").split("\n"))
        dreamt = run(env, "run", "--batch-size", "6", "--report", str(tmp_path / "report.json"))
        assert dreamt.returncode == 0, dreamt.stderr
        outputs.append(("run", dreamt.stdout, dreamt.stderr))
        outputs.append(("--report file", (tmp_path / "report.json").read_text(encoding="utf-8"), ""))
        again = run(env, "run")
        outputs.append(("run again", again.stdout, again.stderr))
        for command in (["log"], ["status", "--json"], ["restore"]):
            shown = run(env, *command)
            outputs.append((" ".join(command), shown.stdout, shown.stderr))

    consolidate_report = json.loads(consolidated.stdout)
    dream_report = json.loads(dreamt.stdout)
    # The pipeline really ran: both slices archived (one raw), several batches, one held, compaction.
    items = {s["key"]: s for s in consolidate_report["sessions"]}
    assert items["cli:ops"]["outcome"] == "consolidated" and not items["cli:ops"]["raw_fallback"]
    assert items["cli:failing"]["outcome"] == "consolidated" and items["cli:failing"]["raw_fallback"]
    assert dream_report["status"] in ("ok", "held") and len(dream_report["batches"]) >= 3
    assert dream_report["held"], "the edit emptying USER.md should have been held for review"
    assert dream_report["compaction"] and dream_report["compaction"]["archived"] > 0
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "nothing_to_do"
    assert "[REDACTED:" in (ws / "entities" / "credentials.md").read_text(encoding="utf-8")

    # Redactions are counted per kind, never with values.
    assert sum(consolidate_report["redactions"].values()) >= len(SESSIONS)
    assert sum(dream_report["redactions"].values()) >= len(MODEL)
    assert all(
        kind.replace("_", "").isalnum() for kind in {**consolidate_report["redactions"], **dream_report["redactions"]}
    )

    # Nothing versioned, on disk or in any commit.
    for rel, data in versioned_on_disk(ws).items():
        assert leaked(data.decode("utf-8", "replace")) == [], rel
    log = subprocess.run(
        ["git", "-C", str(ws), "log", "-p", "--all", "--format=commit %H%n%B"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "dream: " in log and "[REDACTED:" in log
    assert leaked(log) == [], "a secret reached a commit"
    held = ws / "memory" / ".dream_held"
    assert held.is_dir() and any(held.rglob("*"))
    for path in held.rglob("*"):
        if path.is_file():
            assert leaked(path.read_text(encoding="utf-8", errors="replace")) == [], path
    progress = ws / "memory" / ".consolidation.json"
    assert leaked(progress.read_text(encoding="utf-8")) == []

    # Reports and logs of every command.
    for command, stdout, stderr in outputs:
        assert leaked(stdout) == [], f"{command} printed a secret in its report"
        assert leaked(stderr) == [], f"{command} logged a secret"

    # History: entries the Consolidator wrote are clean wherever compaction put them; compaction
    # only moved lines (the archive holds no line that was not in history.jsonl before).
    ledger = read_ledger(ws)
    written = [e for e in ledger.entries if e.session_key in ("cli:ops", "cli:failing")]
    assert len(written) >= 2
    assert all(leaked(e.content) == [] for e in written)
    archive = ws / "memory" / "archive"
    for path in archive.glob("history-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert line in before_dream, f"{path.name} holds a line compaction did not move from history.jsonl"

    # The agent's own files are input, left exactly as written.
    assert all(p.read_bytes() == data for p, data in session_bytes.items())
    all_lines = "\n".join(
        p.read_text(encoding="utf-8") for p in [ws / "memory" / "history.jsonl", *archive.glob("history-*.jsonl")]
    )
    assert all(line in all_lines for line in agent_lines)

    # `dream append` entries: redacted at the door, before the line is written.
    appended = [e for e in ledger.entries if e.cursor in appended_cursors]
    assert len(appended) == len(APPENDED)
    assert not any(leaked(e.content) for e in appended)


def _names_itself(canary: Canary) -> bool:
    """A value recognisable on its own (a prefixed token, a webhook URL) that fits in a path; the
    other kinds are secrets only by their context ("password = ...", "auth token ...")."""
    return canary.kind not in CONTEXT_KINDS and re.fullmatch(r"[A-Za-z0-9_+=:~.-]+", canary.value) is not None


class RefusedCallsModel:
    """A model whose every phase-2 call is refused, with canaries in what it sends.

    Phase 1 gives one fact. Phase 2 answers with tool calls Dream refuses: read_file and write_file
    of an entity named after a secret (a path Dream's rules would otherwise allow), a call to a
    tool whose name holds secrets given away by their context ("my sudo password is ..."), and a
    write_file to a path outside memory holding many self-evident tokens. Its next reply has no
    tool calls, so the batch fails on its content ("every edit was rejected; last: <the last
    refusal>"), run after run, until the third run sets it aside. Each run ends with a different
    refusal, so each kind of echo reaches the report and the state once.
    """

    def __init__(self, named: list[Canary], in_context: list[Canary]) -> None:
        self.named = named
        self.in_context = in_context
        self.runs = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        if not request.get("tools"):
            self.runs += 1
            return Reply("[MEMORY] The deploy runs from main.")
        if any(m.get("role") == "tool" for m in messages):
            return Reply("I could not make the edits.")
        first, second, *rest = self.named
        refusals = [
            ScriptedToolCall(
                "write_file",
                json.dumps({"path": "notes/" + "/".join(c.value for c in rest) + ".md", "content": "- a note\n"}),
            ),
            ScriptedToolCall(" ; ".join(c.text.replace("\n", " ") for c in self.in_context), '{"path": "USER.md"}'),
            ScriptedToolCall("read_file", json.dumps({"path": f"entities/{first.value}.md"})),
        ]
        last = refusals[(self.runs - 1) % len(refusals)]
        calls = [
            ScriptedToolCall("write_file", json.dumps({"path": f"entities/{second.value}.md", "content": "# x\n"})),
            *(c for c in refusals if c is not last),
            last,
        ]
        return Reply(None, tool_calls=tuple(calls))


def test_secrets_in_refused_tool_calls_stay_out_of_reports_logs_state_and_commits(tmp_path: Path) -> None:
    """A model whose refused tool calls carry secrets of every kind in their paths and tool names,
    three runs in a row until its batch is set aside: no canary reaches a report (stdout or
    --report), stderr, memory/.dream_state.json, a commit (messages included), a tracked file's
    name, or what `dream log` and `dream status` print; an entity named after a token is refused,
    and the batch really failed and was set aside."""
    ws = tmp_path / "ws"
    build_workspace(ws, history=["- [durable] The deploy runs from main."])
    home = tmp_path / "home"
    home.mkdir()
    named = [c for c in CANARIES if _names_itself(c)]
    in_context = [c for c in CANARIES if c.kind in CONTEXT_KINDS]
    assert len({c.kind for c in named}) + len({c.kind for c in in_context}) >= 50
    outputs: list[tuple[str, str, str]] = []
    states: list[str] = []
    with ScriptedLLMServer(responder=RefusedCallsModel(named, in_context)) as server:
        config = {
            "agents": {"defaults": {"model": "scripted"}},
            "modelPresets": {
                "scripted": {
                    "model": "openai/scripted-model",
                    "apiBase": server.base_url,
                    "apiKeyEnv": "SCRIPTED_API_KEY",
                    "maxRetries": 0,
                }
            },
        }
        (home / "dream.json").write_text(json.dumps(config), encoding="utf-8")
        env = clean_env(
            home, DREAM_WORKSPACE=str(ws), DREAM_CONFIG=str(home / "dream.json"), SCRIPTED_API_KEY="not-secret"
        )
        reports = []
        for attempt in range(3):
            report_file = tmp_path / f"report-{attempt}.json"
            done = run(env, "run", "--report", str(report_file))
            outputs.append((f"run {attempt + 1}", done.stdout, done.stderr))
            outputs.append((f"--report of run {attempt + 1}", report_file.read_text(encoding="utf-8"), ""))
            reports.append(json.loads(done.stdout))
            states.append((ws / "memory" / ".dream_state.json").read_text(encoding="utf-8"))
        for command in (["log"], ["status", "--json"], ["status"], ["restore"]):
            shown = run(env, *command)
            outputs.append((" ".join(command), shown.stdout, shown.stderr))

    # The batch really failed on its content twice, then was set aside; each refusal is named.
    assert [r["status"] for r in reports[:2]] == ["failed", "failed"], reports[0]["errors"]
    assert reports[2]["set_aside"] and reports[2]["commits"], reports[2]
    errors = [r["errors"][0] if r["errors"] else r["set_aside"][0]["reason"] for r in reports]
    assert "is not a memory file Dream may change" in errors[0] and "[REDACTED:" in errors[0]
    assert "[REDACTED:password]" in errors[1] and "[REDACTED:secret_assignment]" in errors[1]
    assert "secret-shaped" in errors[2]
    assert all("[REDACTED:" in state for state in states[:2])

    canaries = [*named, *in_context]
    for command, stdout, stderr in outputs:
        assert leaked(stdout, canaries) == [], f"{command} printed a secret"
        assert leaked(stderr, canaries) == [], f"{command} logged a secret"
    for state in states:
        assert leaked(state, canaries) == [], "a secret reached memory/.dream_state.json"
    log = subprocess.run(
        ["git", "-C", str(ws), "log", "-p", "--all", "--format=commit %H%n%B", "--name-status"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "dream: set aside" in log
    assert leaked(log, canaries) == [], "a secret reached a commit"
    tracked = subprocess.run(["git", "-C", str(ws), "ls-files"], capture_output=True, text=True, env=env, check=True)
    assert leaked(tracked.stdout, canaries) == [], "a secret became a file name"
