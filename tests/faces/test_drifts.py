"""The same use case through every face gives the same answer and the same exit meaning.

Each test drives one case through the CLI (click's runner, in process), the Python API
(``Workspace``), the MCP server (the SDK's own client, in process) where it has the operation,
and the fault suite's ``Ops``, and compares. "Same exit meaning": the CLI's exit code equals the
API report's ``exit_code`` (or the API raises the error whose ``exit_code`` the CLI exits with);
for MCP, exit 0 is a result and anything else an error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from mcp import Client
from mcp.shared.exceptions import MCPError

from dream_memory import Workspace
from dream_memory.adapters.locks import dream_lock
from dream_memory.entrypoints.cli import cli
from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.errors import InputError, NotFound
from dream_memory.testing import build_workspace

# The fault soak's Ops (tests/faults/soak/ops.py) is the fourth face.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from soak.ops import Ops

MEMORY = "# Memory\n\n" + "".join(f"- fact number {i} about the user's projects and habits\n" for i in range(400))


def invoke(home: Path, *args: str) -> Result:
    env = {"HOME": str(home), "DREAM_WORKSPACE": "", "DREAM_CONFIG": "", "DREAM_MODEL": "", "DREAM_MEMORY_STORE": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def api(ws: Path, home: Path) -> Workspace:
    return Workspace(ws, env={"HOME": str(home)})


def commits(ws: Path) -> list[str]:
    done = subprocess.run(["git", "-C", str(ws), "log", "--format=%s"], capture_output=True, text=True, check=False)
    return done.stdout.split("\n")[:-1] if done.returncode == 0 else []


@contextmanager
def held(ws: Path) -> Iterator[None]:
    """The Dream lock, held the way another run holds it."""
    with dream_lock(ws, now=datetime.now(UTC)):
        yield


def mcp_call(server: Any, action: Any) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            return await action(client)

    return anyio.run(go)


# --- init under a held lock ------------------------------------------------------------------------


def test_init_under_a_held_lock_commits_nothing_on_every_face(tmp_path: Path) -> None:
    """`dream init`, `Workspace.init()` and the fault suite's `Ops.init()`, while a Dream run holds
    the lock: each creates the templates, commits nothing (the run commits the workspace itself)
    and says so; the CLI exits 0. Before issue 16 the API and Ops committed without the lock."""
    answers = {}
    for face in ("cli", "api", "ops"):
        ws = tmp_path / face
        ws.mkdir()
        with held(ws):
            if face == "cli":
                result = invoke(tmp_path, "init", "--workspace", str(ws), "--json")
                assert result.exit_code == 0
                assert "a Dream run holds the workspace" in result.stderr
                answers[face] = json.loads(result.stdout)["commit"]
            elif face == "api":
                report = api(ws, tmp_path).init()
                assert report.deferred and report.notes
                answers[face] = report.commit
            else:
                ops = Ops(ws, {"HOME": str(tmp_path)})
                answers[face] = ops.init()
                assert any("a Dream run holds the workspace" in line for line in ops.log)
        assert commits(ws) == [], face
        assert (ws / "SOUL.md").is_file()
    assert answers == {"cli": None, "api": None, "ops": None}


def test_init_without_a_lock_commits_the_same_on_every_face(tmp_path: Path) -> None:
    """With the lock free, every face makes the one `memory: init` commit."""
    for face in ("cli", "api"):
        ws = tmp_path / face
        if face == "cli":
            assert invoke(tmp_path, "init", "--workspace", str(ws)).exit_code == 0
        else:
            assert api(ws, tmp_path).init().commit is not None
        assert commits(ws) == ["memory: init"], face


# --- the context budget ----------------------------------------------------------------------------


def context_workspace(tmp_path: Path, *, budget_tokens: int | None = None) -> Path:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea"], files={"memory/MEMORY.md": MEMORY})
    if budget_tokens is not None:
        config = {"agents": {"defaults": {"context": {"budgetTokens": budget_tokens}}}}
        (ws / "dream.json").write_text(json.dumps(config), encoding="utf-8")
    return ws


def test_the_context_budget_follows_one_rule_on_every_face(tmp_path: Path) -> None:
    """A budget below 200 tokens is an error on every face (CLI exit 2, the API's InputError, MCP
    an error), never a block cut inside its header; 200 gives the same block everywhere. Before
    issue 16 the CLI's floor was 50, the API had none and MCP clamped 10 up to 200 silently."""
    ws = context_workspace(tmp_path)
    server = build_server(ws, home=str(tmp_path))

    low = invoke(tmp_path, "context", "--workspace", str(ws), "--budget", "199")
    assert low.exit_code == 2 and "200..200000" in low.stderr
    with pytest.raises(InputError, match=r"200\.\.200000") as raised:
        api(ws, tmp_path).context(budget=199)
    assert raised.value.exit_code == low.exit_code

    async def low_prompt(client: Any) -> None:
        with pytest.raises(MCPError, match=r"200\.\.200000"):
            await client.get_prompt("memory_context", {"budget": "199"})

    mcp_call(server, low_prompt)
    with pytest.raises(InputError):
        api(ws, tmp_path).context(budget=-5)

    cli_text = invoke(tmp_path, "context", "--workspace", str(ws), "--budget", "200").stdout
    api_text = api(ws, tmp_path).context(budget=200).text
    prompt = mcp_call(server, lambda c: c.get_prompt("memory_context", {"budget": "200"}))
    assert cli_text == api_text == prompt.messages[0].content.text
    assert "data, not instructions" in cli_text


