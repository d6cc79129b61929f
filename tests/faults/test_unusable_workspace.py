"""A workspace in a shape no command can use, and settings no run can use, are the user's to fix:
exit 2 at once with the path (or the setting), what is wrong and what to do; never exit 1 after
retries, never a traceback, never a model call paid for and then lost.

Findings of a hostile-input sweep: memory/history.jsonl a folder or unreadable, USER.md
unreadable, memory/ a regular file, a history.jsonl (or its folder) that cannot be written while
`dream consolidate` would spend a model call first, ``DREAM_API_BASE=notaurl``, and a schedule
`dream schedule` refuses while `dream doctor` said healthy.

Mode 000 does not stop root: run as root, the permission cases run their commands as another
uid (``dream_each``, forked from one warmed interpreter); run as an ordinary user, as that user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from faults_helpers import dream, dream_each, report_of

from dream_memory.testing import build_workspace, clean_env, write_session
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer

NOBODY = 65534
HISTORY = ["- [durable] User prefers tea.", "- Decided to use PostgreSQL for the event store."]
# What every scheduled or agent-driven command needs of history.jsonl.
HISTORY_COMMANDS = [
    ["status"],
    ["append", "- [durable] a new fact"],
    ["run", "--model", "offline"],
    ["consolidate", "--all", "--model", "offline"],
]


def _clean_exit_2(done: subprocess.CompletedProcess[str], command: list[str], *names: str, fix: str) -> str:
    """Exit 2, no traceback, one `error:` line naming each of ``names``, the ``fix`` said (as a
    hint, or in parentheses in a run's error); `dream run` still prints its failed report."""
    assert "Traceback" not in done.stderr, f"{command}: {done.stderr[-2000:]}"
    assert done.returncode == 2, f"{command}: exit {done.returncode}: {done.stderr[-800:]}"
    line = next((x for x in done.stderr.splitlines() if "error:" in x), "")
    for name in names:
        assert name in line, f"{command}: {name!r} not in {line!r}"
    assert fix in done.stderr, f"{command}: no fix given: {done.stderr[-800:]}"
    if command[0] == "run":
        report = report_of(done)
        assert report is not None and report["status"] == "failed", done.stdout[-500:]
    return done.stderr


def _workspace(base: Path) -> tuple[Path, dict[str, str]]:
    """An initialised workspace with history, owned by the uid the commands will run as."""
    ws = build_workspace(base / "ws", history=HISTORY)
    env = clean_env(base / "home", DREAM_WORKSPACE=str(ws))
    done = dream(env, "init")
    assert done.returncode == 0, done.stderr
    return ws, env


def _as_user(base: Path) -> int:
    """The uid the permission cases run as: another one under root (mode 000 does not stop root)."""
    if os.geteuid() != 0:
        return -1
    for folder, dirs, files in os.walk(base):
        os.chown(folder, NOBODY, NOBODY)
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), NOBODY, NOBODY)
    return NOBODY


# --- a folder where a file belongs, a file where a folder belongs ---------------------------------


@pytest.mark.slow  # every command as a real process
def test_a_folder_at_history_jsonl_is_exit_2_naming_it_and_the_fix(tmp_path: Path) -> None:
    ws, env = _workspace(tmp_path)
    history = ws / "memory" / "history.jsonl"
    history.unlink()
    history.mkdir()
    for command, done in zip(HISTORY_COMMANDS, dream_each(env, HISTORY_COMMANDS), strict=True):
        _clean_exit_2(done, command, str(history), "folder", fix="remove the folder")
    assert history.is_dir() and not any(history.iterdir())


@pytest.mark.parametrize("name", ["USER.md", "memory/MEMORY.md"])
def test_a_folder_at_a_memory_file_is_exit_2_naming_it_and_the_fix(tmp_path: Path, name: str) -> None:
    """The run's message named the descriptor it had opened ("remove the folder 9"), not the file,
    and its summary said "cursor 0 -> 0" though the cursor stood where the last run left it."""
    ws, env = _workspace(tmp_path)
    assert dream(env, "run", "--model", "offline").returncode == 0
    memory = ws / name
    memory.unlink()
    memory.mkdir()
    done = dream(env, "run", "--model", "offline")
    _clean_exit_2(done, ["run"], str(memory), "folder", fix=f"remove the folder {memory}")
    assert f"cursor {len(HISTORY)} -> {len(HISTORY)}, 0 entries" in done.stderr
    assert memory.is_dir() and not any(memory.iterdir())


