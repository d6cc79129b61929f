"""Only `dream init` creates a workspace (issue 17): every other command, and every method of the
Python API but ``init()``, on a path with no workspace exits 2 (raises NoWorkspace), names the
path, says `dream init --workspace PATH` creates it, and leaves the disk exactly as it was.
Before, `dream run -w typo-dir` made a repository there and exited 0, `dream context` printed an
empty block, and `dream append` without --workspace made ~/.nanoinfra/workspaces/default."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dream_memory import Workspace
from dream_memory.errors import InputError, NoWorkspace

# Every command that works on a workspace, with the arguments it needs to get that far.
COMMANDS = [
    ("run", "--model", "offline"),
    ("run", "--model", "offline", "--dry-run"),
    ("context",),
    ("append", "- [durable] User prefers tea"),
    ("consolidate", "--all", "--model", "offline"),
    ("status",),
    ("log",),
    ("restore",),
    ("restore", "--apply-held", "1-2"),
    ("search", "tea"),
    ("entity", "someone"),
    ("section", "soul"),
    ("resolve", "/home/u/project"),
    ("prompt",),
    ("prompt", "init"),
    ("mcp",),
]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a folder)."""
    found: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_a_missing_workspace_is_exit_2_and_nothing_is_created(dream, tmp_path: Path, args: tuple[str, ...]) -> None:
    """`dream COMMAND -w DIR` with nothing at DIR: exit 2, the message names DIR and how to create
    it, and the whole temp tree (HOME included) is byte-identical afterwards."""
    target = tmp_path / "typo-dir"
    before = tree(tmp_path)
    done = dream(*args, "--workspace", str(target))
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert f"no workspace at {target}" in done.stderr
    assert f"dream init --workspace {target}" in done.stderr
    assert "Traceback" not in done.stderr
    assert tree(tmp_path) == before, args


@pytest.mark.parametrize("args", [("run", "--model", "offline"), ("append", "- x"), ("context",), ("status",)])
def test_a_folder_that_is_not_a_workspace_is_refused_too(dream, tmp_path: Path, args: tuple[str, ...]) -> None:
    """An existing folder with no SOUL.md, USER.md or memory/ (a home folder, a project checkout)
    is not turned into a workspace either: exit 2 naming it, nothing written in it."""
    target = tmp_path / "project"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = tree(tmp_path)
    done = dream(*args, "--workspace", str(target))
    assert done.returncode == 2, done.stderr
    assert f"{target} is not a dream workspace" in done.stderr and "dream init --workspace" in done.stderr
    assert tree(tmp_path) == before


def test_the_default_workspace_is_not_created_either(dream, clean_env: dict[str, str], tmp_path: Path) -> None:
    """No --workspace and no DREAM_WORKSPACE: `dream append` refuses ~/.nanoinfra/workspaces/default
    when it does not exist (exit 2, naming it) instead of creating it; after `dream init` (also on
    the default) the same append works."""
    default = Path(clean_env["HOME"]) / ".nanoinfra" / "workspaces" / "default"
    before = tree(tmp_path)
    done = dream("append", "- [durable] User prefers tea")
    assert done.returncode == 2 and f"no workspace at {default}" in done.stderr
    assert f"dream init --workspace {default}" in done.stderr
    assert tree(tmp_path) == before and not default.exists()
    assert dream("init").returncode == 0
    again = dream("append", "- [durable] User prefers tea")
    assert again.returncode == 0 and again.stdout.strip() == "1"


def test_init_then_run_and_context_work(dream, tmp_path: Path) -> None:
    """The way on from the error: `dream init -w DIR`, then `dream run` and `dream context` work there."""
    target = tmp_path / "ws"
    assert dream("run", "--model", "offline", "-w", str(target)).returncode == 2
    assert dream("init", "-w", str(target)).returncode == 0
    assert dream("append", "- [durable] User prefers tea", "-w", str(target)).returncode == 0
    run = dream("run", "--model", "offline", "--json", "-w", str(target))
    assert run.returncode == 0 and json.loads(run.stdout)["status"] == "ok"
    context = dream("context", "-w", str(target))
    assert context.returncode == 0 and "tea" in context.stdout


def test_a_nanobot_workspace_needs_no_init(dream, tmp_path: Path) -> None:
    """A folder nanobot made (memory/ with its history, no repository, no SOUL.md) is a workspace:
    Dream runs there as it is and starts versioning it."""
    ws = tmp_path / "nanobot-ws"
    (ws / "memory").mkdir(parents=True)
    line = {"cursor": 1, "timestamp": "2026-04-03 00:02", "content": "- [durable] User prefers tea"}
    (ws / "memory" / "history.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    run = dream("run", "--model", "offline", "--json", "-w", str(ws))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["cursor_after"] == 1
    assert (ws / ".git").is_dir()


def test_the_dream_run_report_still_reaches_a_scheduler(dream, tmp_path: Path) -> None:
    """A scheduled `dream run` on a missing workspace still prints a JSON report on stdout
    (status failed, the error in it) before it exits 2."""
    target = tmp_path / "gone"
    done = dream("run", "--model", "offline", "-w", str(target))
    report = json.loads(done.stdout)
    assert done.returncode == 2 and report["status"] == "failed"
    assert any(f"no workspace at {target}" in e for e in report["errors"])
    assert not target.exists()


def test_doctor_reports_a_missing_workspace_as_a_problem(dream, tmp_path: Path) -> None:
    """`dream doctor` on a missing workspace is a finding (exit 1 naming `dream init`), and it
    creates nothing."""
    target = tmp_path / "gone"
    done = dream("doctor", "-w", str(target))
    assert done.returncode == 1 and "dream init --workspace" in done.stdout + done.stderr
    assert not target.exists()


# --- the Python API ------------------------------------------------------------------------------


API_CALLS = {
    "append": lambda ws: ws.append("- [durable] User prefers tea"),
    "append_many": lambda ws: ws.append_many([{"content": "- one"}]),
    "status": lambda ws: ws.status(),
    "dream": lambda ws: ws.dream(model="offline"),
    "consolidate": lambda ws: ws.consolidate(model="offline"),
    "context": lambda ws: ws.context(),
    "search": lambda ws: ws.search("tea"),
    "log": lambda ws: ws.log(),
    "versions": lambda ws: ws.versions(),
    "restore": lambda ws: ws.restore("abcd"),
    "apply_held": lambda ws: ws.apply_held("1-2"),
    "discard_held": lambda ws: ws.discard_held("1-2"),
}


@pytest.mark.parametrize("name", sorted(API_CALLS))
def test_the_api_raises_no_workspace_and_creates_nothing(tmp_path: Path, name: str) -> None:
    """Each Workspace method but init() on a path with no workspace raises NoWorkspace (an
    InputError, exit_code 2, the same message as the CLI) and creates nothing."""
    target = tmp_path / "typo-dir"
    before = tree(tmp_path)
    ws = Workspace(target, env={"HOME": str(tmp_path / "home")})
    with pytest.raises(NoWorkspace, match="no workspace at") as raised:
        API_CALLS[name](ws)
    assert isinstance(raised.value, InputError) and raised.value.exit_code == 2
    assert f"dream init --workspace {target}" in str(raised.value)
    assert tree(tmp_path) == before


def test_the_api_works_after_init(tmp_path: Path) -> None:
    """Workspace(path).init() creates the workspace; append and dream then work on it."""
    ws = Workspace(tmp_path / "ws", env={"HOME": str(tmp_path / "home")})
    assert ws.init().commit is not None
    assert ws.append("- [durable] User prefers tea").cursor == 1
    assert ws.dream(model="offline").status == "ok"
