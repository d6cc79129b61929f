"""Product bugs the fault suite found, each as the smallest test of what a user should see.

Open bugs are marked ``xfail(strict=True)``: when a fix lands the test passes, strict xfail turns
that into a failure, and the marker is removed here (with the bug's entry in
``KNOWN_BUGS`` in tests/faults/soak/suite.py when it has one; then regenerate the figures in
docs/reliability.md). Fixed bugs keep their test, unmarked, so they do not come back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from faults_helpers import RUNNER, dream, history_contents, report_of

from dream_memory.testing import build_workspace, clean_env, write_session
from dream_memory.testing.canaries import CANARIES
from dream_memory.testing.llm_server import Fail, ScriptedLLMServer

FACTS = [
    "- [durable] User prefers dark mode in every editor.",
    "- Decided to use PostgreSQL for the event store.",
    "- [durable] User works as a data engineer.",
]


@pytest.mark.slow
def test_dream_run_on_a_full_disk_fails_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    """`dream run` on a full disk (ENOSPC while writing a memory file after its commit landed)
    exits 1 with a message naming the cause, never a Python traceback; the next run with space
    finishes the batch. (Found by the suite's disk-full trials; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    env = clean_env(tmp_path / "home")
    done = dream(env, "run", "--workspace", str(ws), "--model", "offline", fault=("enospc", "memory.write", 1))
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    assert done.returncode == 1 and "no space left" in done.stderr
    again = dream(env, "run", "--workspace", str(ws), "--model", "offline")
    assert again.returncode == 0, again.stderr
    assert (ws / "memory" / ".dream_cursor").read_text().strip() == "3"


def test_dream_run_on_a_full_disk_still_prints_its_report(tmp_path: Path) -> None:
    """A scheduler reading `dream run`'s stdout gets the JSON report even when the run fails on a
    full disk: status failed, the error named (CONTRACT section 6). (Found by the suite's
    disk-full trials; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    env = clean_env(tmp_path / "home")
    done = dream(env, "run", "--workspace", str(ws), "--model", "offline", fault=("enospc", "memory.write", 1))
    assert done.returncode == 1
    report = report_of(done)
    assert report is not None, f"no JSON report on stdout; stderr: {done.stderr.strip()}"
    assert report["status"] == "failed" and report["errors"]


@pytest.mark.parametrize("site", ["history.append", "cursor.write"])
def test_an_append_that_reports_failure_has_not_stored_the_entry(tmp_path: Path, site: str) -> None:
    """When `dream append` fails (exit 1) the entry is not in history, so retrying it cannot store
    it twice; when the entry is stored, the command says so (exit 0, its cursor). (Found by the
    suite's disk-full trials at cursor.write; fixed.)"""
    ws = build_workspace(tmp_path / "ws")
    env = clean_env(tmp_path / "home")
    text = "- [durable] User prefers tea over coffee."
    done = dream(env, "append", "--workspace", str(ws), text, fault=("enospc", site, 1))
    stored = history_contents(ws).count(text)
    if done.returncode == 0:
        assert stored == 1 and done.stdout.strip().isdigit()
    else:
        assert stored == 0, f"exit {done.returncode} ({done.stderr.strip()}) but the entry is in history.jsonl"


@pytest.mark.slow
def test_a_dream_run_killed_while_writing_a_git_object_is_recovered(tmp_path: Path) -> None:
    """`dream run` killed (SIGKILL) while git's lock file of a new object exists: the next run
    finishes the work (exit 0, every entry consumed) instead of failing on the stale lock forever.
    (Found by the suite's sigkill trials; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    env = clean_env(tmp_path / "home")
    killed = dream(env, "run", "--workspace", str(ws), "--model", "offline", fault=("kill", "git.lock.object", 3))
    assert killed.returncode == -9, killed.stderr
    assert list((ws / ".git" / "objects").glob("*/*.lock")), "the kill should leave the object's lock behind"
    again = dream(env, "run", "--workspace", str(ws), "--model", "offline")
    assert "Traceback" not in again.stderr, again.stderr[-1500:]
    assert again.returncode == 0, again.stderr
    assert (ws / "memory" / ".dream_cursor").read_text().strip() == "3"


def test_a_memory_file_dream_cannot_read_still_gives_a_report(tmp_path: Path) -> None:
    """USER.md saved in Latin-1 by some other tool: `dream run` still prints its JSON report (naming
    USER.md) instead of stopping with only a message on stderr, run after run. (Found while
    writing the suite; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    (ws / "USER.md").write_bytes("# User\n\n- Lives in Besan\xe7on\n".encode("latin-1"))
    env = clean_env(tmp_path / "home")
    done = dream(env, "run", "--workspace", str(ws), "--model", "offline")
    report = report_of(done)
    assert report is not None, f"exit {done.returncode}, no report; stderr: {done.stderr.strip()}"
    assert "USER.md" in json.dumps(report["errors"] + report.get("notes", []))


@pytest.mark.slow
def test_a_run_killed_while_creating_the_repository_leaves_a_branch(tmp_path: Path) -> None:
    """The first `dream run` of a workspace killed while it creates the git repository (HEAD's lock
    written, HEAD not yet): the next run succeeds and commits on a branch, not on a detached HEAD.
    (Found by the suite's sigkill trials; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    env = clean_env(tmp_path / "home")
    killed = dream(env, "run", "--workspace", str(ws), "--model", "offline", fault=("kill", "git.lock.ref", 1))
    assert killed.returncode == -9, killed.stderr
    assert (ws / ".git").is_dir() and not (ws / ".git" / "HEAD").exists()
    again = dream(env, "run", "--workspace", str(ws), "--model", "offline")
    assert again.returncode == 0, again.stderr
    branch = subprocess.run(
        ["git", "-C", str(ws), "symbolic-ref", "-q", "HEAD"], capture_output=True, text=True, env=env
    )
    assert branch.returncode == 0 and branch.stdout.startswith("refs/heads/"), "HEAD is detached"
    log = subprocess.run(
        ["git", "-C", str(ws), "log", "--format=%s", branch.stdout.strip()], capture_output=True, text=True, env=env
    )
    assert "dream: 1..3" in log.stdout


@pytest.mark.slow
def test_a_provider_error_quoting_a_secret_stays_out_of_reports_and_logs(tmp_path: Path) -> None:
    """A provider whose error message quotes a secret from the request (some echo the offending
    input): `dream run` and `dream consolidate` report the failure without the secret, on stdout
    and on stderr. (Found while writing the canary test; fixed.)"""
    secret = CANARIES[2]  # a GitHub token
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    write_session(
        ws,
        "cli:a",
        [
            m
            for i in range(3)
            for m in (
                {"role": "user", "content": f"I prefer tea {i}", "timestamp": f"2026-04-03T10:0{i}:00"},
                {"role": "assistant", "content": "ok", "timestamp": f"2026-04-03T10:0{i}:01"},
            )
        ],
    )
    env = clean_env(tmp_path / "home")
    with ScriptedLLMServer(responder=lambda request: Fail(503, f"overloaded while reading: {secret.text}")) as server:
        preset = {"model": "openai/x", "apiBase": server.base_url, "apiKeyEnv": "K", "maxRetries": 0, "timeout": 10}
        config = tmp_path / "dream.json"
        config.write_text(json.dumps({"agents": {"defaults": {"model": "s"}}, "modelPresets": {"s": preset}}), "utf-8")
        env.update({"DREAM_CONFIG": str(config), "K": "test-key-not-secret"})
        ran = dream(env, "run", "--workspace", str(ws))
        consolidated = dream(env, "consolidate", "--all", "--force", "--workspace", str(ws))
    assert ran.returncode == 1 and report_of(ran) is not None  # the failure itself is reported
    for done in (ran, consolidated):
        assert secret.value not in done.stdout, "a secret in the report"
        assert secret.value not in done.stderr, "a secret in the log"


@pytest.mark.slow
def test_a_stale_object_lock_does_not_outlive_the_next_run(tmp_path: Path) -> None:
    """After a kill while git's lock of a new object existed, the next successful run leaves
    `git fsck --strict` silent, even when new history changed what it commits. (Found by the
    suite's sigkill trials; fixed.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS)
    env = clean_env(tmp_path / "home")
    assert dream(env, "init", "--workspace", str(ws)).returncode == 0
    # the first object of the first batch: a memory file holding the three facts
    killed = dream(env, "run", "--workspace", str(ws), "--model", "offline", fault=("kill", "git.lock.object", 1))
    assert killed.returncode == -9, killed.stderr
    assert list((ws / ".git" / "objects").glob("*/*.lock"))
    assert dream(env, "append", "--workspace", str(ws), "- [durable] User works as a pilot.").returncode == 0
    again = dream(env, "run", "--workspace", str(ws), "--model", "offline", "--batch-size", "20")
    assert again.returncode == 0, again.stderr
    fsck = subprocess.run(["git", "-C", str(ws), "fsck", "--strict"], capture_output=True, text=True, env=env)
    assert fsck.returncode == 0 and fsck.stdout + fsck.stderr == "", fsck.stderr


def test_a_config_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    """A config file saved as Latin-1 (an accented name in gitAuthor): exit 2 with a message naming
    the file, as for invalid JSON, not a Python traceback. (Found by the suite's fuzz trials; fixed.)"""
    config = tmp_path / "dream.json"
    config.write_bytes(
        '{"agents": {"defaults": {"dream": {"gitAuthor": "José <jose@example.com>"}}}}'.encode("latin-1")
    )
    env = clean_env(tmp_path / "home")
    done = dream(env, "run", "--workspace", str(tmp_path / "ws"), "--config", str(config), "--model", "offline")
    assert "Traceback" not in done.stderr, done.stderr[-800:]
    assert done.returncode == 2 and str(config) in done.stderr


def test_a_search_for_undecodable_bytes_is_an_answer_not_a_traceback(tmp_path: Path) -> None:
    """`dream search` given bytes that are not UTF-8 (a Latin-1 terminal, a script) answers (no
    match, or a usage error) instead of ending in a Python traceback. (Found by the suite's fuzz
    trials; fixed.)"""
    store = tmp_path / "store"
    (store / "entities").mkdir(parents=True)
    (store / "index.md").write_text("| Entity | File | Repos |\n|---|---|---|\n| api | entities/api.md | /srv/a |\n")
    (store / "entities" / "api.md").write_text("# api\n- deploys from main\n")
    env = clean_env(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "-", "-", "0", "search", "--store", str(store), b"caf\xe9"],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode("utf-8", "replace")[-800:]
    assert done.returncode in (0, 1, 2)


@pytest.mark.slow
def test_a_notes_ref_lock_left_by_a_killed_run_does_not_stop_the_next(tmp_path: Path) -> None:
    """A run killed while it moved refs/notes/dream leaves refs/notes/dream.lock; the next run
    used to crash with "internal error (FileLocked)". It clears the dead lock, lands its batch
    with its provenance note, and `git fsck --strict` stays silent. (Found by the sigkill trials.)"""
    ws = build_workspace(tmp_path / "ws", history=FACTS[:1])
    env = clean_env(tmp_path / "home")
    assert dream(env, "init", "--workspace", str(ws)).returncode == 0
    assert dream(env, "run", "--workspace", str(ws), "--model", "offline").returncode == 0
    lock = ws / ".git" / "refs" / "notes" / "dream.lock"
    lock.write_text("0" * 40 + "\n", encoding="utf-8")  # what a writer killed mid-update leaves
    assert dream(env, "append", "--workspace", str(ws), "- [durable] User works as a pilot.").returncode == 0
    again = dream(env, "run", "--workspace", str(ws), "--model", "offline")
    assert again.returncode == 0, again.stderr
    assert not lock.exists()
    shown = subprocess.run(
        ["git", "-C", str(ws), "notes", "--ref", "dream", "show", "HEAD"], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0 and "pilot" in shown.stdout, shown.stderr
    fsck = subprocess.run(["git", "-C", str(ws), "fsck", "--strict"], capture_output=True, text=True, env=env)
    assert fsck.returncode == 0 and fsck.stdout + fsck.stderr == "", fsck.stdout + fsck.stderr