def test_status_when_memory_is_a_regular_file_is_exit_2_naming_it(tmp_path: Path) -> None:
    ws, env = _workspace(tmp_path)
    shutil.rmtree(ws / "memory")
    (ws / "memory").write_text("not a folder\n", encoding="utf-8")
    done = dream(env, "status")
    _clean_exit_2(
        done, ["status"], str(ws / "memory"), "a file stands where a folder belongs", fix="move away the file"
    )


# --- permissions (as another uid under root) ------------------------------------------------------


@pytest.mark.slow  # every command as a real process
def test_a_history_jsonl_nobody_may_read_is_exit_2_naming_it(open_tmp: Path) -> None:
    ws, env = _workspace(open_tmp)
    uid = _as_user(open_tmp)
    history = ws / "memory" / "history.jsonl"
    before = history.read_bytes()
    history.chmod(0)
    for command, done in zip(HISTORY_COMMANDS, dream_each(env, HISTORY_COMMANDS, uid=uid), strict=True):
        _clean_exit_2(done, command, str(history), "permission denied", fix="chmod")
    history.chmod(0o644)
    assert history.read_bytes() == before


@pytest.mark.slow  # every command as a real process
def test_a_user_md_nobody_may_read_is_exit_2_naming_it(open_tmp: Path) -> None:
    ws, env = _workspace(open_tmp)
    uid = _as_user(open_tmp)
    user = ws / "USER.md"
    later = user.stat().st_mtime + 10  # git's index no longer vouches for it: it must be read
    os.utime(user, (later, later))
    user.chmod(0)
    commands = [["status"], ["run", "--model", "offline"]]
    for command, done in zip(commands, dream_each(env, commands, uid=uid), strict=True):
        _clean_exit_2(done, command, str(user), "permission denied", fix="chmod")


# --- consolidate checks it can write history before it pays for a model call ---------------------


def _consolidate_with_server(base: Path, damage: str) -> tuple[subprocess.CompletedProcess[str], int, Path]:
    ws = build_workspace(base / "ws", history=HISTORY)
    turns = [("user", "[durable] User prefers tea."), ("assistant", "noted")] * 12
    messages = [
        {"role": r, "content": f"{c} ({i})", "timestamp": "2026-04-03T10:00:00"} for i, (r, c) in enumerate(turns)
    ]
    write_session(ws, "cli:direct", messages)
    with ScriptedLLMServer(responder=lambda _request: Reply("- [durable] User prefers tea.")) as server:
        (base / "home").mkdir(exist_ok=True)
        env = clean_env(base / "home", DREAM_WORKSPACE=str(ws))
        env.update(server.write_config(base / "home" / "dream.json"))
        assert dream(env, "init").returncode == 0
        uid = _as_user(base)
        target = ws / "memory" / "history.jsonl" if damage == "file" else ws / "memory"
        target.chmod(0o444 if damage == "file" else 0o555)
        [done] = dream_each(env, [["consolidate", "--all", "--force"]], uid=uid)
        return done, len(server.completion_requests()), target


@pytest.mark.slow  # a real process against a scripted server
@pytest.mark.parametrize("damage", ["file", "folder"])
def test_consolidate_into_a_read_only_history_is_exit_2_before_any_model_call(open_tmp: Path, damage: str) -> None:
    """history.jsonl (or memory/) read-only: exit 2 naming it, and the model was never called
    (its summary could not have been stored: the call would have been paid for and lost)."""
    done, requests, target = _consolidate_with_server(open_tmp, damage)
    _clean_exit_2(done, ["consolidate"], str(target), "permission denied", fix="chmod")
    assert requests == 0


# --- an API base no request can reach -------------------------------------------------------------


@pytest.mark.slow  # real processes
@pytest.mark.parametrize("base", ["notaurl", "127.0.0.1:8080/v1", "ftp://example.com/v1", "http:///v1"])
def test_an_api_base_that_is_no_http_url_is_exit_2_at_once_naming_it(tmp_path: Path, base: str) -> None:
    """A configuration error, not a model failure: exit 2 before any request (no retries), naming
    DREAM_API_BASE and the value, for run, consolidate and doctor alike."""
    _ws, env = _workspace(tmp_path)
    env = {**env, "DREAM_API_BASE": base, "DREAM_MODEL": "openai/some-model", "DREAM_API_KEY": "k"}
    for command in (["run"], ["consolidate", "--all"]):
        done = dream(env, *command, timeout=20)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 2, f"{command}: exit {done.returncode}: {done.stderr[-800:]}"
        assert f"DREAM_API_BASE={base!r}" in done.stderr and "http" in done.stderr, done.stderr
        assert "attempt" not in done.stderr and "retry" not in done.stderr.lower(), done.stderr
    doctor = dream(env, "doctor", "--json")
    model = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "model")
    assert doctor.returncode == 1 and model["status"] == "problem" and "DREAM_API_BASE" in model["summary"]


