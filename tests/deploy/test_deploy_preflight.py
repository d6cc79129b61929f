"""`dream run`'s start-of-run check: a workspace this process cannot write is exit 2 at once, with
the path, its owner, this process's uid and the fixes; DREAM_UMASK makes shared files group-writable.

The scenario is a container (or a pod whose volume ignores fsGroup) running as another uid than
the workspace's owner. Run as root, the tests fork, drop to an unprivileged uid and call the real
command in the child (the venv's interpreter is not readable by other users here, so a separate
process as another uid cannot start); run as an ordinary user, a folder without write permission
plays the same part.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

# Imported before any fork: the child runs as a uid that cannot read this interpreter's library.
from dream_memory.adapters import preflight
from dream_memory.entrypoints.cli import cli as cli_main

OTHER_UID = 4242
OTHER_GID = 4242


def _as_other_user(fn: Callable[[], tuple[int, str]], groups: tuple[int, ...] = ()) -> tuple[int, str]:
    """Run fn in a forked child as OTHER_UID (root only); returns (exit code, text) from the child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code, text = 99, ""
        try:
            os.setgroups(list(groups))
            os.setresgid(OTHER_GID, OTHER_GID, OTHER_GID)
            os.setresuid(OTHER_UID, OTHER_UID, OTHER_UID)
            code, text = fn()
        except BaseException as exc:
            text = f"child raised {type(exc).__name__}: {exc}"
        finally:
            os.write(write_end, f"{code}\n{text}".encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        data = handle.read().decode()
    os.waitpid(pid, 0)
    code, _, text = data.partition("\n")
    return int(code), text


@pytest.fixture
def tmp_path(open_tmp: Path) -> Path:
    """A temp folder other uids can traverse (pytest's own base folder is private to its user)."""
    return open_tmp


def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, args, env=env, catch_exceptions=True)
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        output += f"\nEXCEPTION {type(result.exception).__name__}: {result.exception}"
    return result.exit_code, output


def _workspace(tmp_path: Path, dream: Callable[..., object]) -> Path:
    ws = tmp_path / "ws"
    dream("init", "--workspace", str(ws))
    dream("append", "--workspace", str(ws), "- [durable] User prefers tea.")
    return ws


def _head(ws: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout


def _make_unwritable(ws: Path) -> int:
    """Make ws unwritable for the process the check runs in; returns that process's uid."""
    if os.geteuid() == 0:
        return OTHER_UID  # root owns it (0755): the dropped child cannot write it
    for path in (ws, ws / "memory"):
        path.chmod(0o555)
    return os.getuid()


def _restore(ws: Path) -> None:
    if os.geteuid() != 0:
        for path in (ws, ws / "memory"):
            path.chmod(0o755)


def _run_dream(ws: Path, clean_env: dict[str, str], *extra: str) -> tuple[int, str]:
    args = ["run", "--workspace", str(ws), "--model", "offline", *extra]
    if os.geteuid() == 0:
        return _as_other_user(lambda: _cli(args, clean_env))
    return _cli(args, clean_env)


def test_unwritable_workspace_is_exit_2_naming_owner_uid_and_fix(
    tmp_path: Path, dream: Callable[..., object], clean_env: dict[str, str]
) -> None:
    """Over a workspace owned by another uid, dream run exits 2 at once, before the lock: the
    message names the path, the owner's uid, this process's uid and the three fixes."""
    ws = _workspace(tmp_path, dream)
    cursor_before = (ws / "memory" / ".dream_cursor").read_bytes()  # dream init commits it
    head_before = _head(ws)
    me = _make_unwritable(ws)
    try:
        code, text = _run_dream(ws, clean_env)
    finally:
        _restore(ws)
    owner = ws.stat().st_uid
    assert code == 2, text
    assert "Traceback" not in text and "EXCEPTION" not in text, text
    assert "cannot write the workspace" in text
    assert str(ws) in text
    assert f"owned by uid {owner}" in text
    assert f"runs as uid {me}" in text
    for fix in (f"run as uid {owner}", "fsGroup", "chown"):
        assert fix in text, (fix, text)
    # nothing was done: no entry consumed, no commit
    assert (ws / "memory" / ".dream_cursor").read_bytes() == cursor_before
    assert _head(ws) == head_before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid with a shared group")
def test_shared_group_write_passes_and_names_the_subfolder_that_is_not(
    tmp_path: Path, dream: Callable[..., object]
) -> None:
    """A workspace writable through a shared group passes the check; one folder inside it that the
    group cannot write (objects the agent created 0755) is named in the error."""
    ws = _workspace(tmp_path, dream)
    group = 5005
    for path in [ws, *ws.rglob("*")]:
        os.chown(path, 1000, group, follow_symlinks=False)
        if path.is_dir():
            path.chmod(0o2775)
        elif not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWGRP)
    ok = _as_other_user(lambda: _check_code(ws), groups=(group,))
    assert ok == (0, "ok"), ok
    (ws / "memory").chmod(0o2755)
    code, text = _as_other_user(lambda: _check_code(ws), groups=(group,))
    assert code == 2
    assert "the folder memory in" in text and "owned by uid 1000 (gid 5005" in text, text