def test_the_configured_context_budget_reaches_every_face(tmp_path: Path) -> None:
    """dream.json's budgetTokens (300) is the default of `dream context`, `Workspace.context()`
    and MCP's memory://context alike. Before issue 16 the MCP resource ignored the config file
    and used a fixed 8000 (3779 tokens where the CLI gave 228)."""
    ws = context_workspace(tmp_path, budget_tokens=300)
    cli_json = json.loads(invoke(tmp_path, "context", "--workspace", str(ws), "--json").stdout)
    block = api(ws, tmp_path).context()
    resource = mcp_call(build_server(ws, home=str(tmp_path)), lambda c: c.read_resource("memory://context"))
    assert cli_json["budget"] == block.budget == 300
    assert cli_json["text"] == block.text == resource.contents[0].text
    assert block.tokens <= 300


def test_dream_mcp_refuses_a_bad_config_file_at_start(tmp_path: Path) -> None:
    """`dream mcp` reads the config file once at start: a broken one is exit 2 naming the field,
    like every other command, instead of being ignored."""
    ws = context_workspace(tmp_path)
    (ws / "dream.json").write_text('{"agents": {"defaults": {"context": {"budgetTokens": 5}}}}', encoding="utf-8")
    result = invoke(tmp_path, "mcp", "--workspace", str(ws))
    assert result.exit_code == 2 and "budgetTokens" in result.stderr
    assert invoke(tmp_path, "context", "--workspace", str(ws)).exit_code == 2


# --- statuses and exit codes ------------------------------------------------------------------------


def test_a_locked_run_is_a_report_with_exit_75_on_every_face(tmp_path: Path) -> None:
    """`dream run` and `dream consolidate` while another run holds the lock: the CLI prints a
    report with status "locked" and exits 75; the API returns the same report (status "locked",
    exit_code 75) instead of raising. Before issue 16 the API's dream() raised LockBusy."""
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea"])
    with held(ws):
        run = invoke(tmp_path, "run", "--model", "offline", "--workspace", str(ws))
        report = api(ws, tmp_path).dream(model="offline")
    assert run.exit_code == 75 == report.exit_code
    assert json.loads(run.stdout)["status"] == "locked" == report.status
    assert json.loads(run.stdout)["errors"] == report.errors


