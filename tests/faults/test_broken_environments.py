"""Broken environments: every command ends with a one-line cause and exit 1 or 2, never a traceback.

A full disk (while the Dream lock is taken, and a real full filesystem), a folder where a lock
file belongs, a non-root user facing an unreadable MEMORY.md or a read-only workspace, JSON nested
thousands of levels deep (config, state, journal, progress), a --report that cannot be written,
and cursors at the end of their range. Each command runs as a real process; `dream run` prints
its JSON report whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_helpers import dream, dream_each, report_of

from dream_memory.core.history import MAX_CURSOR
from dream_memory.testing import build_workspace, clean_env, write_session

FACTS = [
    "- [durable] User prefers dark mode in every editor.",
    "- Decided to use PostgreSQL for the event store.",
]

# Commands a scheduler or an agent runs against a workspace (read side included).
COMMANDS = [
    ["init"],
    ["status"],
    ["append", "- [durable] a new fact"],
    ["run", "--model", "offline"],
    ["consolidate", "--all", "--model", "offline"],
    ["log"],
    ["restore"],
    ["context"],
    ["section", "memory"],
    ["search", "dark"],
    ["entity", "postgres"],
    ["resolve", "/srv/app"],
    ["prompt"],
    ["schedule"],
]
# Read-side lookups whose exit 1 ("no entity ...") is their normal answer in these workspaces.
LOOKUPS = {"entity", "resolve"}


def assert_clean_failure(done: subprocess.CompletedProcess[str], command: list[str], *, codes: tuple[int, ...]) -> str:
    """No traceback; the exit code is one of ``codes``; a failure says why in one `dream: error:`
    line (plus an optional hint). Returns that line."""
    assert "Traceback" not in done.stderr, f"{command}: {done.stderr[-2000:]}"
    assert done.returncode in codes, f"{command}: exit {done.returncode}: {done.stderr[-800:]}"
    if command[0] == "run":
        report = report_of(done)
        assert report is not None, f"{command} printed no report: {done.stderr[-500:]}"
        if done.returncode:
            assert report["status"] == "failed" and report["errors"], report
    if done.returncode == 0:
        return ""
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert errors, f"{command}: exit {done.returncode} without a message: {done.stderr[-800:]}"
    return errors[0]


def workspace_with_history(root: Path) -> tuple[Path, dict[str, str]]:
    ws = build_workspace(root / "ws", history=FACTS)
    turns = [("user", "[durable] User prefers tea."), ("assistant", "noted"), ("user", "thanks"), ("assistant", "ok")]
    messages = [{"role": r, "content": c, "timestamp": f"2026-04-03T10:0{i}:00"} for i, (r, c) in enumerate(turns)]
    write_session(ws, "cli:direct", messages)
    env = clean_env(root / "home", DREAM_WORKSPACE=str(ws))
    done = dream(env, "init")
    assert done.returncode == 0, done.stderr
    return ws, env


# --- a full disk ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_full_disk_while_taking_the_dream_lock_is_a_message_and_a_report(tmp_path: Path) -> None:
    """ENOSPC while `dream run` writes its holder into memory/.dream.lock: exit 1, "no space
    left" named, the JSON report printed (status failed, nothing done), no traceback; the same
    fault in `dream init` is a one-line error too; the next run with space does the work."""
    _ws, env = workspace_with_history(tmp_path)
    done = dream(env, "run", "--model", "offline", fault=("enospc", "dream_lock.write", 1))
    line = assert_clean_failure(done, ["run"], codes=(1,))
    assert "no space left" in line and ".dream.lock" in line
    report = report_of(done)
    assert report is not None and report["commits"] == [] and report["cursor_after"] == 0
    init = dream(env, "init", fault=("enospc", "dream_lock.write", 1))
    assert "no space left" in assert_clean_failure(init, ["init"], codes=(1,))
    again = dream(env, "run", "--model", "offline")
    assert again.returncode == 0, again.stderr
    assert report_of(again)["cursor_after"] == 2  # type: ignore[index]


@contextlib.contextmanager
def small_filesystem(where: Path, size: str = "4m") -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``where`` (root only; skipped where mounting fails)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small filesystem needs root")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(folder: Path) -> None:
    """Fill the filesystem holding ``folder`` to the last byte."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (65536, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * chunk):
                    pass
    finally:
        os.close(fd)


