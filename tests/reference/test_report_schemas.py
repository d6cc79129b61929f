"""The JSON reports an integrator parses are exactly what docs/reference/report.schema.json says.

Every report here comes from a real run: `dream run`, `dream consolidate` and `dream eval`
driven in process through the CLI, against the built-in offline engine or a scripted
OpenAI-compatible server on 127.0.0.1, on real workspaces with real git repositories and locks.
The schema allows no undeclared key, so a key a report gains or loses without its type in
dream_memory.app.reports (and the regenerated schema) fails here.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from dream_memory.adapters.offline import OfflineModel
from dream_memory.app import consolidate as consolidate_module
from dream_memory.app import dream as dream_module
from dream_memory.app import reports
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import build_workspace, clean_env, write_session
from dream_memory.testing.llm_server import Fail, Reply, ScriptedLLMServer, from_chat_model, tool_call

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "docs" / "reference" / "report.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
# `dream-run` as a process, whether or not the console scripts are on PATH.
DREAM_RUN = [sys.executable, "-c", "from dream_memory.entrypoints.cli import run_main; run_main()"]


def validator(definition: str) -> Draft202012Validator:
    """A validator of one report kind: the document's $defs, entered at that definition."""
    return Draft202012Validator(
        {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{definition}"}
    )


def assert_valid(report: dict[str, Any], definition: str) -> None:
    """The report matches its own definition, and the whole document (oneOf) picks exactly it."""
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(definition).iter_errors(report)]
    assert errors == [], errors
    Draft202012Validator(SCHEMA).validate(report)


class Env:
    """`dream` in process with a HOME of its own, no configuration and no model chosen."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.workspace = tmp_path / "ws"
        self.env = {
            "HOME": str(self.home),
            "DREAM_WORKSPACE": str(self.workspace),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DREAM_MODEL": "",
            "DREAM_CONFIG": "",
            "DREAM_API_BASE": "",
            "DREAM_API_KEY": "",
            "GIT_CONFIG_GLOBAL": str(self.home / "gitconfig"),
        }

    def use(self, server: ScriptedLLMServer) -> None:
        config = {
            "agents": {"defaults": {"model": "scripted"}},
            "modelPresets": {
                "scripted": {
                    "model": "openai/scripted-model",
                    "apiBase": server.base_url,
                    "apiKeyEnv": "SCRIPTED_API_KEY",
                    "maxRetries": 1,
                    "retryBaseSeconds": 0.01,
                    "timeout": 5,
                }
            },
        }
        path = self.home / "dream.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        self.env |= {"DREAM_CONFIG": str(path), "SCRIPTED_API_KEY": "test-key-not-secret"}

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)
        return result.exit_code, json.loads(result.stdout)


def entries(n: int) -> list[str]:
    return [f"- [durable] User fact number {i}: prefers option {i} for setting {i}." for i in range(1, n + 1)]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def offline_server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        yield server


def test_the_checked_in_schema_is_what_the_report_types_generate() -> None:
    """docs/reference/report.schema.json is exactly what scripts/gen_report_schema.py renders from
    dream_memory.app.reports, and is itself a valid draft 2020-12 schema."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_report_schema.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    Draft202012Validator.check_schema(SCHEMA)
    assert set(SCHEMA["$defs"]) >= {"DreamRun", "Consolidate", "Eval"}


def test_the_schema_statuses_are_the_ones_the_code_sets() -> None:
    """Every status constant of app/dream.py and app/consolidate.py is in the schema's enum and the
    enum holds nothing else, so a new status cannot reach a report undocumented."""
    # The modules that define the report classes (the packages re-export them from there).
    dream_home = sys.modules[dream_module.DreamReport.__module__]
    consolidate_home = sys.modules[consolidate_module.ConsolidateReport.__module__]
    for module, literal in ((dream_home, reports.DreamStatus), (consolidate_home, reports.ConsolidateStatus)):
        constants = {value for name, value in vars(module).items() if name.startswith("STATUS_")}
        assert constants == set(typing.get_args(literal)), module.__name__
    outcomes = {value for name, value in vars(consolidate_home).items() if name.startswith("OUTCOME_")}
    assert outcomes == set(typing.get_args(reports.SessionOutcome))