def _check_code(ws: Path) -> tuple[int, str]:
    try:
        preflight.check_workspace_writable(ws)
    except preflight.WorkspaceNotWritable as exc:
        return exc.exit_code, str(exc)
    return 0, "ok"


def test_missing_workspace_checks_the_folder_that_would_hold_it(tmp_path: Path) -> None:
    """A workspace that does not exist yet is created by Dream: the nearest existing folder must be
    writable, and that folder is the one named."""
    parent = tmp_path / "ro"
    parent.mkdir()
    target = parent / "a" / "b"
    if os.geteuid() == 0:
        code, text = _as_other_user(lambda: _check_code(target))
    else:
        parent.chmod(0o555)
        try:
            code, text = _check_code(target)
        finally:
            parent.chmod(0o755)
    assert code == 2
    assert str(parent) in text


def test_dry_run_checks_only_the_lock(tmp_path: Path, dream: Callable[..., object]) -> None:
    """A dry run writes nothing but the lock: a workspace whose only writable place is memory/
    passes the dry-run check and fails the full one, which names the workspace folder."""
    ws = _workspace(tmp_path, dream)
    if os.geteuid() == 0:
        os.chown(ws / "memory", OTHER_UID, OTHER_GID)
        for child in (ws / "memory").iterdir():
            os.chown(child, OTHER_UID, OTHER_GID)
        dry = _as_other_user(lambda: _lock_only(ws))
        full = _as_other_user(lambda: _check_code(ws))
    else:
        ws.chmod(0o555)
        try:
            dry, full = _lock_only(ws), _check_code(ws)
        finally:
            ws.chmod(0o755)
    assert dry == (0, "ok"), dry
    assert full[0] == 2 and f"folder {ws} is owned" in full[1], full


def _lock_only(ws: Path) -> tuple[int, str]:
    try:
        preflight.check_workspace_writable(ws, lock_only=True)
    except preflight.WorkspaceNotWritable as exc:
        return exc.exit_code, str(exc)
    return 0, "ok"


def test_bad_umask_is_exit_2(tmp_path: Path, dream: Callable[..., object], clean_env: dict[str, str]) -> None:
    """DREAM_UMASK that is not an octal umask is a one-line config error, exit 2, nothing run."""
    ws = _workspace(tmp_path, dream)
    code, text = _cli(["run", "--workspace", str(ws), "--model", "offline"], {**clean_env, "DREAM_UMASK": "rwx"})
    assert code == 2
    assert "DREAM_UMASK='rwx' is not an octal umask" in text


@pytest.mark.parametrize("umask", ["0777", "0200", "0100"])
@pytest.mark.parametrize(
    "command", [["run", "--model", "offline"], ["append", "- [durable] User drinks tea."], ["init"]]
)
def test_umask_denying_the_owner_is_exit_2_for_every_writing_command(
    tmp_path: Path, dream: Callable[..., object], clean_env: dict[str, str], umask: str, command: list[str]
) -> None:
    """A DREAM_UMASK that takes the owner's own permissions away would leave every file and folder
    made afterwards unusable (a lock file nobody can open again): exit 2 before anything is written."""
    ws = _workspace(tmp_path, dream)
    before = sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if ".git" not in p.parts)
    history = (ws / "memory" / "history.jsonl").read_bytes()
    code, text = _cli([command[0], "--workspace", str(ws), *command[1:]], {**clean_env, "DREAM_UMASK": umask})
    assert code == 2, text
    assert f"DREAM_UMASK='{umask}' takes permissions away from the files' own owner" in text
    assert "EXCEPTION" not in text, text
    assert sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if ".git" not in p.parts) == before
    assert (ws / "memory" / "history.jsonl").read_bytes() == history