@pytest.mark.slow  # every command as a real process, one after another
def test_every_command_on_a_really_full_disk_fails_cleanly(tmp_path: Path) -> None:
    """A workspace on a filesystem with no byte left: every command either works (read-only
    ones) or exits 1 or 2 with one line naming the cause, never a traceback; `dream run` prints
    its report. Once space is freed, `dream run` does the pending work."""
    with small_filesystem(tmp_path / "disk") as disk:
        ws = build_workspace(disk / "ws", history=FACTS)
        env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
        assert dream(env, "init").returncode == 0
        assert dream(env, "append", "- [durable] one more fact").returncode == 0
        fill(disk)
        failed = []
        for command, done in zip(COMMANDS, dream_each(env, COMMANDS), strict=True):
            line = assert_clean_failure(done, command, codes=(0, 1, 2))
            if done.returncode and command[0] not in LOOKUPS:
                failed.append(command[0])
                assert "no space left" in line or "quota" in line, f"{command}: {line}"
        assert "run" in failed  # (an append may still fit in the last page of history.jsonl)
        (disk / "filler").unlink()
        again = dream(env, "run", "--model", "offline")
        assert again.returncode == 0, again.stderr
        assert report_of(again)["entries_processed"] >= 3  # type: ignore[index]


# --- a folder where a lock file belongs ----------------------------------------------------------


@pytest.mark.slow  # every command as a real process, one after another
@pytest.mark.parametrize("lock", ["memory/.dream.lock", "memory/.history.lock"])
def test_a_folder_where_a_lock_file_belongs(tmp_path: Path, lock: str) -> None:
    """A folder at memory/.dream.lock or memory/.history.lock: commands that need the lock exit
    2 naming the folder and saying to remove it, the others keep working; no traceback."""
    ws, env = workspace_with_history(tmp_path)
    (ws / lock).unlink(missing_ok=True)
    (ws / lock).mkdir()
    needs_lock = {"init", "run"} if lock.endswith("dream.lock") else {"init", "append", "consolidate", "run"}
    failed = []
    for command, done in zip(COMMANDS, dream_each(env, COMMANDS), strict=True):
        line = assert_clean_failure(done, command, codes=(0, 1, 2))
        if done.returncode and command[0] in needs_lock:
            failed.append(command[0])
            assert lock in line and "folder" in line, f"{command}: {line}"
            assert done.returncode == 2 or command[0] == "run", f"{command}: exit {done.returncode}"
            assert "remove the folder" in done.stderr or command[0] == "run"
        elif command[0] not in LOOKUPS:
            assert done.returncode == 0, f"{command}: {done.stderr[-500:]}"
    assert needs_lock == set(failed)


# --- a non-root user -----------------------------------------------------------------------------

NOBODY = 65534


@pytest.fixture
def open_tmp(open_tmp: Path) -> Path:
    """The shared open folder (conftest.py), for cases that drop to another user: root only."""
    if os.geteuid() != 0:
        pytest.skip("dropping to another user needs root (run as that user to test this by hand)")
    return open_tmp


def _give(path: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(path):
        os.chown(folder, uid, uid)
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), uid, uid)


