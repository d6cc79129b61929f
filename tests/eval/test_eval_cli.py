"""`dream eval`: the retention evaluation, driven as a user runs it (a real `dream` process on a
clean machine, real workspaces and git repositories, a real HTTP model server where a model is
needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from dream_memory.adapters.git import GitStore
from dream_memory.app.evaluation import builtin_scenarios_root, canary_value, check_workspace, load_scenario
from dream_memory.core.prompts import CONSOLIDATION_MARKER
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer


def _report(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_offline_engine_passes_every_check_by_default(dream) -> None:
    """With no model configured, `dream eval` runs the offline engine (like `dream demo`), passes
    every item of every bundled scenario and exits 0."""
    proc = dream("eval", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = _report(proc)
    assert report["model"] == "offline"
    assert report["passed"] is True
    assert report["score"]["passed"] == report["score"]["total"] > 40
    names = {s["name"] for s in report["scenarios"]}
    assert {"personal", "project"} <= names
    for scenario in report["scenarios"]:
        checks = {c["check"]: c for c in scenario["checks"]}
        # Every kind of check is exercised by every scenario, so a full score means something.
        for check in ("kept", "right_file", "no_duplicates", "superseded_gone", "superseded_in_history"):
            assert checks[check]["total"] > 0, (scenario["name"], check)
        assert checks["noise_left_out"]["total"] >= 4
        assert checks["no_secret"]["total"] == 1
        assert scenario["workspace"] is None  # removed without --keep
    scenarios = [load_scenario(p) for p in sorted(builtin_scenarios_root().iterdir())]
    kinds = {q.kind for s in scenarios for q in s.questions}
    assert {"fact", "preference", "update", "deletion"} <= kinds


def test_score_table_is_the_same_on_every_run(dream) -> None:
    """The printed score table is deterministic: two runs print exactly the same text, and it
    shows the do-nothing baseline beside each score."""
    first = dream("eval", "--model", "offline", timeout=120)
    second = dream("eval", "--model", "offline", timeout=120)
    assert first.returncode == second.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    lines = first.stdout.splitlines()
    assert lines[0] == "dream eval: model offline, 3 scenario(s)"
    assert any(line.startswith("facts kept") for line in lines)
    assert any(line.startswith("no secret committed or stored") for line in lines)
    assert any(line.startswith("do-nothing baseline") and "15/40" in line for line in lines), first.stdout
    assert lines[-1] == "overall: PASS"


def test_kept_workspaces_show_the_superseded_value_in_git_log(dream, tmp_path: Path) -> None:
    """--keep leaves the workspaces: `git log -p` there shows the old time zone that memory no
    longer holds, and no commit holds the pasted token."""
    proc = dream("eval", "--scenario", "personal", "--keep", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    (scenario,) = _report(proc)["scenarios"]
    root = Path(scenario["workspace"])
    try:
        user = (root / "USER.md").read_text(encoding="utf-8")
        assert "Europe/Berlin" in user and "Europe/Lisbon" not in user and "Joana" not in user
        log = subprocess.run(
            ["git", "-C", str(root), "log", "-p", "--all"], capture_output=True, text=True, check=True
        ).stdout
        assert "Europe/Lisbon" in log and "Joana" in log
        spec = load_scenario(builtin_scenarios_root() / "personal")
        token = canary_value(spec, spec.canaries[0])
        assert token.startswith("ghp_")
        assert token not in log
        assert token in (root / "sessions" / "telegram_ana-2026-03-09.jsonl").read_text(encoding="utf-8")
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def _forgetful(request: dict[str, Any]) -> Reply:
    """A model that keeps nothing: every summary is (nothing), every analysis [SKIP]."""
    user = next((m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"), "")
    return Reply("(nothing)" if CONSOLIDATION_MARKER in user else "[SKIP]")


def test_engine_that_drops_every_fact_scores_below_threshold_and_exits_1(dream, tmp_path: Path) -> None:
    """A configured model that keeps nothing (served over HTTP) fails the evaluation: facts are
    missing, nothing superseded was ever committed, its score is exactly the do-nothing baseline
    shown beside it, and the exit code is 1."""
    with ScriptedLLMServer(responder=_forgetful) as server:
        config = tmp_path / "dream.json"
        preset = {
            "model": "openai/forgetful",
            "apiBase": server.base_url,
            "apiKeyEnv": "FORGETFUL_KEY",
            "maxRetries": 0,
        }
        config.write_text(
            json.dumps({"agents": {"defaults": {"model": "forgetful"}}, "modelPresets": {"forgetful": preset}}),
            encoding="utf-8",
        )
        proc = dream("eval", "--config", str(config), "--json", env={"FORGETFUL_KEY": "not-a-secret"}, timeout=180)
        assert server.completion_requests()
    assert proc.returncode == 1, proc.stderr
    report = _report(proc)
    assert report["model"] == "openai/forgetful"
    assert report["passed"] is False
    for scenario in report["scenarios"]:
        assert scenario["passed"] is False
        assert scenario["score"]["share"] < scenario["threshold"]
        checks = {c["check"]: c for c in scenario["checks"]}
        assert checks["kept"]["passed"] == 0
        assert checks["superseded_in_history"]["passed"] == 0
        assert checks["runs"]["passed"] == checks["runs"]["total"]  # it ran fine; it just kept nothing
        failed = [i for i in scenario["items"] if not i["passed"]]
        assert any("is in no memory file" in i["detail"] for i in failed)
        assert scenario["baseline"]["passed"] == scenario["score"]["passed"] and scenario["above_baseline"] == 0


def _committed_secret(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    scenario = load_scenario(builtin_scenarios_root() / "project")
    value = canary_value(scenario, scenario.canaries[0])
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(f"# Memory\n\n- bucket key {value}\n", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "memory: init"], check=True)
    (root / "memory" / "MEMORY.md").write_text("# Memory\n\n- bucket key [REDACTED:aws_access_key]\n", encoding="utf-8")
    return root, {spec.placeholder: value for spec in scenario.canaries}


def test_a_committed_secret_fails_the_required_check(tmp_path: Path) -> None:
    """If a scenario's fake secret reached any commit, `no_secret` fails and names the commit and
    file, so the scenario fails whatever the rest of its score."""
    scenario = load_scenario(builtin_scenarios_root() / "project")
    root, secrets = _committed_secret(tmp_path)
    items = check_workspace(scenario, root, [], secrets)
    (secret,) = [i for i in items if i.check == "no_secret"]
    assert not secret.passed
    assert "memory/MEMORY.md in commit" in secret.detail
    assert not any(value in secret.detail for value in secrets.values())  # the secret itself is never printed


def test_broken_scenario_is_a_usage_error(dream, tmp_path: Path) -> None:
    """A scenario folder whose scenario.json lacks a field exits 2 naming the file and the field."""
    folder = tmp_path / "mine" / "broken"
    (folder / "sessions").mkdir(parents=True)
    (folder / "scenario.json").write_text(json.dumps({"name": "broken", "days": [], "questions": []}), "utf-8")
    proc = dream("eval", "--scenarios", str(tmp_path / "mine"), timeout=60)
    assert proc.returncode == 2
    assert "scenario.json" in proc.stderr and "threshold" in proc.stderr


def test_the_history_checks_read_git_through_the_given_opener(tmp_path: Path) -> None:
    """A secret committed once is found in git by the default opener; an opener that finds no
    repository is the one asked (for this workspace only: the history and the provenance checks),
    and then the commit is not seen."""
    root, secrets = _committed_secret(tmp_path)
    scenario = load_scenario(builtin_scenarios_root() / "project")
    by_default = {i.check: i for i in check_workspace(scenario, root, [], secrets) if i.check == "no_secret"}
    assert not by_default["no_secret"].passed

    asked: list[Path] = []

    def no_repository(path: Path) -> GitStore | None:
        asked.append(path)
        return None

    items = check_workspace(scenario, root, [], secrets, open_git=no_repository)
    (secret,) = [i for i in items if i.check == "no_secret"]
    assert set(asked) == {root}
    assert secret.passed  # the only copy left is in the commit the opener did not show


def test_a_scenario_named_twice_runs_once(dream) -> None:
    """`--scenario personal --scenario personal` runs it once: it ran twice, two rows of one
    scenario in the table and twice the model's cost."""
    proc = dream("eval", "--scenario", "personal", "--scenario", "personal", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [s["name"] for s in _report(proc)["scenarios"]] == ["personal"]