def test_umask_makes_dreams_new_files_and_locks_group_writable(
    tmp_path: Path, dream: Callable[..., object], clean_env: dict[str, str]
) -> None:
    """With DREAM_UMASK=0002 the files Dream creates (its state, its lock files) are group-writable,
    so an agent under another uid in the same group can take the same locks afterwards."""
    ws = tmp_path / "ws"
    previous = os.umask(0o022)
    try:
        # dream init creates memory/.dream_cursor (and commits it): the umask is the init's as well
        dream("init", "--workspace", str(ws), env={"DREAM_UMASK": "0002"})
        dream("append", "--workspace", str(ws), "- [durable] User prefers tea.")
        for lock in ws.joinpath("memory").glob(".*.lock"):
            lock.unlink()
        proc = dream("run", "--workspace", str(ws), "--model", "offline", env={"DREAM_UMASK": "0002"})
    finally:
        os.umask(previous)
    assert proc.returncode == 0, proc.stderr
    locks = sorted(ws.joinpath("memory").glob(".*.lock"))
    assert locks, "the run created no lock file"
    for path in [*locks, ws / "memory" / ".dream_cursor"]:
        mode = path.stat().st_mode
        assert mode & stat.S_IWGRP, f"{path.name} is {stat.filemode(mode)}"


def test_doctor_names_the_git_folder_run_cannot_write(tmp_path: Path, dream: Callable[..., object]) -> None:
    """The workspace is this process's, but .git/objects is another uid's (a volume shared with
    a container running as someone else). `dream run` exits 2 naming it; `dream doctor` said
    "healthy" with exit 0, so a scheduled job checked by doctor failed on every run."""
    ws = _workspace(tmp_path, dream)
    objects = ws / ".git" / "objects"
    if os.geteuid() == 0:
        for path in [ws, *ws.rglob("*")]:
            if objects not in (path, *path.parents):
                os.chown(path, OTHER_UID, OTHER_GID, follow_symlinks=False)
    else:
        objects.chmod(0o555)
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    doctor = ["doctor", "--workspace", str(ws), "--model", "offline"]
    try:
        if os.geteuid() == 0:
            doctor_code, text = _as_other_user(lambda: _cli(doctor, env))
            run_code, _ = _as_other_user(lambda: _cli(["run", "--workspace", str(ws), "--model", "offline"], env))
        else:
            doctor_code, text = _cli(doctor, env)
            run_code, _ = _cli(["run", "--workspace", str(ws), "--model", "offline"], env)
    finally:
        if os.geteuid() != 0:
            objects.chmod(0o755)
    assert run_code == 2
    assert doctor_code != 0 and "healthy" not in text.splitlines()[-1], text
    assert "the folder .git/objects in" in text and "cannot write the workspace" in text, text


def test_the_python_api_gives_its_host_its_own_umask_back(tmp_path: Path) -> None:
    """An agent embedding the API with DREAM_UMASK=0077 set: what Dream writes is private, and
    the agent's own files afterwards are made with its own umask again. Before, the API left the
    host process at 0077 for good."""
    from dream_memory import Workspace

    previous = os.umask(0o022)
    try:
        ws = Workspace(tmp_path / "ws", env={"HOME": str(tmp_path), "DREAM_UMASK": "0077"})
        ws.init()
        ws.append("- [durable] User prefers tea.")
        report = ws.dream(model="offline")
        after = os.umask(0o022)
    finally:
        os.umask(previous)
    assert report.exit_code == 0
    assert after == 0o022
    assert stat.S_IMODE((tmp_path / "ws" / "memory" / ".dream_cursor").stat().st_mode) & 0o077 == 0


def test_api_calls_running_at_once_keep_dream_umask_and_give_the_host_its_own_back(tmp_path: Path) -> None:
    """A Dream run in one thread and an append in another, on one Workspace: the append ending
    does not take DREAM_UMASK from the run (whose later files were made private), and once both
    have ended the host has its own umask back, not the run's (a second call had saved the
    first's DREAM_UMASK as the host's, for good)."""
    import threading
    import time

    from dream_memory import Workspace
    from dream_memory.adapters.offline import OfflineModel

    class Slow(OfflineModel):
        def complete(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            time.sleep(0.4)
            return super().complete(*args, **kwargs)  # type: ignore[arg-type]

    def umask_now() -> int:
        value = os.umask(0o077)
        os.umask(value)
        return value

    previous = os.umask(0o077)
    try:
        ws = Workspace(tmp_path / "ws", env={"HOME": str(tmp_path), "DREAM_UMASK": "0002"})
        ws.init()
        for n in range(3):
            ws.append(f"- [durable] User fact number {n} about tea.")
        reports: list[object] = []
        run = threading.Thread(target=lambda: reports.append(ws.dream(model=Slow())))
        run.start()
        time.sleep(0.2)
        ws.append("- [durable] appended while the run is going")
        during = umask_now()
        run.join(timeout=60)
        after = umask_now()
    finally:
        os.umask(previous)
    assert reports and getattr(reports[0], "exit_code", None) == 0
    assert during == 0o002
    assert after == 0o077
    state = tmp_path / "ws" / "memory" / ".dream_state.json"
    assert not state.exists() or stat.S_IMODE(state.stat().st_mode) & 0o060 == 0o060
