"""An MCP tool's error names the option the way the tool takes it: `asOf`, never the CLI's
`--as-of`, which an MCP client cannot pass. Options no tool takes (the server's scope and
workspace, fixed when it starts) are left out of the advice instead of naming `--scope`,
`--session-key` or `--workspace`. The messages come from the services the CLI shares, which word
them once; the CLI still names its flags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.shared.exceptions import MCPError

from dream_memory import Workspace
from dream_memory.app.read import ReaderScope
from dream_memory.core.history import HistoryEntry
from dream_memory.core.scopes import ScopeRules
from dream_memory.entrypoints.cli import cli
from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.testing import FrozenClock, build_workspace

FLAG = re.compile(r"--[a-z]")
FIXED_SCOPE = "set when it started; no argument of a call changes it"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A workspace with one Dream commit, one that is no git repository, one with no commit."""
    base = tmp_path_factory.mktemp("option-names")
    dreamt, plain, unborn = base / "dreamt", base / "plain", base / "unborn"
    for root in (dreamt, plain, unborn):
        build_workspace(root)
    when = "2026-04-03T10:00:00+00:00"
    entry = HistoryEntry(1, "2026-04-03 10:00", "- [entity] ledger-api: stores balances")
    (dreamt / "memory" / "history.jsonl").write_text(entry.to_json_line() + "\n", encoding="utf-8")
    env = {"HOME": str(base), "DREAM_WORKSPACE": str(dreamt)}
    assert Workspace(dreamt, env=env, clock=FrozenClock(when, step=1)).dream(model="offline").exit_code == 0
    subprocess.run(["git", "init", "-q", str(unborn)], check=True)
    return {"dreamt": dreamt, "plain": plain, "unborn": unborn}


# (store, tool, arguments, the CLI's command for the same input, what the MCP error must say)
CASES: list[tuple[str, str, dict[str, Any], list[str], str]] = [
    ("dreamt", "dream_entity", {"name": "ledger-api", "asOf": "nope"}, ["entity", "ledger-api", "--as-of", "nope"],
     "asOf 'nope' is not a date"),
    ("dreamt", "dream_section", {"name": "user", "asOf": "2026-13-45"}, ["section", "user", "--as-of", "2026-13-45"],
     "asOf '2026-13-45' is not a date: month must be in 1..12"),
    ("dreamt", "dream_entity", {"name": "ledger-api", "asOf": "2026-04-05 10:00+99:99"},
     ["entity", "ledger-api", "--as-of", "2026-04-05 10:00+99:99"], "the offset +99:99 is no time zone"),
    ("dreamt", "dream_section", {"name": "user", "asOf": "2020-01-01"}, ["section", "user", "--as-of", "2020-01-01"],
     "asOf 2020-01-01 is before the store's first commit"),
    ("plain", "dream_entity", {"name": "ledger-api", "asOf": "2026-04-04"},
     ["entity", "ledger-api", "--as-of", "2026-04-04"], "drop asOf to read the files as they are now"),
    ("unborn", "dream_section", {"name": "user", "asOf": "2026-04-04"}, ["section", "user", "--as-of", "2026-04-04"],
     "asOf 2026-04-04: the store has no commits yet\n  hint: drop asOf, or run"),
    ("dreamt", "dream_section", {"name": "private-user"}, ["section", "private-user"],
     "a reader's scope is set when it starts, never by a call"),
    ("dreamt", "dream_why", {"path": "scopes/user/alice/USER.md", "line": 1}, ["why", "scopes/user/alice/USER.md:1"],
     f"this reader reads as the shared scope, {FIXED_SCOPE}"),
    ("dreamt", "dream_why", {"path": "/etc/passwd", "line": 1}, ["why", "/etc/passwd:1"],
     "hint: give a memory file of this workspace (relative to it, e.g. USER.md)\n"),
]  # fmt: skip


def mcp_error(root: Path, tool: str, arguments: dict[str, Any], scope: ReaderScope | None = None) -> str:
    async def go() -> str:
        async with Client(build_server(root, home=str(root.parent), workspace=root, scope=scope)) as client:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, result
            return "".join(getattr(block, "text", "") for block in result.content) + "\n"

    return str(anyio.run(go))


def cli_error(root: Path, args: list[str]) -> str:
    env = {"HOME": str(root.parent), "DREAM_MEMORY_STORE": None, "DREAM_MEMORY_SCOPE": None}
    result = CliRunner().invoke(cli, [*args, "--workspace", str(root)], env=env)
    assert result.exit_code in (1, 2), (result.stdout, result.stderr)  # not found: 1, bad input: 2
    return str(result.stderr)


@pytest.mark.parametrize(
    ("store", "tool", "arguments", "command", "said"), CASES, ids=[f"{c[1]}-{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_an_mcp_tool_error_names_the_tools_own_argument(
    stores: dict[str, Path], store: str, tool: str, arguments: dict[str, Any], command: list[str], said: str
) -> None:
    """Before, each of these told an MCP client to pass --as-of, --scope/--session-key or
    --workspace; the CLI's message for the same input names its flags as it did."""
    root = stores[store]
    text = mcp_error(root, tool, arguments)
    assert said in text, text
    assert not FLAG.search(text), text
    assert FLAG.search(cli_error(root, command))


def test_a_private_servers_why_names_its_scope_and_no_flag(stores: dict[str, Path]) -> None:
    who = ReaderScope("user:bob", ScopeRules.parse({"telegram:*": "user:{id}"}))
    text = mcp_error(stores["dreamt"], "dream_why", {"path": "scopes/user/alice/USER.md", "line": 1}, who)
    assert f"this reader reads as scope user:bob, {FIXED_SCOPE}" in text, text
    assert not FLAG.search(text), text


def test_a_resource_error_names_no_flag_either(stores: dict[str, Path]) -> None:
    """The resources and the prompt render the services' errors the same way as the tools."""
    root = stores["dreamt"]

    async def go() -> str:
        async with Client(build_server(root, home=str(root.parent), workspace=root)) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource("memory://sections/private-user")
            return str(refused.value)

    text = str(anyio.run(go))
    assert "a reader's scope is set when it starts, never by a call" in text, text
    assert not FLAG.search(text), text


def test_the_cli_keeps_its_flag_names(stores: dict[str, Path]) -> None:
    """The same errors through the CLI: the flags a person types, word for word as before."""
    root, plain = stores["dreamt"], stores["plain"]
    said = {
        "--as-of 'nope' is not a date": cli_error(root, ["entity", "ledger-api", "--as-of", "nope"]),
        "drop --as-of to read the files": cli_error(plain, ["section", "user", "--as-of", "2026-04-04"]),
        "give --scope NAME or --session-key KEY (or DREAM_MEMORY_SCOPE)": cli_error(root, ["section", "private-user"]),
        "this reader reads as the shared scope; give --scope or --session-key to change it": cli_error(
            root, ["why", "scopes/user/alice/USER.md:1"]
        ),
        "or pick the workspace with --workspace": cli_error(root, ["why", "/etc/passwd:1"]),
    }
    for words, text in said.items():
        assert words in text, text
