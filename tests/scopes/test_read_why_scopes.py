"""`dream why`, `dream blame` and `--sources` in scopes (docs/provenance.md#scopes): another
scope's file is refused without its content, `why --text` looks only in visible files, and a
source entry of a scope the reader cannot see is shown as "an entry of another scope", without
its content or session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from scope_helpers import ALICE_USER, ALICE_USER_FILE, RULES, holds_any

from dream_memory.testing.invariants import git

CANARY = "ALICE-HISTORY-CANARY-4471"
LINE = "The team deploys on Fridays"
BOB = ("--session-key", "telegram:bob")
ALICE = ("--session-key", "telegram:alice")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose shared memory/MEMORY.md holds a line Dream learnt, before scopes were
    configured, from Alice's private entry (which also holds her canary); then the rules and
    Alice's private file, committed by hand."""
    root = tmp_path_factory.mktemp("why") / "ws"
    home = root.parent / "home"
    home.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }

    def dream(*args: str, text: str | None = None) -> None:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("dream")), *args], input=text, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    dream("init", "-w", str(root))
    entry = f"- [durable] {LINE}\nAlice told me her locker code {CANARY}\n"
    dream("append", "-w", str(root), "--session-key", "telegram:alice", "-", text=entry)
    dream("run", "-w", str(root), "--model", "offline")
    (root / "dream.json").write_text(json.dumps({"agents": {"defaults": {"scopes": RULES}}}), encoding="utf-8")
    (root / ALICE_USER_FILE).parent.mkdir(parents=True)
    (root / ALICE_USER_FILE).write_text(f"# Alice\n\n- Alice's locker code is {ALICE_USER}\n", encoding="utf-8")
    git(root, "add", "scopes")
    git(root, "-c", "user.name=Hand", "-c", "user.email=hand@example.invalid", "commit", "-qm", "alice's file")
    return root


def memory_line(ws: Path) -> int:
    lines = (ws / "memory/MEMORY.md").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if LINE in line)


def out(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def test_bob_sees_that_a_shared_line_came_from_another_scope_but_not_what_it_said(ws: Path, dream) -> None:
    """`dream why` as Bob on a shared line learnt from Alice's entry: the commit and the line
    are shown, the entry as "an entry of another scope" with no content or session."""
    text = dream("why", f"memory/MEMORY.md:{memory_line(ws)}", "-w", str(ws), *BOB)
    assert text.returncode == 0, text.stderr
    assert "an entry of another scope" in text.stdout and LINE in text.stdout
    assert CANARY not in out(text) and "telegram:alice" not in out(text)
    as_json = json.loads(dream("why", "--text", LINE, "-w", str(ws), *BOB, "--json").stdout)
    source = as_json[0]["sources"][0]
    assert (source["content"], source["session_key"], source["where"]) == (None, None, "an entry of another scope")
    blamed = dream("blame", "memory/MEMORY.md", "-w", str(ws), *BOB, "--json")
    assert blamed.returncode == 0 and CANARY not in out(blamed) and "telegram:alice" not in out(blamed)


def test_alice_sees_her_own_entry_behind_the_line(ws: Path, dream) -> None:
    """Alice's reader gets the whole source entry: her scope is the entry's."""
    found = dream("why", "--text", LINE, "-w", str(ws), *ALICE)
    assert found.returncode == 0 and CANARY in found.stdout and "telegram:alice" in found.stdout


def test_another_scopes_file_is_refused_by_why_and_blame_without_its_content(ws: Path, dream) -> None:
    """Bob (and a reader naming no scope) asking about Alice's file: exit 2, a message naming
    the file's scope rule, never its text; `why --text` on her words finds nothing."""
    for who in (BOB, ()):
        for args in (("why", f"{ALICE_USER_FILE}:3"), ("blame", ALICE_USER_FILE)):
            result = dream(*args, "-w", str(ws), *who)
            assert result.returncode == 2, (args, who, result.stdout)
            assert "belongs to another scope" in result.stderr and ALICE_USER not in out(result)
            assert "batch" not in result.stderr  # a reader, not a Dream batch
        absolute = dream("blame", str(ws / ALICE_USER_FILE), "-w", str(ws), *who)
        assert absolute.returncode == 2 and ALICE_USER not in out(absolute)
        searched = dream("why", "--text", ALICE_USER, "-w", str(ws), *who)
        assert searched.returncode == 1 and ALICE_USER not in searched.stdout
    mine = dream("blame", ALICE_USER_FILE, "-w", str(ws), *ALICE)
    assert mine.returncode == 0 and ALICE_USER in mine.stdout


def test_sources_flags_name_another_scopes_entry_without_its_session(ws: Path, dream) -> None:
    """`dream section memory --sources` and `dream context --sources` as Bob: the line says it
    was learnt from an entry of another scope, and names neither the entry's text nor its session."""
    page = dream("section", "memory", "--sources", "-w", str(ws), *BOB, "--json")
    assert page.returncode == 0, page.stderr
    learned = [row["learned"] for row in json.loads(page.stdout)["sources"] if row["learned"]]
    assert learned and set(learned) == {"learned from an entry of another scope"}
    block = dream("context", "--sources", "-w", str(ws), *BOB)
    assert "(learned from an entry of another scope)" in block.stdout
    for result in (page, block):
        assert CANARY not in out(result) and "telegram:alice" not in out(result)
    alice = dream("context", "--sources", "-w", str(ws), *ALICE)
    assert "learned from session telegram:alice" in alice.stdout


@pytest.mark.slow
def test_mcp_dream_why_follows_the_servers_scope(ws: Path) -> None:
    """`dream_why` on a server started for Bob: Alice's file refused, her entry shown without content."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("dream")), args=["mcp", "-w", str(ws), *BOB], env=env
    )

    async def go() -> None:
        with anyio.fail_after(90):
            async with Client(params) as client:
                line = await client.call_tool("dream_why", {"path": "memory/MEMORY.md", "line": memory_line(ws)})
                shown = "".join(getattr(b, "text", "") for b in line.content) + json.dumps(line.structured_content)
                assert not line.is_error and "an entry of another scope" in shown
                assert holds_any(shown, (CANARY, "telegram:alice")) == []
                refused = await client.call_tool("dream_why", {"path": ALICE_USER_FILE, "line": 3})
                said = "".join(getattr(b, "text", "") for b in refused.content)
                assert refused.is_error and "another scope" in said and ALICE_USER not in said

    anyio.run(go)
