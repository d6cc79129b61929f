"""A number given to a service is judged once, by the service (app/inputs.py, from the config
setting's range): the CLI and the API refuse the same values with the same message, exit 2. They
used to disagree: `max_cost=-1` said "more than 0" while 0 was taken, `--budget 50` consolidated
under a budget the config file refused (it asked for 100), and `context(budget="500")` was a raw
TypeError while 500.7 was taken. Real workspaces."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dream_memory import Workspace
from dream_memory.errors import DreamError, cli_spelling

Dream = Callable[..., subprocess.CompletedProcess[str]]

# (CLI arguments, API call, what the message says)
CASES: list[tuple[list[str], Callable[[Workspace], Any], str]] = [
    (["run", "--max-cost", "-1"], lambda w: w.dream(model="offline", max_cost=-1), "at least 0 (got -1"),
    (["run", "--max-cost", "inf"], lambda w: w.dream(model="offline", max_cost=float("inf")), "(got inf)"),
    (["run", "--max-seconds", "0"], lambda w: w.dream(model="offline", max_seconds=0), "more than 0 (got 0"),
    (["run", "--max-tokens", "0"], lambda w: w.dream(model="offline", max_tokens=0), "at least 1 (got 0)"),
    (["run", "--batch-size", "21"], lambda w: w.dream(model="offline", batch_size=21), "1..20 (got 21)"),
    (["run", "--max-batches", "0"], lambda w: w.dream(model="offline", max_batches=0), "at least 1 (got 0)"),
    (
        ["consolidate", "--all", "--budget", "0"],
        lambda w: w.consolidate(model="offline", budget=0),
        "at least 1 (got 0)",
    ),
    (["context", "--budget", "100"], lambda w: w.context(budget=100), "200..200000 (got 100)"),
]


@pytest.fixture
def ws(dream: Dream, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert dream("init", "-w", str(ws)).returncode == 0
    assert dream("append", "-w", str(ws), "- [durable] User likes tea.").returncode == 0
    return ws


@pytest.mark.parametrize(("args", "call", "says"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_the_cli_and_the_api_refuse_a_number_alike(
    dream: Dream, ws: Path, clean_env: dict[str, str], args: list[str], call: Callable[[Workspace], Any], says: str
) -> None:
    done = (
        dream(args[0], "-w", str(ws), "--model", "offline", *args[1:])
        if args[0] != "context"
        else dream(*args, "-w", str(ws))
    )
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    with pytest.raises(DreamError) as raised:
        call(Workspace(ws, env={"HOME": clean_env["HOME"]}))
    assert raised.value.exit_code == 2 and says in raised.value.message
    # the same words on both faces but the option's name, the API's keyword where the CLI adds its
    # flag (a float option prints as the float it parsed: -1.0 for -1)
    assert raised.value.spelled(cli_spelling).split(" (got ")[0] in done.stderr
    assert "--" not in raised.value.message
    assert (ws / "memory" / ".dream_cursor").read_text(encoding="utf-8").strip() == "0"


@pytest.mark.parametrize("budget", ["500", 500.7, True])
def test_a_context_budget_must_be_a_whole_number(ws: Path, clean_env: dict[str, str], budget: Any) -> None:
    # A number of the wrong kind is refused at the API's door, naming the argument
    # (tests/faces/test_api_argument_types.py); the service's range rule is for whole numbers.
    with pytest.raises(DreamError, match=r"context\(budget=\.\.\.\): expected an integer or None") as raised:
        Workspace(ws, env={"HOME": clean_env["HOME"]}).context(budget=budget)
    assert raised.value.exit_code == 2


def test_a_zero_cost_budget_is_a_budget_on_every_face(dream: Dream, ws: Path, clean_env: dict[str, str]) -> None:
    """0 is allowed (as maxCostUsd 0 is): the run stops before its first batch, nothing spent."""
    done = dream("run", "-w", str(ws), "--model", "offline", "--max-cost", "0", "--json")
    assert done.returncode == 0 and '"budget_exhausted"' in done.stdout, done.stderr
    report = Workspace(ws, env={"HOME": clean_env["HOME"]}).dream(model="offline", max_cost=0)
    assert report.status == "budget_exhausted"


def test_a_consolidation_budget_the_command_line_takes_the_config_file_takes(dream: Dream, ws: Path) -> None:
    config = ws.parent / "dream.json"
    config.write_text('{"agents": {"defaults": {"consolidate": {"budgetTokens": 50}}}}', encoding="utf-8")
    done = dream("status", "-w", str(ws), "--config", str(config))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "call",
    [
        lambda w: w.append_many("abc"),
        lambda w: w.append_many({"content": "one entry"}),
        lambda w: w.consolidate(model="offline", sessions="sessions/cli_direct.jsonl"),
    ],
    ids=["append_many(str)", "append_many(dict)", "consolidate(sessions=str)"],
)
def test_one_value_where_the_api_takes_a_list_is_refused_not_iterated(
    ws: Path, call: Callable[[Workspace], Any]
) -> None:
    """A string (or a mapping) where a list belongs is an InputError naming it: iterated, "abc"
    appended three entries "a", "b", "c", and a session path was read as the file "s"."""
    from dream_memory.errors import InputError

    workspace = Workspace(ws)
    before = workspace.status().to_json()["cursor"]
    with pytest.raises(InputError, match="expected a list"):
        call(workspace)
    assert workspace.status().to_json()["cursor"] == before
