"""The MCP server in scopes, driven by the SDK's own client over stdio as a client application
starts it: the scope is fixed when the server starts (`dream mcp --session-key`, `--scope` or
DREAM_MEMORY_SCOPE), every tool, resource and the prompt follow it, and no tool argument can
change it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from scope_helpers import ALICE_CANARIES, ALICE_USER, BOB_CANARIES, BOB_USER, holds_any, scoped_workspace

pytestmark = pytest.mark.slow  # each test starts dream mcp as a process (about 1.5 CPU s before it answers)

DREAM = str(Path(sys.executable).with_name("dream"))


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content) + repr(result.structured_content)


def params(ws: Path, *args: str, **env: str) -> StdioServerParameters:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return StdioServerParameters(command=DREAM, args=["mcp", "-w", str(ws), *args], env={**base, **env})


async def every_answer(client: Client) -> list[str]:
    """What every tool, resource and prompt answers to questions that would reach Alice's files:
    the text of each answer or of each error."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("dream_search", {"query": "locker code", "maxResults": 50}),
        ("dream_search", {"query": "ALICE", "maxResults": 50}),
        ("dream_search", {"query": "locker", "scope": "user:alice"}),  # an argument cannot pick the scope
        ("dream_entity", {"name": "alice-notes"}),
        ("dream_entity", {"name": "leak"}),
        ("dream_entity", {"name": "hard"}),
        ("dream_section", {"name": "private-user"}),
        ("dream_section", {"name": "private-memory"}),
        ("dream_section", {"name": "user"}),
        ("dream_resolve", {"path": "/home/u/team/alice/repo"}),
        ("dream_why", {"path": "scopes/user/alice/USER.md", "line": 3}),
        ("dream_why", {"path": "entities/leak.md", "line": 3}),
    ]
    answers: list[str] = []
    for name, arguments in calls:
        try:
            answers.append(text_of(await client.call_tool(name, arguments)))
        except MCPError as exc:
            answers.append(str(exc))
    for uri in (
        "memory://index",
        "memory://context",
        "memory://entities/alice-notes",
        "memory://entities/leak",
        "memory://sections/private-user",
        "memory://sections/private-memory",
    ):
        try:
            answers.append("".join(getattr(c, "text", "") for c in (await client.read_resource(uri)).contents))
        except MCPError as exc:
            answers.append(str(exc))
    prompt = await client.get_prompt("memory_context", {})
    answers.append("".join(getattr(m.content, "text", "") for m in prompt.messages))
    answers.append(str(client.instructions))
    return answers


@pytest.mark.parametrize(
    "start",
    [("--session-key", "telegram:bob"), ("--scope", "user:bob"), ()],
    ids=["session-key", "scope", "environment"],
)
def test_a_server_started_for_bob_never_answers_with_alices_text(tmp_path: Path, start: tuple[str, ...]) -> None:
    """Started for Bob's scope (by flag or DREAM_MEMORY_SESSION_KEY), no tool, resource or
    prompt answer holds Alice's canaries, while Bob's own file is served."""
    ws = scoped_workspace(tmp_path / "ws")
    env = {} if start else {"DREAM_MEMORY_SESSION_KEY": "telegram:bob"}

    async def go() -> None:
        with anyio.fail_after(90):
            async with Client(params(ws, *start, **env)) as client:
                answers = await every_answer(client)
                assert holds_any("\n".join(answers), ALICE_CANARIES) == []
                own = await client.call_tool("dream_section", {"name": "private-user"})
                assert not own.is_error and BOB_USER in text_of(own)
                found = await client.call_tool("dream_search", {"query": "locker code"})
                assert BOB_USER in text_of(found)
                context = (await client.read_resource("memory://context")).contents[0]
                assert BOB_USER in getattr(context, "text", "")

    anyio.run(go)


def test_a_server_started_for_alice_serves_her_files_and_none_of_bobs(tmp_path: Path) -> None:
    """The same questions to a server started for Alice: her canaries come back, Bob's never."""
    ws = scoped_workspace(tmp_path / "ws")

    async def go() -> None:
        with anyio.fail_after(90):
            async with Client(params(ws, DREAM_MEMORY_SCOPE="user:alice")) as client:
                joined = "\n".join(await every_answer(client))
                assert ALICE_USER in joined
                assert holds_any(joined, BOB_CANARIES) == []

    anyio.run(go)


def test_a_server_started_with_no_scope_serves_shared_files_only(tmp_path: Path) -> None:
    """No scope at start: the shared view, no private file of anyone."""
    ws = scoped_workspace(tmp_path / "ws")

    async def go() -> None:
        with anyio.fail_after(90):
            async with Client(params(ws)) as client:
                joined = "\n".join(await every_answer(client))
                assert holds_any(joined, ALICE_CANARIES + BOB_CANARIES) == []
                assert "standup" in joined

    anyio.run(go)


def test_a_server_given_both_a_scope_and_a_session_key_does_not_start(tmp_path: Path, dream_process) -> None:
    """`dream mcp --scope X --session-key K` is exit 2 before serving anything."""
    ws = scoped_workspace(tmp_path / "ws", links=False)
    result = dream_process("mcp", "-w", str(ws), "--scope", "user:bob", "--session-key", "telegram:bob", input="")
    assert result.returncode == 2 and "not both" in result.stderr