@pytest.mark.slow  # real processes
def test_a_preset_api_base_without_a_scheme_is_named_and_never_called(tmp_path: Path) -> None:
    _ws, env = _workspace(tmp_path)
    with ScriptedLLMServer([Reply("- [durable] User prefers tea.")] * 4) as server:
        env.update(server.write_config(tmp_path / "home" / "dream.json"))
        config = json.loads((tmp_path / "home" / "dream.json").read_text(encoding="utf-8"))
        without_scheme = server.base_url.removeprefix("http://")
        config["modelPresets"]["scripted"]["apiBase"] = without_scheme
        (tmp_path / "home" / "dream.json").write_text(json.dumps(config), encoding="utf-8")
        done = dream(env, "run", timeout=20)
        assert done.returncode == 2, done.stderr[-800:]
        assert "modelPresets.scripted.apiBase" in done.stderr and without_scheme in done.stderr
        assert server.requests == []


@pytest.mark.slow  # real processes
def test_the_python_api_refuses_the_api_base_too(tmp_path: Path) -> None:
    from dream_memory.api import Workspace
    from dream_memory.errors import ConfigError

    ws, env = _workspace(tmp_path)
    workspace = Workspace(ws, env={**env, "DREAM_API_BASE": "notaurl", "DREAM_MODEL": "openai/m"})
    with pytest.raises(ConfigError, match="DREAM_API_BASE='notaurl'") as caught:
        workspace.dream()
    assert caught.value.exit_code == 2


# --- the doctor and `dream schedule` judge a schedule by one rule ---------------------------------


@pytest.mark.slow  # real processes
@pytest.mark.parametrize(
    ("config_text", "setting"),
    [
        ('{"agents": {"defaults": {"dream": {"cron": "99 99 * * *"}}}}', "agents.defaults.dream.cron"),
        ('{"agents": {"defaults": {"dream": {"intervalH": 1e999}}}}', "agents.defaults.dream.intervalH"),
    ],
)
def test_doctor_reports_a_schedule_the_schedule_command_refuses(tmp_path: Path, config_text: str, setting: str) -> None:
    ws, env = _workspace(tmp_path)
    (ws / "dream.json").write_text(config_text, encoding="utf-8")
    refused = dream(env, "schedule")
    assert refused.returncode == 2 and setting in refused.stderr, refused.stderr
    doctor = dream(env, "doctor", "--json", "--model", "offline")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1 and not report["healthy"], doctor.stdout
    # A cron is judged as a schedule; an infinite intervalH is refused with the config itself.
    problem = next(c for c in report["checks"] if c["status"] == "problem")
    assert problem["name"] in ("schedule", "config") and problem["fix"]
    # The same words `dream schedule` said: one rule, not a copy.
    assert f"error: {problem['summary']}" in refused.stderr


@pytest.mark.slow  # real processes
def test_doctor_shows_a_good_schedule_as_ok(tmp_path: Path) -> None:
    ws, env = _workspace(tmp_path)
    (ws / "dream.json").write_text('{"agents": {"defaults": {"dream": {"cron": "30 3 * * 1-5"}}}}', encoding="utf-8")
    doctor = dream(env, "doctor", "--json", "--model", "offline")
    schedule = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "schedule")
    assert schedule["status"] == "ok" and "30 3 * * 1-5" in schedule["summary"]


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_SETLEASE"), reason="kernel leases are Linux's")
def test_a_history_jsonl_under_a_compactions_lease_probe_is_usable(tmp_path: Path) -> None:
    """A compaction asks the kernel whether anyone writes to history.jsonl by taking a read lease
    for an instant; the usability check's non-blocking open then fails with EWOULDBLOCK. That is a
    file in use, not an unusable one: before, an append racing a compaction failed with "cannot
    append to ...: Resource temporarily unavailable" (found by the fault suite's concurrent-compact
    trials)."""
    import fcntl
    import signal

    from dream_memory.adapters.workspace import require_usable_history

    ws = build_workspace(tmp_path / "ws")
    (ws / "memory" / "history.jsonl").write_text('{"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "x"}\n')
    fd = os.open(ws / "memory" / "history.jsonl", os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)  # as writers.py: a broken lease signals nothing fatal
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        require_usable_history(ws, write=True)
        require_usable_history(ws, write=False)
    finally:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        os.close(fd)
