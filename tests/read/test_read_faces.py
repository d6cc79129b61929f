"""One case, every face: `dream entity`/`section`/`search` (text and --json) and the MCP tools
(text content and structured content) say the same thing about the same file."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from mcp import Client
from read_helpers import read_env

from dream_memory import Workspace
from dream_memory.entrypoints.cli import cli as dream
from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.testing.hostile import cli


def printed(root: Path, *args: str) -> str:
    """What `dream ARGS` prints on stdout, byte for byte (click's ``stdout`` turns CRLF into LF)."""
    result = CliRunner().invoke(dream, [*args, "--store", str(root)], env=read_env(root))
    return result.stdout_bytes.decode("utf-8")


def mcp_calls(root: Path, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def go() -> list[Any]:
        async with Client(build_server(root, home="/home/u")) as client:
            return [await client.call_tool(tool, args) for tool, args in calls]

    return anyio.run(go)


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_crlf_line_ends_are_kept_exactly(make_store: Callable[..., Path]) -> None:
    """A file saved with CRLF reads back byte for byte in --json and structured content, and the
    text output prints the CR of a CRLF end as it is; a CR that does not end a line (the first of
    `\\r\\r\\n`) is shown as `\\x0d`. Before, every CR was dropped, both of `\\r\\r\\n` included."""
    raw = "# crlf\r\n\r\n- one\r\n- two\r\r\n"
    root = make_store({"entities/crlf.md": raw.encode(), "sections/crlf.md": raw.encode()})
    env = read_env(root)
    shown = "# crlf\r\n\r\n- one\r\n- two\\x0d\r\n"
    for command in ("entity", "section"):
        exact = json.loads(cli(command, "crlf", "--json", "--store", str(root), env=env).out)
        assert exact["text"] == raw
        assert (exact["first_line"], exact["last_line"]) == (1, 4)
        assert printed(root, command, "crlf") == shown
    entity, section = mcp_calls(root, ("dream_entity", {"name": "crlf"}), ("dream_section", {"name": "crlf"}))
    for answer in (entity, section):
        assert not answer.is_error
        assert answer.structured_content["text"] == raw
        assert text_of(answer) == shown


def test_crlf_lines_count_toward_the_byte_bound(make_store: Callable[..., Path]) -> None:
    """The CR kept in each line counts toward the 16 KiB bound: the exact text never exceeds it."""
    line = "- " + "x" * 98 + "\r\n"
    root = make_store({"entities/big.md": (line * 300).encode()})
    exact = json.loads(cli("entity", "big", "--json", "--store", str(root), env=read_env(root)).out)
    assert exact["truncated"]
    assert len(exact["text"].encode()) <= 16 * 1024
    assert exact["text"].splitlines(keepends=True)[0] == line
    assert exact["last_line"] * len(line) + len(exact["text"].splitlines()[-1]) + 1 == len(exact["text"].encode())


def test_context_names_an_entity_of_its_path_that_could_not_be_read(make_store: Callable[..., Path]) -> None:
    """`dream context --path` and `Workspace.context(path=...)`: when the entity resolved for the
    path is refused (binary) or its file is missing, what was left out names it; before, the block
    said "nothing left out". An excluded entity and one of another scope stay unmentioned."""
    table = (
        "| Entity | File | Repos |\n|---|---|---|\n"
        "| bin | entities/bin.md | /x/bin |\n"
        "| gone | entities/gone.md | /x/gone |\n"
        "| secret | entities/secret.md | /x/secret |\n"
        "| alice | scopes/user/alice/USER.md | /x/alice |\n"
    )
    root = make_store(
        {
            "index.md": table,
            "entities/bin.md": b"# bin\n\x00zebra\n",
            "entities/secret.md": "# secret\n- SECRETWORD\n",
            "scopes/user/alice/USER.md": "# alice\n- ALICEWORD\n",
        }
    )
    env = read_env(root, DREAM_MEMORY_EXCLUDE="secret")

    def left_out(path: str) -> tuple[list[str], list[str]]:
        done = cli("context", "--workspace", str(root), "--path", path, "--json", env=env)
        assert done.code == 0, done
        api = Workspace(root, env=env).context(path=path).left_out
        return json.loads(done.out)["left_out"], api

    for cli_notes, api_notes in (left_out("/x/bin"), left_out("/x/gone")):
        assert cli_notes == api_notes and len(cli_notes) == 1
    assert left_out("/x/bin")[0] == [
        "entity bin, whose root holds /x/bin: entities/bin.md is not a UTF-8 text file; "
        "the read side serves text only; not included"
    ]
    assert "entities/gone.md does not exist" in left_out("/x/gone")[0][0]
    for withheld in ("/x/secret", "/x/alice"):
        assert left_out(withheld) == ([], [])


def test_a_path_that_is_not_a_regular_file_is_refused_as_what_it_is(make_store: Callable[..., Path]) -> None:
    """A named pipe or a folder where a section file belongs, and a symlink committed where an
    entity file belongs, are refused (exit 1, a tool error) naming what they are; before, they
    were "does not exist" and `dream blame` said the symlink was "not committed yet"."""
    root = make_store({"index.md": "| Entity | File | Repos |\n|---|---|---|\n| sl | entities/sl.md | /x/sl |\n"})
    os.mkfifo(root / "sections" / "fifo.md")
    (root / "sections" / "dir.md").mkdir()
    (root / "entities" / "sl.md").symlink_to("../USER.md")
    git = ["git", "-C", str(root), "-c", "user.name=U", "-c", "user.email=u@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "index.md", "USER.md", "entities/sl.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "memory: manual edits"], check=True)
    env = read_env(root)
    expected = {
        ("section", "fifo"): "sections/fifo.md is a named pipe, not a regular file",
        ("section", "dir"): "sections/dir.md is a folder, not a regular file",
        ("entity", "sl", "--at", "HEAD"): "entities/sl.md is a symlink at ",
        ("blame", "entities/sl.md", "--workspace", str(root)): "entities/sl.md is a symlink in commit ",
        ("why", "entities/sl.md:1", "--workspace", str(root)): "entities/sl.md is a symlink in commit ",
    }
    for args, message in expected.items():
        done = cli(*args, "--store", str(root), env=env) if args[0] in ("section", "entity") else cli(*args, env=env)
        assert (done.code, done.out) == (1, ""), (args, done)
        assert message in done.err, (args, done.err)
        assert "does not exist" not in done.err and "not committed yet" not in done.err
    fifo, why = mcp_calls(
        root, ("dream_section", {"name": "fifo"}), ("dream_why", {"path": "entities/sl.md", "line": 1})
    )
    assert fifo.is_error and expected[("section", "fifo")] in text_of(fifo)
    assert why.is_error and "entities/sl.md is a symlink in commit " in text_of(why)
