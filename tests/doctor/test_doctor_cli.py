"""``dream doctor`` through the real CLI, as a separate process on a clean machine: it names each
problem with its fix and exits 1, is exit 0 on a healthy workspace, never prints a key, and
changes nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from dream_memory.testing import Fail, Reply, ScriptedLLMServer

Dream = Callable[..., CompletedProcess[str]]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (git's included) with its content hash and mtime."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = (
                f"{hashlib.sha256(path.read_bytes()).hexdigest()} {path.stat().st_mtime_ns}"
            )
    return out


@pytest.fixture
def ws(tmp_path: Path, dream: Dream) -> Path:
    root = tmp_path / "ws"
    assert dream("init", "--workspace", str(root)).returncode == 0
    return root


def doctor_json(dream: Dream, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    done = dream("doctor", "--json", *args, env=env)
    return done.returncode, json.loads(done.stdout)


def check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def test_a_fresh_workspace_with_a_model_is_healthy(ws: Path, dream: Dream) -> None:
    """After ``dream init`` with a model chosen, every check passes: exit 0 and 'healthy'."""
    done = dream("doctor", "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("dream doctor: healthy")
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 0 and report["healthy"] and report["problems"] == []
    assert check(report, "git")["summary"].startswith("HEAD ")
    assert check(report, "model")["details"] == ["key: none needed (the built-in offline engine)"]


def test_doctor_exits_1_on_an_invalid_config_and_names_it(ws: Path, dream: Dream) -> None:
    """A config value out of range is a problem naming the file and the field (not exit 2: the
    doctor's job is to report it), and the rest of the workspace is still checked."""
    (ws / "dream.json").write_text('{"agents": {"defaults": {"dream": {"maxBatchSize": 50}}}}', encoding="utf-8")
    done = dream("doctor", "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert done.returncode == 1
    assert "PROBLEM  config" in done.stdout
    assert f"{ws / 'dream.json'}" in done.stdout and "maxBatchSize" in done.stdout
    assert "fix: see docs/configuration.md" in done.stdout
    assert "dream doctor: 2 problem(s): config, model" in done.stdout
    code, report = doctor_json(dream, "--workspace", str(ws))
    assert code == 1 and report["problems"][0] == "config"
    assert check(report, "git")["status"] == "ok"


def test_no_workspace_is_a_problem_with_the_init_command_and_creates_nothing(tmp_path: Path, dream: Dream) -> None:
    """A path with no workspace: exit 1 naming the path and `dream init --workspace PATH`; the
    folder is not created."""
    missing = tmp_path / "typo-dir"
    done = dream("doctor", "--workspace", str(missing), env={"DREAM_MODEL": "offline"})
    assert done.returncode == 1
    assert f"no workspace at {missing}" in done.stdout
    assert f"`dream init --workspace {missing}` creates it" in done.stdout
    assert not missing.exists()


def test_a_folder_that_is_not_a_workspace_is_named(tmp_path: Path, dream: Dream) -> None:
    """An existing folder without SOUL.md, USER.md or memory/ is not taken for a workspace."""
    other = tmp_path / "photos"
    other.mkdir()
    code, report = doctor_json(dream, "--workspace", str(other), env={"DREAM_MODEL": "offline"})
    assert code == 1 and "is not a dream workspace" in check(report, "workspace")["summary"]


def test_a_stale_git_lock_is_named_with_how_to_remove_it(ws: Path, dream: Dream) -> None:
    """``.git/index.lock`` left by a killed process (older than a minute) blocks every commit:
    exit 1 naming it and the rm command; a lock a live git just took is not reported."""
    lock = ws / ".git" / "index.lock"
    lock.write_bytes(b"")
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 0, report  # a young lock: a git command may be running right now
    old = time.time() - 600
    os.utime(lock, (old, old))
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 1 and report["problems"] == ["git-locks"]
    locks = check(report, "git-locks")
    assert re.search(r"\.git/index\.lock \(6\d\d s old\)", locks["summary"]), locks["summary"]
    assert f"rm {ws}/.git/index.lock" in locks["fix"]


def test_a_held_batch_and_an_index_row_leading_nowhere_are_problems(ws: Path, dream: Dream) -> None:
    """A batch held by the deletion guard waits for a person (fix: --apply-held or
    --discard-held); an index.md row whose file does not exist is named by its line."""
    state = {
        "version": 1,
        "failure": None,
        "set_aside": [],
        "held": [{"id": "3-4", "cursor_from": 3, "cursor_to": 4, "reason": "would remove 18 lines", "created": "x"}],
    }
    (ws / "memory" / ".dream_state.json").write_text(json.dumps(state), encoding="utf-8")
    (ws / "entities").mkdir()
    (ws / "entities" / "ledger.md").write_text("# ledger\n", encoding="utf-8")
    (ws / "index.md").write_text(
        "| Entity | File | Repos |\n|---|---|---|\n| ledger | entities/ledger.md | /srv/ledger |\n"
        "| billing | entities/billing.md | /srv/billing |\n",
        encoding="utf-8",
    )
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 1
    assert set(report["problems"]) == {"held", "index"}
    assert "3-4" in check(report, "held")["summary"] and "--apply-held" in check(report, "held")["fix"]
    index = check(report, "index")
    assert index["summary"] == "1 of 2 index.md row(s) lead nowhere"
    assert index["details"][0].startswith("line 4 (billing):")


def test_unsaved_edits_and_a_pending_migration_are_warnings_not_problems(ws: Path, dream: Dream) -> None:
    """Things the next run copes with by itself are warnings with their explanation: exit 0."""
    with (ws / "USER.md").open("a", encoding="utf-8") as handle:
        handle.write("- Prefers tabs\n")
    (ws / "memory" / "HISTORY.md").write_text("[2026-03-12] Removed unused scripts\n", encoding="utf-8")
    done = dream("doctor", "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert done.returncode == 0, done.stdout
    assert "WARN     git           HEAD" in done.stdout and "unsaved edits in USER.md" in done.stdout
    assert "WARN     migration" in done.stdout
    assert "healthy (2 warning(s): git, migration)" in done.stdout


def test_the_key_source_is_named_never_the_key(ws: Path, dream: Dream) -> None:
    """The model check says which variable holds the key, and the key's value is nowhere in the
    output; a preset's apiKeyEnv is named when it holds the key."""
    secret = "sk-proj-" + "A1b2C3d4" * 6
    done = dream("doctor", "--workspace", str(ws), env={"DREAM_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": secret})
    assert done.returncode == 0, done.stdout
    assert "key: OPENAI_API_KEY" in done.stdout
    assert secret not in done.stdout + done.stderr
    (ws / "dream.json").write_text(
        json.dumps({"modelPresets": {"team": {"model": "openai/gpt-4o", "apiKeyEnv": "TEAM_KEY"}}}), encoding="utf-8"
    )
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "team", "TEAM_KEY": secret})
    assert code == 0 and check(report, "model")["details"] == ["key: TEAM_KEY"]
    assert "preset team" in check(report, "model")["summary"]
    missing = dream("doctor", "--workspace", str(ws), env={"DREAM_MODEL": "team"})
    assert missing.returncode == 1
    assert "reads its API key from TEAM_KEY, which is not set" in missing.stdout
    assert secret not in missing.stdout


def test_check_model_sends_one_tiny_request_to_the_endpoint(ws: Path, dream: Dream) -> None:
    """``--check-model`` against a scripted server on 127.0.0.1: exactly one request, and the
    check says it answered; without the flag, no request at all."""
    with ScriptedLLMServer([Reply("OK")]) as server:
        env = {"DREAM_MODEL": "openai/scripted", "DREAM_API_BASE": server.base_url}
        code, report = doctor_json(dream, "--workspace", str(ws), env=env)
        assert code == 0 and len(server.completion_requests()) == 0
        assert check(report, "model")["details"] == [
            "key: none (an endpoint without a key)",
            f"endpoint: {server.base_url}",
        ]
        code, report = doctor_json(dream, "--workspace", str(ws), "--check-model", env=env)
        assert code == 0, report
        assert len(server.completion_requests()) == 1
        assert check(report, "model-call")["summary"].startswith("openai/scripted answered one request in ")


def test_check_model_names_a_refusing_endpoint_once_without_retrying(ws: Path, dream: Dream) -> None:
    """An endpoint refusing the key (401): exit 1, the model-call problem names the status, and
    the doctor made one attempt (it does not wait out retries)."""
    with ScriptedLLMServer([Fail(401, "invalid api key"), Fail(401, "invalid api key")]) as server:
        env = {"DREAM_MODEL": "openai/scripted", "DREAM_API_BASE": server.base_url, "DREAM_API_KEY": "wrong"}
        code, report = doctor_json(dream, "--workspace", str(ws), "--check-model", env=env)
        assert code == 1 and report["problems"] == ["model-call"]
        assert "401" in check(report, "model-call")["summary"]
        assert len(server.completion_requests()) == 1


def test_doctor_changes_nothing_in_the_workspace(ws: Path, dream: Dream) -> None:
    """Every file of the workspace and its repository is byte for byte (and mtime) the same
    after a doctor run, problems or not."""
    (ws / "memory" / "HISTORY.md").write_text("[2026-03-12] Removed unused scripts\n", encoding="utf-8")
    before = tree_digest(ws)
    assert dream("doctor", "--workspace", str(ws)).returncode == 1  # no model configured
    assert dream("doctor", "--workspace", str(ws), "--json", env={"DREAM_MODEL": "offline"}).returncode == 0
    assert tree_digest(ws) == before


def test_bad_usage_is_exit_2(ws: Path, dream: Dream, tmp_path: Path) -> None:
    """An unknown option, or a workspace path that is a file: exit 2 with click's message."""
    assert dream("doctor", "--nope").returncode == 2
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    done = dream("doctor", "--workspace", str(afile))
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_a_damaged_repository_is_a_problem_in_the_report_not_a_crash(ws: Path, dream: Dream) -> None:
    """HEAD naming no commit: the doctor still prints its whole report, with the git problem and
    a way on, and exits 1 (before, any unreadable repository stopped it with exit 2 and no report)."""
    (ws / ".git" / "HEAD").write_text("x\n", encoding="utf-8")
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 1 and report["problems"] == ["git"]
    assert "cannot be read" in check(report, "git")["summary"]
    assert check(report, "git")["fix"]
    assert check(report, "disk")["status"] == "ok"


def test_an_unknown_config_key_is_a_warning_not_valid(ws: Path, dream: Dream) -> None:
    """`pinn` (for `pin`) in the write policy: every command warns it is ignored, so the doctor's
    config check is a warning naming the key, never "is valid"."""
    config = {
        "agents": {
            "defaults": {
                "model": "offline",
                "dream": {"writePolicy": {"files": {"USER.md": {"sections": {"Profile": {"pinn": True}}}}}},
            }
        }
    }
    (ws / "dream.json").write_text(json.dumps(config), encoding="utf-8")
    _code, report = doctor_json(dream, "--workspace", str(ws))
    config_check = check(report, "config")
    assert config_check["status"] == "warning", config_check
    assert "pinn" in " ".join(config_check["details"])
    assert "is valid" not in config_check["summary"]


def test_a_memory_file_that_is_not_utf8_is_a_problem(ws: Path, dream: Dream) -> None:
    """A Latin-1 USER.md makes every dream run fail: the doctor names the file, exit 1."""
    (ws / "USER.md").write_bytes(b"# User\n\n- caf\xe9\n")
    code, report = doctor_json(dream, "--workspace", str(ws), env={"DREAM_MODEL": "offline"})
    assert code == 1
    encoding = check(report, "encoding")
    assert encoding["status"] == "problem" and "USER.md" in encoding["summary"]