@pytest.mark.slow  # every command as a real process, one after another
def test_a_memory_file_the_user_cannot_read(open_tmp: Path) -> None:
    """As a user who owns the workspace but cannot read memory/MEMORY.md (mode 000): the commands
    that read it exit 1 or 2 with one line naming the file, `dream run` prints a failed report and
    commits nothing; none shows a PermissionError traceback."""
    ws, env = workspace_with_history(open_tmp)
    _give(open_tmp, NOBODY)
    memory = ws / "memory" / "MEMORY.md"
    later = memory.stat().st_mtime + 10  # git's index no longer vouches for it: it must be read
    os.utime(memory, (later, later))
    memory.chmod(0)
    head = (ws / ".git" / "HEAD").read_text()
    failed = {}
    for command, done in zip(COMMANDS, dream_each(env, COMMANDS, uid=NOBODY), strict=True):
        line = assert_clean_failure(done, command, codes=(0, 1, 2))
        if done.returncode and command[0] not in LOOKUPS:
            failed[command[0]] = line
    assert {"status", "run", "context"} <= set(failed)
    for line in failed.values():
        assert "memory/MEMORY.md" in line and "permission denied" in line.lower(), line
    assert (ws / ".git" / "HEAD").read_text() == head


@pytest.mark.slow  # every command as a real process, one after another
def test_a_read_only_workspace(open_tmp: Path) -> None:
    """A workspace the user may read but not write (another user's checkout, a read-only mount):
    read commands work, writing ones exit 2 naming the path and the uid that would need access,
    `dream run` prints its report; no traceback."""
    ws, env = workspace_with_history(open_tmp)
    _give(open_tmp / "home", NOBODY)
    for folder, _dirs, files in os.walk(ws):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    failed = {}
    for command, done in zip(COMMANDS, dream_each(env, COMMANDS, uid=NOBODY), strict=True):
        line = assert_clean_failure(done, command, codes=(0, 1, 2))
        if done.returncode:
            failed[command[0]] = (done.returncode, line, done.stderr)
    assert {"init", "append", "run", "consolidate"} <= set(failed)
    assert {"status", "log", "context", "search", "section"}.isdisjoint(failed)
    for name in ("init", "append", "consolidate", "run"):
        code, line, stderr = failed[name]
        assert code == 2 and "permission denied" in line, (name, line)
        assert f"uid {NOBODY}" in stderr, (name, stderr)


# --- JSON nested thousands of levels deep ----------------------------------------------------------

DEEP = '{"a": ' * 5000 + "1" + "}" * 5000


@pytest.mark.slow  # every command as a real process, one after another
def test_a_config_nested_thousands_of_levels_deep_is_a_usage_error(tmp_path: Path) -> None:
    """A config file 5,000 levels deep: every command that reads the config exits 2 naming the
    file, none with a RecursionError traceback."""
    _ws, env = workspace_with_history(tmp_path)
    config = tmp_path / "deep.json"
    config.write_text(DEEP, encoding="utf-8")
    commands = [[*command, "--config", str(config)] for command in COMMANDS]
    for command, done in zip(COMMANDS, dream_each(env, commands), strict=True):
        line = assert_clean_failure(done, command, codes=(0, 1, 2))
        # the read side and `dream log` (issue 21: versions need no setting) read no config
        if command[0] not in ("search", "section", "log", *LOOKUPS):
            assert done.returncode == 2 and str(config) in line and "nested too deeply" in line, (command, line)


@pytest.mark.slow  # every command as a real process, one after another
@pytest.mark.parametrize(
    "rel",
    ["memory/.dream_state.json", "memory/.dream_journal.json", "memory/.consolidation.json", "memory/.dream.lock"],
)
def test_a_workspace_json_file_nested_thousands_of_levels_deep(tmp_path: Path, rel: str) -> None:
    """Dream's state, journal, the Consolidator's progress or the lock file 5,000 levels deep:
    read as unreadable (state, journal, lock: Dream starts over from them) or refused with a
    message (progress), never a RecursionError traceback."""
    ws, env = workspace_with_history(tmp_path)
    (ws / rel).write_text(DEEP, encoding="utf-8")
    for command, done in zip(COMMANDS, dream_each(env, COMMANDS), strict=True):
        assert_clean_failure(done, command, codes=(0, 1, 2))