def test_a_run_that_commits_and_one_with_nothing_pending(env: Env, offline_server: ScriptedLLMServer) -> None:
    """status ok (25 entries, two committed batches, through the scripted server) and then
    nothing_to_do: both reports match the DreamRun schema."""
    env.use(offline_server)
    build_workspace(env.workspace, history=entries(25))
    code, report = env.json("run")
    assert (code, report["status"], [b["outcome"] for b in report["batches"]]) == (0, "ok", ["committed"] * 2)
    assert report["changed"] is True and len(report["commits"]) == 2
    assert_valid(report, "DreamRun")
    code, again = env.json("run")
    assert (code, again["status"], again["batches"]) == (0, "nothing_to_do", [])
    assert_valid(again, "DreamRun")


def test_a_run_of_the_offline_engine_with_nothing_worth_keeping(env: Env) -> None:
    """`--model offline` on entries with nothing durable: one nothing_new batch, changed false."""
    build_workspace(env.workspace, history=["(nothing)", "- [ephemeral] asked for the time", "- [skip] said thanks"])
    code, report = env.json("run", "--model", "offline")
    assert code == 0 and report["model"] == "offline"
    assert [b["outcome"] for b in report["batches"]] == ["nothing_new"] and report["changed"] is False
    assert_valid(report, "DreamRun")


def test_a_dry_run(env: Env, offline_server: ScriptedLLMServer) -> None:
    """status dry_run: batches with outcome dry_run, no commit, the would-be diff."""
    env.use(offline_server)
    build_workspace(env.workspace, history=entries(3))
    code, report = env.json("run", "--dry-run")
    assert (code, report["status"], report["commits"]) == (0, "dry_run", [])
    assert "User fact number 3" in report["diff"]
    assert_valid(report, "DreamRun")


def test_a_failed_run(env: Env) -> None:
    """A 401 from the endpoint: status failed, exit 1, the error named, the batch failed."""
    with ScriptedLLMServer([Fail(401, "invalid api key")] * 3) as server:
        env.use(server)
        build_workspace(env.workspace, history=entries(2))
        code, report = env.json("run")
    assert (code, report["status"]) == (1, "failed") and report["errors"]
    assert report["batches"][0]["outcome"] == "failed" and report["batches"][0]["error"]
    assert_valid(report, "DreamRun")


def test_a_run_that_could_not_start(env: Env) -> None:
    """No model configured: exit 2, and stdout still carries a failed report saying why."""
    build_workspace(env.workspace, history=entries(1))
    code, report = env.json("run")
    assert (code, report["status"]) == (2, "failed") and "no model" in report["errors"][0]
    assert_valid(report, "DreamRun")


def test_a_held_batch(env: Env) -> None:
    """An edit removing most of USER.md is held: status held, the held record in the report."""
    body = "# User\n\n" + "".join(f"- kept fact {i}\n" for i in range(20))
    shrink = Reply(tool_calls=[tool_call("edit_file", path="USER.md", old_text=body[8:], new_text="- one fact\n")])
    with ScriptedLLMServer([Reply("[USER] one fact"), shrink, Reply("done")]) as server:
        env.use(server)
        build_workspace(env.workspace, history=entries(2), files={"USER.md": body})
        code, report = env.json("run")
    assert (code, report["status"], report["batches"][0]["outcome"]) == (0, "held", "held")
    assert report["held"][0]["id"] == "1-2.1" and report["held"][0]["path"] == "USER.md"
    assert_valid(report, "DreamRun")


def test_a_set_aside_batch(env: Env) -> None:
    """Three runs failing the same batch on its content: two failed reports, then set_aside."""
    with ScriptedLLMServer(responder=lambda request: Reply("no tags here")) as server:
        env.use(server)
        build_workspace(env.workspace, history=entries(2))
        for expected in ("failed", "failed", "set_aside"):
            code, report = env.json("run")
            assert report["status"] == expected, report
            assert_valid(report, "DreamRun")
    assert code == 0 and report["set_aside"][0]["cursor_to"] == 2


