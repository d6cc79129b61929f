"""`dream run --max-seconds` / `--max-cost` follow the rule of their settings in the config file
(agents.defaults.dream.maxWallSeconds / maxCostUsd): `nan` is refused on the command line as it
is in the file (it used to mean "no budget" there), exit 2 before any work. Real
workspaces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dream_helpers import dream_cli

from dream_memory.testing import clean_env

OPTIONS = {"--max-seconds": "maxWallSeconds", "--max-cost": "maxCostUsd"}


def dream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return dream_cli(env, *args)


def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0
    for n in range(3):
        assert dream(env, "append", f"- [durable] User fact {n}: likes item-{n}.").returncode == 0
    return ws, env


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_a_nan_budget_is_refused_before_any_work(tmp_path: Path, option: str, value: str) -> None:
    """`dream run --max-seconds nan`: exit 2 naming the option, no batch ran (the cursor stays
    at 0, no commit), no traceback."""
    ws, env = workspace(tmp_path)
    head = (ws / ".git" / "refs" / "heads" / "main").read_bytes()
    done = dream(env, "run", "--model", "offline", "--batch-size", "1", option, value)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stdout[-400:])
    assert option in done.stderr and "nan" in done.stderr, done.stderr
    assert (ws / ".git" / "refs" / "heads" / "main").read_bytes() == head
    assert (ws / "memory" / ".dream_cursor").read_text(encoding="utf-8").strip() == "0"


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_the_command_line_and_the_config_file_accept_the_same_budgets(tmp_path: Path, option: str) -> None:
    """For each value, the option is refused (exit 2) exactly when the config file's setting is:
    one rule, in two places."""
    _ws, env = workspace(tmp_path)
    config = tmp_path / "dream.json"
    cfg_env = {**env, "DREAM_CONFIG": str(config)}
    for value in (float("nan"), float("-inf"), -1.0, 0.0, 0.5, 30.0, float("inf")):
        setting = {"agents": {"defaults": {"dream": {OPTIONS[option]: value}}}}
        config.write_text(json.dumps(setting), encoding="utf-8")  # NaN / Infinity as json writes them
        from_file = dream(cfg_env, "status").returncode
        assert from_file in (0, 2), from_file
        from_cli = dream(env, "run", "--model", "offline", "--dry-run", option, repr(value)).returncode
        assert (from_cli == 2) == (from_file == 2), (value, from_cli, from_file)


@pytest.mark.parametrize("budget", ["max_cost", "max_seconds"])
def test_the_python_api_refuses_a_nan_budget_as_the_command_line_does(tmp_path: Path, budget: str) -> None:
    """`Workspace.dream(max_cost=float("nan"))`: the InputError (exit code 2) the CLI's check
    stands for, before any batch; a NaN budget would never stop the run."""
    from dream_memory import Workspace
    from dream_memory.errors import InputError

    ws, env = workspace(tmp_path)
    api = Workspace(ws, env={"HOME": env["HOME"]})
    with pytest.raises(InputError, match=r"budget in \w+ \(max_\w+\) must be a number") as raised:
        api.dream(model="offline", **{budget: float("nan")})
    assert raised.value.exit_code == 2
    assert (ws / "memory" / ".dream_cursor").read_text(encoding="utf-8").strip() == "0"
    assert api.dream(model="offline", **{budget: 30.0}).status == "ok"
