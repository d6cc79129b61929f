"""`dream run --report FILE` never writes over the workspace: a FILE that resolves (symlinks
followed, `..` resolved) inside the workspace or inside its git directory is refused, exit 2,
before any work, every byte of the workspace unchanged. The one place a workspace may hold a
report is the container image's documented `--report /workspace/<name>.json`: a .json file in its
top folder (other than dream.json). A missing folder outside the workspace is created. Real
workspaces (`dream init`, `dream append`, `--model offline`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dream_helpers import dream_cli

from dream_memory.testing import clean_env

FACTS = ["- [durable] User prefers dark mode in every editor.", "- Decided to use PostgreSQL for the event store."]


def dream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return dream_cli(env, *args)


def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A workspace made as a user makes one: `dream init`, then entries by `dream append`, and an
    archive file as compaction leaves one."""
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0
    for fact in FACTS:
        assert dream(env, "append", fact).returncode == 0
    archive = ws / "memory" / "archive"
    archive.mkdir(exist_ok=True)
    (archive / "history-2026-01.jsonl").write_text('{"cursor": 0, "content": "archived"}\n', encoding="utf-8")
    (ws / "dream.json").write_text('{"agents": {"defaults": {"dream": {}}}}\n', encoding="utf-8")
    return ws, env


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (its .git too), by path: what must not change."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


WORKSPACE_FILES = [
    "memory/history.jsonl",
    "memory/archive/history-2026-01.jsonl",
    "memory/MEMORY.md",
    "memory/.dream_cursor",
    "memory/.cursor",
    "USER.md",
    "SOUL.md",
    "dream.json",
    ".git/HEAD",
    "memory/new-report.json",  # not there yet: a new file in a workspace folder is refused too
    ".git/new-report.json",
]


@pytest.mark.parametrize("target", WORKSPACE_FILES)
def test_a_report_path_inside_the_workspace_is_refused_before_any_work(tmp_path: Path, target: str) -> None:
    """`--report ws/<file>`: exit 2 naming the path and saying to write the report outside the
    workspace; no batch ran (the cursor stays, no commit), and every file of the workspace and
    its .git holds the same bytes (nothing created either)."""
    ws, env = workspace(tmp_path)
    before = snapshot(ws)
    done = dream(env, "run", "--model", "offline", "--json", "--report", str(ws / target))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert str(ws / target) in done.stderr and "outside the workspace" in done.stderr, done.stderr
    assert json.loads(done.stdout)["status"] == "failed"  # a scheduler still gets a report on stdout
    assert snapshot(ws) == before


def test_a_symlink_or_dotdot_path_into_the_workspace_is_refused(tmp_path: Path) -> None:
    """A link outside the workspace pointing at its history, and `x/../ws/USER.md`, resolve
    inside it: refused the same way, the history and USER.md unchanged."""
    ws, env = workspace(tmp_path)
    before = snapshot(ws)
    link = tmp_path / "report.json"
    link.symlink_to(ws / "memory" / "history.jsonl")
    (tmp_path / "x").mkdir()
    for target in (str(link), str(tmp_path / "x" / ".." / "ws" / "USER.md")):
        done = dream(env, "run", "--model", "offline", "--report", target)
        assert done.returncode == 2 and target in done.stderr and "inside the workspace" in done.stderr, done.stderr
    assert snapshot(ws) == before


def test_a_report_path_inside_an_enclosing_repository_git_directory_is_refused(tmp_path: Path) -> None:
    """A workspace kept in a folder of a larger repository (the GitHub Action's case): that
    repository's .git is the workspace's git directory, and refused too."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=clean_env(tmp_path / "home"))
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(repo / "memory-ws"))
    assert dream(env, "init").returncode == 0
    assert dream(env, "append", FACTS[0]).returncode == 0
    head = (repo / ".git" / "HEAD").read_bytes()
    done = dream(env, "run", "--model", "offline", "--report", str(repo / ".git" / "HEAD"))
    assert done.returncode == 2 and "git directory" in done.stderr, done.stderr
    assert (repo / ".git" / "HEAD").read_bytes() == head


def test_a_missing_report_folder_outside_is_created_and_one_inside_is_not(tmp_path: Path) -> None:
    """`--report reports/run.json` (a CI step's artifact folder) creates the folder; the same inside
    the workspace is refused before anything is created there."""
    ws, env = workspace(tmp_path)
    inside = ws / "memory" / "reports"
    refused = dream(env, "run", "--model", "offline", "--report", str(inside / "run.json"))
    assert refused.returncode == 2 and "inside the workspace" in refused.stderr, refused.stderr
    assert not inside.exists()
    target = tmp_path / "artifacts" / "run.json"
    done = dream(env, "run", "--model", "offline", "--report", str(target))
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_text(encoding="utf-8")) == json.loads(done.stdout)


def test_the_config_file_the_run_reads_is_never_the_report(tmp_path: Path) -> None:
    """A config file outside the workspace (DREAM_CONFIG, the container's and CI's case): `--report`
    naming it, directly or through a symlink, is refused before any work; the file is unchanged."""
    ws, env = workspace(tmp_path)
    config = tmp_path / "etc" / "dream.json"
    config.parent.mkdir()
    config.write_text('{"agents": {"defaults": {"model": "offline"}}}\n', encoding="utf-8")
    link = tmp_path / "report-link.json"
    link.symlink_to(config)
    env = {**env, "DREAM_CONFIG": str(config)}
    before = snapshot(ws)
    for target in (config, link):
        done = dream(env, "run", "--report", str(target))
        assert done.returncode == 2 and "config file this run reads" in done.stderr, done.stderr
    assert config.read_text(encoding="utf-8") == '{"agents": {"defaults": {"model": "offline"}}}\n'
    assert snapshot(ws) == before


def test_reports_outside_the_workspace_and_the_documented_top_level_json_still_work(tmp_path: Path) -> None:
    """A report outside the workspace is written, and overwritten by the next run; so is the
    container's `--report /workspace/report.json`, which git leaves untracked."""
    ws, env = workspace(tmp_path)
    outside = tmp_path / "reports" / "run.json"
    outside.parent.mkdir()
    outside.write_text("an earlier report\n", encoding="utf-8")
    done = dream(env, "run", "--model", "offline", "--report", str(outside))
    assert done.returncode == 0, done.stderr
    assert json.loads(outside.read_text(encoding="utf-8"))["status"] == "ok"
    dream(env, "append", FACTS[1] + " Again.")
    inside = ws / "report.json"
    for _ in range(2):
        done = dream(env, "run", "--model", "offline", "--report", str(inside))
        assert done.returncode == 0, done.stderr
        assert json.loads(inside.read_text(encoding="utf-8"))["workspace"] == str(ws)
    status = subprocess.run(["git", "-C", str(ws), "status", "--porcelain"], capture_output=True, text=True, env=env)
    assert "report.json" not in status.stdout