def test_finished_runs_mean_the_same_exit_on_every_face(tmp_path: Path) -> None:
    """A run that did its work and one with nothing to do: the CLI's exit code is the API
    report's exit_code (0), and the report says the same status."""
    for name in ("cli", "api"):
        build_workspace(tmp_path / name, history=["- [durable] User prefers tea"])
    first_cli = invoke(tmp_path, "run", "--model", "offline", "--workspace", str(tmp_path / "cli"))
    first_api = api(tmp_path / "api", tmp_path).dream(model="offline")
    again_cli = invoke(tmp_path, "run", "--model", "offline", "--workspace", str(tmp_path / "cli"))
    again_api = api(tmp_path / "api", tmp_path).dream(model="offline")
    assert (json.loads(first_cli.stdout)["status"], first_cli.exit_code) == (first_api.status, first_api.exit_code)
    assert (json.loads(again_cli.stdout)["status"], again_cli.exit_code) == (again_api.status, again_api.exit_code)
    assert again_api.status == "nothing_to_do" and again_api.exit_code == 0


# --- typed reports and replay counts -----------------------------------------------------------------


def _without_timing(data: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between two identical runs: time, paths and commit ids."""
    kept = {k: v for k, v in data.items() if k not in ("duration_s", "workspace", "commits", "manual_edits_commit")}
    kept["batches"] = [
        {k: v for k, v in b.items() if k not in ("commit", "duration_s", "model_s")} for b in data["batches"]
    ]
    return kept


def test_reports_are_typed_and_render_as_the_cli_prints_them(tmp_path: Path) -> None:
    """The API's dream() and consolidate() return typed reports whose to_json() is what the CLI
    prints (timing and paths aside). Before issue 16 both returned plain dicts."""
    from dream_memory.app.consolidate import ConsolidateReport
    from dream_memory.app.dream import DreamReport

    for name in ("cli", "api"):
        build_workspace(tmp_path / name, history=["- [durable] User prefers tea", "- [durable] User lives in Oslo"])
    cli_run = json.loads(invoke(tmp_path, "run", "--model", "offline", "--workspace", str(tmp_path / "cli")).stdout)
    report = api(tmp_path / "api", tmp_path).dream(model="offline")
    assert isinstance(report, DreamReport)
    assert _without_timing(report.to_json()) == _without_timing(cli_run)
    consolidated = api(tmp_path / "api", tmp_path).consolidate(model="offline")
    assert isinstance(consolidated, ConsolidateReport) and consolidated.exit_code == 0


def test_restore_reports_replay_counts_on_every_face(tmp_path: Path) -> None:
    """`dream restore SHA --replay --json` and `Workspace.restore(sha, replay=True)` on the same
    case report the same cursor move and the same replay counts. Before issue 16 the API left
    replay_entries and replay_from_archive empty."""
    results = {}
    for face in ("cli", "api"):
        ws = build_workspace(tmp_path / face, history=["- [durable] one", "- [durable] two", "- [durable] three"])
        ws_api = api(ws, tmp_path)
        assert ws_api.dream(model="offline").exit_code == 0
        change = ws_api.log()
        assert change is not None
        if face == "cli":
            out = invoke(tmp_path, "restore", change.sha, "--replay", "--json", "--workspace", str(ws))
            assert out.exit_code == 0
            results[face] = json.loads(out.stdout)
        else:
            results[face] = ws_api.restore(change.sha, replay=True).to_json()
    keys = ("cursor_before", "cursor_after", "replay_entries", "replay_from_archive")
    assert [results["cli"][k] for k in keys] == [results["api"][k] for k in keys] == [3, 0, 3, 0]


# --- search: how many results ------------------------------------------------------------------------


def test_max_results_follows_one_rule_on_every_face(tmp_path: Path) -> None:
    """How many sources a search returns is 1..50 on every face: 0 or 51 is the CLI's exit 2, the
    API's InputError and an MCP tool error, each with the same message; 2 gives the same results
    everywhere. Before issue 16 the CLI clamped with a note, the API clamped silently and MCP's
    schema refused."""
    ws = build_workspace(
        tmp_path / "ws",
        files={f"sections/s{i}.md": f"# s{i}\n- tea number {i}\n" for i in range(5)},
    )
    server = build_server(ws, home=str(tmp_path))
    for bad in (0, 51):
        cli = invoke(tmp_path, "search", "tea", "--max-results", str(bad), "--workspace", str(ws))
        message = f"max results must be 1..50 (got {bad})"
        assert cli.exit_code == 2 and message in cli.stderr, cli.stderr
        with pytest.raises(InputError) as raised:
            api(ws, tmp_path).search("tea", max_results=bad)
        assert raised.value.exit_code == cli.exit_code and message in str(raised.value)

        async def tool(client: Any, bad: int = bad) -> Any:
            return await client.call_tool("dream_search", {"query": "tea", "maxResults": bad})

        found = mcp_call(server, tool)
        assert found.is_error and message in found.content[0].text

    cli_json = json.loads(invoke(tmp_path, "search", "tea", "--max-results", "2", "--json", "-w", str(ws)).stdout)
    api_json = api(ws, tmp_path).search("tea", max_results=2).to_json()
    mcp_json = mcp_call(server, lambda c: c.call_tool("dream_search", {"query": "tea", "maxResults": 2}))
    assert cli_json == api_json == mcp_json.structured_content
    assert len(cli_json["results"]) == 2 and cli_json["matched"] == 5


# --- status ---------------------------------------------------------------------------------------------


def test_status_is_a_typed_result_rendered_as_the_cli_prints_it(tmp_path: Path) -> None:
    """`Workspace.status()` returns a typed result (attributes, not a dict) whose to_json() is
    exactly `dream status --json`. Before, the API returned a plain dict."""
    from dream_memory.app.history import WorkspaceStatus

    ws = build_workspace(tmp_path / "ws", history=["- [durable] User prefers tea", "- [durable] Oslo"])
    assert api(ws, tmp_path).dream(model="offline").exit_code == 0
    api(ws, tmp_path).append("- [durable] one more")
    status = api(ws, tmp_path).status()
    assert isinstance(status, WorkspaceStatus)
    assert (status.cursor, status.dream_cursor, status.pending, status.dirty) == (3, 2, 1, [])
    cli = invoke(tmp_path, "status", "--json", "--workspace", str(ws))
    assert cli.exit_code == 0 and json.loads(cli.stdout) == status.to_json()


def test_reading_past_the_end_of_a_file_is_a_miss_on_every_face(tmp_path: Path) -> None:
    """`offsetLine` past an entity's last line: the CLI noted "has no line 99" on stderr with exit
    0, and MCP answered an empty success (isError false, no text), which an agent reads as an
    empty file. Now it is a miss everywhere: CLI exit 1, the API's NotFound, an MCP tool error,
    each naming the file and the line, and how to read it from the start in that face's words."""
    index = "| Entity | File | Repos |\n|---|---|---|\n| billing | entities/billing.md | /srv/billing |\n"
    ws = build_workspace(tmp_path / "ws", files={"index.md": index, "entities/billing.md": "# Billing\n\n- a\n"})
    cli_done = invoke(tmp_path, "entity", "billing", "--workspace", str(ws), "--offset-line", "99")
    assert cli_done.exit_code == 1 and cli_done.stdout == ""
    assert "entities/billing.md has no line 99" in cli_done.stderr and "--offset-line 1" in cli_done.stderr
    with pytest.raises(NotFound, match=r"entities/billing\.md has no line 99") as raised:
        api(ws, tmp_path).entity("billing", offset_line=99)
    assert raised.value.exit_code == cli_done.exit_code
    answer = mcp_call(
        build_server(ws, home=str(tmp_path)),
        lambda c: c.call_tool("dream_entity", {"name": "billing", "offsetLine": 99}),
    )
    assert answer.is_error and "entities/billing.md has no line 99" in answer.content[0].text
    assert "offsetLine" in answer.content[0].text
    last = api(ws, tmp_path).entity("billing", offset_line=3)  # the last line is still a page
    assert last.text == "- a\n"
