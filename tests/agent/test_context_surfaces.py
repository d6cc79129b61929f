"""The memory block through its other doors: `--path` with excludes, and MCP's memory://context
resource and memory_context prompt (the SDK's own client, in process)."""

from __future__ import annotations

from pathlib import Path

import anyio
from click.testing import CliRunner
from mcp import Client

from dream_memory.entrypoints.cli import cli
from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.testing import build_workspace

INDEX = """# Index

| Entity | File | Repos |
|---|---|---|
| ledger-api | entities/ledger-api.md | /home/u/src/ledger-api |
| payroll | entities/payroll.md | /home/u/src/payroll (was salaries) |
"""


def store(tmp_path: Path) -> Path:
    return build_workspace(
        tmp_path / "ws",
        history=["- [durable] User prefers tea"],
        files={
            "USER.md": "# User\n\nUSER-MARKER\n",
            "index.md": INDEX,
            "entities/ledger-api.md": "# ledger-api\n\nLEDGER-ENTITY-BODY\n",
            "entities/payroll.md": "# payroll\n\nPAYROLL-SECRET-BODY\n",
        },
    )


def run_context(root: Path, tmp_path: Path, *args: str, exclude: str = "") -> str:
    env = {"HOME": "/home/u", "DREAM_MEMORY_EXCLUDE": exclude, "DREAM_MEMORY_STORE": ""}
    result = CliRunner().invoke(cli, ["context", "-w", str(root), *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_path_adds_the_entity_of_the_repository(tmp_path: Path) -> None:
    """--path inside a repository root adds that entity's page to the block."""
    text = run_context(store(tmp_path), tmp_path, "--path", "/home/u/src/ledger-api/cmd")
    assert "LEDGER-ENTITY-BODY" in text and "PAYROLL-SECRET-BODY" not in text


def test_excluded_entities_never_reach_the_block(tmp_path: Path) -> None:
    """An entity named in DREAM_MEMORY_EXCLUDE is never included, even when --path points at it."""
    root = store(tmp_path)
    assert "PAYROLL-SECRET-BODY" in run_context(root, tmp_path, "--path", "/home/u/src/payroll")
    text = run_context(root, tmp_path, "--path", "/home/u/src/payroll", exclude="Payroll")
    assert "PAYROLL-SECRET-BODY" not in text and "USER-MARKER" in text


def test_mcp_context_resource_and_prompt(tmp_path: Path) -> None:
    """memory://context and the memory_context prompt return the same block as `dream context`."""
    root = store(tmp_path)
    expected = run_context(root, tmp_path, "--budget", "8000")

    async def go() -> None:
        async with Client(build_server(root, excludes=("payroll",), home="/home/u")) as client:
            resource = await client.read_resource("memory://context")
            assert resource.contents[0].text == expected
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert "memory_context" in prompts
            prompt = await client.get_prompt("memory_context", {"budget": "8000", "path": "/home/u/src/payroll"})
            body = prompt.messages[0].content.text
            assert "USER-MARKER" in body and "PAYROLL-SECRET-BODY" not in body
            prompt = await client.get_prompt("memory_context", {"budget": "8000", "path": "/home/u/src/ledger-api"})
            assert "LEDGER-ENTITY-BODY" in prompt.messages[0].content.text

    anyio.run(go)
