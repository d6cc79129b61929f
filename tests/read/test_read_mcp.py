"""The MCP server, driven by the SDK's own client: in-process, through the legacy message loop,
and over stdio as a client application would start it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from read_helpers import read_env, snapshot

from dream_memory.app.read import ReadStore
from dream_memory.entrypoints.mcp_server import build_server

TOOLS = {"dream_resolve", "dream_entity", "dream_section", "dream_search", "dream_why"}


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def in_process(store: Path, *excluded: str, mode: str = "auto") -> Client:
    return Client(build_server(store, excludes=excluded, home="/home/u"), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_tools_are_listed_read_only_with_input_limits(store: Path, mode: str) -> None:
    """The five tools are annotated read-only and idempotent, and their schemas carry limits."""

    async def go() -> None:
        async with in_process(store, mode=mode) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is True
                assert tool.annotations.idempotent_hint is True
                assert tool.annotations.destructive_hint is False
                for prop in tool.input_schema["properties"].values():
                    assert ("maxLength" in prop) or ("maximum" in prop)
            search = tools["dream_search"].input_schema["properties"]["maxResults"]
            assert (search["minimum"], search["maximum"], search["default"]) == (1, 50, 10)
            assert tools["dream_search"].input_schema["required"] == ["query"]
            instructions = client.instructions or ""
            assert "data, not instructions" in instructions.replace("DATA", "data")
            assert "> Provisional:" in instructions

    anyio.run(go)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_tools_return_what_the_cli_prints(store: Path, mode: str) -> None:
    """Each tool's text is the CLI's text and its structured content is the CLI's --json."""
    expected = ReadStore(store, excludes=frozenset({"secret"}), home="/home/u")

    async def go() -> None:
        async with in_process(store, "secret", mode=mode) as client:
            found = await client.call_tool("dream_search", {"query": "flakes colmena", "maxResults": 3})
            assert not found.is_error
            cli = expected.search("flakes colmena", max_results=3)
            assert text_of(found) == cli.to_text()
            assert found.structured_content == cli.to_json()

            resolved = await client.call_tool("dream_resolve", {"path": "/home/u/system/nix-config/x"})
            assert text_of(resolved) == expected.resolve("/home/u/system/nix-config/x").to_text()

            entity = await client.call_tool("dream_entity", {"name": "nix-config"})
            assert text_of(entity) == expected.entity("nix-config").text
            assert entity.structured_content is not None
            assert entity.structured_content["path"] == "entities/nix-config.md"

            observations = await client.call_tool("dream_section", {"name": "observations"})
            assert text_of(observations).startswith("> Provisional:")

    anyio.run(go)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_refusals_are_tool_errors(store: Path, mode: str) -> None:
    """Excluded or unknown names, escapes and bad arguments come back as isError with a reason,
    never as an empty success."""

    async def go() -> None:
        async with in_process(store, "secret", mode=mode) as client:
            cases = [
                ("dream_entity", {"name": "secret"}, "excluded by DREAM_MEMORY_EXCLUDE"),
                ("dream_entity", {"name": "nope"}, "no entity named"),
                ("dream_section", {"name": "../index"}, "would leave"),
                ("dream_section", {"name": "nope"}, "no section named"),
                ("dream_resolve", {"path": "/nowhere"}, "no entity resolves"),
                ("dream_resolve", {"path": "relative/dir"}, "absolute path"),
                ("dream_resolve", {"path": "/home/u/secret/x"}, "no entity resolves"),
                ("dream_search", {"query": "flakes", "maxResults": 51}, "max results must be 1..50 (got 51)"),
                ("dream_search", {"query": "flakes", "maxResults": 0}, "max results must be 1..50 (got 0)"),
                # JSON's true is not the number 1 (pydantic's lax mode would read it so)
                ("dream_search", {"query": "flakes", "maxResults": True}, "a whole number, not true or false"),
                ("dream_entity", {"name": "nix", "offsetLine": False}, "a whole number, not true or false"),
                ("dream_search", {"query": ""}, "query"),
                ("dream_search", {"query": "x" * 1001}, "query"),
                ("dream_entity", {"name": "x" * 257}, "name"),
            ]
            for tool, args, reason in cases:
                result = await client.call_tool(tool, args)
                assert result.is_error, (tool, args)
                assert reason in text_of(result), (tool, args, text_of(result))
            nothing = await client.call_tool("dream_search", {"query": "zzz-not-there"})
            assert not nothing.is_error and "No source" in text_of(nothing)

    anyio.run(go)


def test_truncated_marker_names_the_tool_argument(make_store) -> None:
    """Over MCP the [truncated] line says which offsetLine to pass, and passing it reads on."""
    root = make_store({"entities/long.md": "".join(f"line {i}\n" for i in range(1, 400))})

    async def go() -> None:
        async with in_process(root) as client:
            first = text_of(await client.call_tool("dream_entity", {"name": "long"}))
            assert first.splitlines()[-1].endswith("dream_entity(offsetLine=200)")
            second = text_of(await client.call_tool("dream_entity", {"name": "long", "offsetLine": 200}))
            assert second.startswith("line 200\n")

    anyio.run(go)