def test_a_locked_workspace(env: Env, offline_server: ScriptedLLMServer) -> None:
    """Another holder of memory/.dream.lock: status locked, exit 75, nothing done."""
    env.use(offline_server)
    build_workspace(env.workspace, history=entries(2))
    with (env.workspace / "memory" / ".dream.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"pid": 4242, "host": "elsewhere", "started": "2026-01-01T00:00:00"}))
        handle.flush()
        code, report = env.json("run")
    assert (code, report["status"], report["batches"]) == (75, "locked", [])
    assert_valid(report, "DreamRun")


def test_consolidate_reports(env: Env, offline_server: ScriptedLLMServer) -> None:
    """`dream consolidate --all --force` on one session: status ok with a consolidated session;
    again: nothing_to_do with a skipped one; under a held consolidation lock: locked, exit 75."""
    env.use(offline_server)
    build_workspace(env.workspace)
    turns = []
    for i in range(6):
        turns += [
            {"role": "user", "content": f"Remember that project {i} deploys with tool {i}.", "timestamp": "2026-04-03"},
            {"role": "assistant", "content": f"Noted: project {i} uses tool {i}.", "timestamp": "2026-04-03"},
        ]
    write_session(env.workspace, "cli:direct", turns)
    code, report = env.json("consolidate", "--all", "--force")
    assert (code, report["status"], report["sessions"][0]["outcome"]) == (0, "ok", "consolidated"), report
    assert_valid(report, "Consolidate")
    code, again = env.json("consolidate", "--all")
    assert (code, again["status"]) == (0, "nothing_to_do")
    assert_valid(again, "Consolidate")
    with (env.workspace / "memory" / ".consolidation.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        code, locked = env.json("consolidate", "--all", "--force")
    assert (code, locked["status"]) == (75, "locked")
    assert_valid(locked, "Consolidate")


def test_eval_report(env: Env) -> None:
    """`dream eval --scenario personal --json` with the offline engine matches the Eval schema."""
    code, report = env.json("eval", "--scenario", "personal", "--json")
    assert code == 0 and report["passed"] is True and [s["name"] for s in report["scenarios"]] == ["personal"]
    assert_valid(report, "Eval")


@pytest.mark.slow
def test_the_container_entrypoint_prints_and_writes_a_valid_report(tmp_path: Path) -> None:
    """`dream-run` as its own process on a clean machine (the container's entrypoint), offline:
    the report on stdout and the one written by --report are the same text and match DreamRun."""
    workspace = build_workspace(tmp_path / "ws", history=entries(3))
    out = tmp_path / "reports" / "run.json"
    done = subprocess.run(
        [*DREAM_RUN, "--workspace", str(workspace), "--model", "offline", "--report", str(out)],
        env=clean_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and out.read_text(encoding="utf-8") == done.stdout
    assert_valid(report, "DreamRun")


def test_a_report_with_an_undeclared_key_is_refused() -> None:
    """The schema is closed: a report carrying a key its type does not declare does not validate,
    nor does one missing a declared key."""
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost_usd": None, "llm_calls": 0}
    report = {
        "status": "nothing_to_do",
        "workspace": "/ws",
        "version": "0",
        "cursor_before": 0,
        "cursor_after": 0,
        "entries_processed": 0,
        "batches": [],
        "commits": [],
        "files_changed": [],
        "model": "offline",
        "usage": usage,
        "changed": False,
        "held": [],
        "set_aside": [],
        "redactions": {},
        "diff": "",
        "duration_s": 0.0,
        "errors": [],
        "notes": [],
        "manual_edits_commit": None,
        "compaction": None,
        "tool_call_dialects": {},
        "scope_refusals": 0,
    }
    assert_valid(report, "DreamRun")
    assert not validator("DreamRun").is_valid({**report, "surprise": 1})
    assert not validator("DreamRun").is_valid({k: v for k, v in report.items() if k != "notes"})
    assert not validator("DreamRun").is_valid({**report, "usage": {**usage, "calls": 0}})


def test_keys_of_one_outcome_only_are_optional() -> None:
    """A recovered slice that failed carries `error` and none of the finished slice's keys; one
    that finished carries those keys and no `error`: both validate, a bare item missing `planned`
    does not."""
    failed = {"path": "sessions/a.jsonl", "key": "a", "planned": 2, "outcome": "failed", "error": "disk full"}
    finished = {
        "path": "sessions/a.jsonl",
        "key": "a",
        "planned": 2,
        "outcome": "finished",
        "already_present": [3],
        "entries": [3, 4],
        "appended": [4],
        "messages_archived": 6,
        "raw_fallback": False,
    }
    assert validator("RecoveredJSON").is_valid(failed)
    assert validator("RecoveredJSON").is_valid(finished)
    assert not validator("RecoveredJSON").is_valid({k: v for k, v in failed.items() if k != "planned"})