# --- --report ------------------------------------------------------------------------------------


def test_a_report_path_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path) -> None:
    """`dream run --report` to a folder, or below a file: exit 2 before any work (no commit, the
    cursor stays), naming the path; no traceback."""
    ws, env = workspace_with_history(tmp_path)
    head = (ws / ".git" / "refs" / "heads" / "main").read_text()
    (tmp_path / "a-file").write_text("x")
    for target in (tmp_path, tmp_path / "a-file" / "report.json"):
        done = dream(env, "run", "--model", "offline", "--report", str(target))
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 2 and "--report" in done.stderr and str(target) in done.stderr
    assert (ws / ".git" / "refs" / "heads" / "main").read_text() == head
    assert (
        not (ws / "memory" / ".dream_cursor").exists() or (ws / "memory" / ".dream_cursor").read_text().strip() == "0"
    )


def test_a_report_file_failing_after_the_run_still_leaves_the_report_on_stdout(tmp_path: Path) -> None:
    """When writing the --report file fails after batches were committed (a full disk at the
    end), the report is on stdout with the run's commits, the failure is named on stderr, and
    the exit code is 1; no traceback."""
    _ws, env = workspace_with_history(tmp_path)
    target = tmp_path / "out" / "report.json"
    done = dream(env, "run", "--model", "offline", "--report", str(target), fault=("enospc", "report.write", 1))
    assert "Traceback" not in done.stderr, done.stderr
    report = report_of(done)
    assert report is not None and report["commits"] and report["status"] == "ok"
    assert done.returncode == 1 and "no space left" in done.stderr and str(target) in done.stderr


@pytest.mark.slow
def test_a_report_to_a_symlink_or_a_device_is_written_into_it(tmp_path: Path) -> None:
    """`--report` naming a symlink (a CI step's artifact link) or /dev/null writes through it:
    the link stays a link and its target holds the report; /dev/null stays a device."""
    _ws, env = workspace_with_history(tmp_path)
    target = tmp_path / "artifacts" / "dream-report.json"
    target.parent.mkdir()
    link = tmp_path / "report-link.json"
    link.symlink_to(target)
    done = dream(env, "run", "--model", "offline", "--report", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and json.loads(target.read_text(encoding="utf-8"))["status"] == "ok"
    again = dream(env, "run", "--model", "offline", "--report", os.devnull)
    assert again.returncode == 0, again.stderr
    assert Path(os.devnull).is_char_device()


# --- cursors at the end of their range -----------------------------------------------------------


@pytest.mark.slow
def test_no_cursor_is_allocated_beyond_what_readers_accept(tmp_path: Path) -> None:
    """With memory/.cursor at 2**63-2 the next append gets 2**63-1, which every reader accepts;
    the one after is refused (append: exit 2; consolidate: that session fails, exit 1; one line
    naming the bound) instead of writing a cursor that readers reject as malformed; history is
    unchanged by the refusal."""
    ws, env = workspace_with_history(tmp_path)
    (ws / "memory" / ".cursor").write_text(f"{MAX_CURSOR - 1}\n")
    first = dream(env, "append", "- [durable] the last cursor")
    assert first.returncode == 0 and int(first.stdout) == MAX_CURSOR
    status = json.loads(dream(env, "status", "--json").stdout)
    assert status["malformed"] == 0 and status["cursor"] == MAX_CURSOR
    before = (ws / "memory" / "history.jsonl").read_bytes()
    for command in (["append", "- [durable] one too many"], ["consolidate", "--all", "--force", "--model", "offline"]):
        done = dream(env, *command)
        line = assert_clean_failure(done, command, codes=(2,) if command[0] == "append" else (1, 2))
        assert str(MAX_CURSOR) in line, line
    assert (ws / "memory" / "history.jsonl").read_bytes() == before