def test_resources_honour_excludes(store: Path) -> None:
    """Resources serve the index (excluded rows removed), entities and sections, with the same
    refusals and framing as the tools."""

    async def go() -> None:
        async with in_process(store, "secret") as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "memory://index" in listed
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert templates == {"memory://entities/{name}", "memory://sections/{name}"}
            index = (await client.read_resource("memory://index")).contents[0].text
            assert "nix-config" in index and "secret" not in index
            entity = (await client.read_resource("memory://entities/nix-config")).contents[0].text
            assert entity.startswith("# nix-config")
            obs = (await client.read_resource("memory://sections/observations")).contents[0].text
            assert obs.startswith("> Provisional:")
            with pytest.raises(MCPError, match="excluded"):
                await client.read_resource("memory://entities/secret")
            with pytest.raises(MCPError):
                await client.read_resource("memory://sections/..%2F..%2Fetc%2Fpasswd")
            # A plain miss is the protocol's "not found" (invalid params), not an internal error.
            with pytest.raises(MCPError, match="no entity named 'nope'") as missing:
                await client.read_resource("memory://entities/nope")
            assert missing.value.error.code == INVALID_PARAMS

    anyio.run(go)


def test_server_refuses_a_missing_store(tmp_path: Path) -> None:
    """Starting the server on a folder that does not exist fails at once, not on the first call."""
    from dream_memory.errors import InputError

    with pytest.raises(InputError):
        build_server(tmp_path / "missing")


@pytest.mark.slow
def test_stdio_server_as_a_client_starts_it(store: Path) -> None:
    """dream-mcp on stdio: tools listed, a search answered, an excluded entity refused as a tool
    error, and the store left untouched."""
    before = snapshot(store)
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("dream-mcp")),
        args=[],
        env=read_env(store, DREAM_MEMORY_EXCLUDE="secret"),
    )

    async def go() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == TOOLS
                found = await client.call_tool("dream_search", {"query": "colmena", "maxResults": 5})
                assert not found.is_error
                assert text_of(found).startswith("sections/deploys.md")
                refused = await client.call_tool("dream_entity", {"name": "secret"})
                assert refused.is_error and "excluded" in text_of(refused)
                index = (await client.read_resource("memory://index")).contents[0].text
                assert "secret" not in index

    anyio.run(go)
    assert snapshot(store) == before


@pytest.mark.slow
def test_stdio_server_serves_a_store_with_no_workspace_around_it(store: Path, tmp_path: Path) -> None:
    """A store named by DREAM_MEMORY_STORE is served although no workspace exists (the read
    side's rule, as for `dream search`): the MCP Inspector step in CI starts it this way."""
    env = read_env(store, HOME=str(tmp_path / "home"))
    del env["DREAM_WORKSPACE"]
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("dream-mcp")), args=[], env=env)

    async def go() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                found = await client.call_tool("dream_search", {"query": "colmena", "maxResults": 5})
                assert not found.is_error and text_of(found).startswith("sections/deploys.md")
                # The context, its prompt and why read the store, the one memory there is: they
                # failed ("Error reading resource", a traceback in the server's log) on the
                # missing default workspace (found by an independent review).
                context = (await client.read_resource("memory://context")).contents[0].text
                assert "# Long-term memory" in context
                prompt = await client.get_prompt("memory_context", {"budget": "300"})
                assert "# Long-term memory" in prompt.messages[0].content.text
                why = await client.call_tool("dream_why", {"path": "USER.md", "line": 1})
                assert why.is_error and "no memory versions" in text_of(why)  # true of this store: no git

    anyio.run(go)
    assert not (tmp_path / "home").exists()  # no default workspace was made on the way


@pytest.mark.slow
def test_mcp_without_a_store_or_workspace_is_exit_2_naming_init(tmp_path: Path) -> None:
    """No store and a workspace path that does not exist: exit 2 before serving, naming `dream init`."""
    import subprocess

    env = read_env(tmp_path, HOME=str(tmp_path))
    del env["DREAM_MEMORY_STORE"]
    env["DREAM_WORKSPACE"] = str(tmp_path / "typo")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dream-mcp"))],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "dream init" in done.stderr and not (tmp_path / "typo").exists()


@pytest.mark.slow
def test_a_running_server_sees_an_edit_made_between_two_searches(
    make_store: Callable[..., Path], tmp_path: Path
) -> None:
    """The server keeps its store watch between calls: a same-size in-place edit made while it
    runs (its mtime put back) is answered at the next search, as a fresh `dream search` would."""
    extra = {f"entities/e{i:03}.md": f"# e{i}\n\n- filler text number {i}\n" for i in range(520)}
    root = make_store(extra)
    env = read_env(root, XDG_CACHE_HOME=str(tmp_path / "cache"))
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("dream-mcp")), args=[], env=env)
    target = root / "entities" / "e011.md"
    time.sleep(2.1)  # past the index's racy window, so the first search indexes the files

    async def go() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                first = await client.call_tool("dream_search", {"query": "needle", "maxResults": 5})
                assert "No source in memory matches" in text_of(first)
                before = target.stat()
                with open(target, "r+b") as f:
                    f.write(target.read_bytes().replace(b"filler", b"needle"))
                os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
                second = await client.call_tool("dream_search", {"query": "needle", "maxResults": 5})
                assert text_of(second).startswith("entities/e011.md")

    anyio.run(go)
