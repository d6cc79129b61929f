"""Hostile stores (issue 14): index rows naming .git or raw history, symlinks out of the store,
excluded entities reached by another name, escape sequences in memory text.

What a user would notice if these failed: `dream entity` printing the job's token from
.git/config (a GitHub Actions checkout keeps it there), raw history served as an entity, a file
from elsewhere on the machine in an answer, an entity they excluded answered through a hard
link, a second index row, search or MCP, or their terminal acting on a model's escape codes.
"""

from __future__ import annotations

import json
import os
import subprocess
import unicodedata
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client
from read_helpers import read_env

from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.testing.hostile import cli

TOKEN = "ghs_TOKENFROMACTIONSCHECKOUT0123456789"

ROWS_NEVER_SERVED = {
    ".git/config": "a .git component",
    ".GIT/config": "a .git component",
    "./.git/./config": "a .git component",
    "memory/history.jsonl": "raw history",
    "memory/archive/2026-04.jsonl": "raw history",
    "memory/.dream_state.json": "hidden",
    "sessions/cli_direct.jsonl": "raw history",
    ".ssh/id_ed25519.md": "hidden",
    "dream.json": "not a markdown file",
    "notes/.env": "hidden",
}


def _store(make_store: Callable[..., Path], rows: dict[str, str]) -> Path:
    table = "| Entity | File | Repos |\n|---|---|---|\n" + "".join(
        f"| {name} | {file} | /home/u/src/{name} |\n" for name, file in rows.items()
    )
    root = make_store({"index.md": table})
    secret = f"[http]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n# {TOKEN}\n"
    for rel in ROWS_NEVER_SERVED:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(secret)
    # dream.json is also the workspace's config file, which the MCP server loads: a valid one,
    # holding a key as a real config does (a broken one stops the server at start, by design).
    (root / "dream.json").write_text(json.dumps({"providers": {"github": {"apiKey": TOKEN}}}))
    (root / ".git").mkdir(exist_ok=True)
    (root / ".git" / "config").write_text(secret)
    return root


def _mcp(root: Path, calls: list[tuple[str, dict[str, object]]], *excluded: str) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool call, through the SDK's client, in process."""

    async def go() -> list[tuple[bool, str]]:
        out = []
        async with Client(build_server(root, excludes=excluded, home="/home/u")) as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                out.append((bool(result.is_error), "".join(getattr(b, "text", "") for b in result.content)))
        return out

    return anyio.run(go)


@pytest.mark.parametrize("cell", sorted(ROWS_NEVER_SERVED))
def test_an_index_row_never_serves_git_config_history_or_hidden_files(
    make_store: Callable[..., Path], cell: str
) -> None:
    """An index.md row whose File is .git/config (any spelling), raw history, Dream's own state,
    a session transcript, a hidden file or a file that is not markdown is refused by `dream
    entity` and `dream resolve` (exit 1, one line naming the row and why) and by MCP; `dream
    search` reports it as skipped; the token in it is never printed."""
    root = _store(make_store, {"leak": cell})
    env = read_env(root)
    for args in (("entity", "leak"), ("resolve", "/home/u/src/leak/x")):
        outcome = cli(*args, "--store", str(root), env=env)
        assert outcome.refused(1) and "index.md line 3" in outcome.err, outcome
        assert TOKEN not in outcome.out + outcome.err
    found = cli("search", "extraheader", "--store", str(root), "--json", env=env)
    assert found.code == 0 and json.loads(found.out)["results"] == [] and TOKEN not in found.out, found
    assert any("not served" in s for s in json.loads(found.out)["skipped"])
    assert TOKEN not in cli("search", "basic", "--store", str(root), env=env).out
    for _, text in _mcp(root, [("dream_entity", {"name": "leak"}), ("dream_search", {"query": "extraheader"})]):
        assert TOKEN not in text
    assert _mcp(root, [("dream_entity", {"name": "leak"})])[0][0] is True


def test_a_symlink_inside_the_store_to_git_config_is_refused(make_store: Callable[..., Path]) -> None:
    """entities/notes.md -> ../.git/config stays inside the store, but where it leads is never
    served: entity, section and search refuse or skip it."""
    root = _store(make_store, {})
    (root / "entities" / "notes.md").symlink_to(Path("..") / ".git" / "config")
    (root / "sections" / "cfg.md").symlink_to(Path("..") / ".git" / "config")
    env = read_env(root)
    for args in (("entity", "notes"), ("section", "cfg")):
        outcome = cli(*args, "--store", str(root), env=env)
        assert outcome.refused(1) and ".git/config" in outcome.err, outcome
        assert TOKEN not in outcome.out
    found = cli("search", "extraheader", "--store", str(root), env=env)
    assert TOKEN not in found.out, found


@pytest.mark.parametrize("name", ["SOUL.md", "USER.md", "memory/MEMORY.md"])
def test_durable_files_linked_out_of_the_store_are_refused(make_store: Callable[..., Path], name: str) -> None:
    """SOUL.md, USER.md or memory/MEMORY.md as a symlink to a file elsewhere: `dream section`
    refuses it (exit 1), search never shows its text, and `dream context` (text and --json)
    leaves it out and says why."""
    root = make_store()
    outside = root.parent / "outside-secret.md"
    outside.write_text(f"# private\n{TOKEN}\n")
    (root / name).unlink()
    (root / name).symlink_to(outside)
    env = read_env(root)
    section = {"SOUL.md": "soul", "USER.md": "user", "memory/MEMORY.md": "memory"}[name]
    outcome = cli("section", section, "--store", str(root), env=env)
    assert outcome.refused(1) and "outside the store" in outcome.err, outcome
    assert TOKEN not in cli("search", "private", "--store", str(root), env=env).out
    block = cli("context", "--workspace", str(root), "--json", env=env)
    assert block.code == 0 and TOKEN not in block.out, block
    assert any(f"{name} leads outside the workspace" in note for note in json.loads(block.out)["left_out"])
    assert TOKEN not in cli("context", "--workspace", str(root), env=env).out


def _excluded_store(make_store: Callable[..., Path]) -> Path:
    root = make_store(
        {
            "index.md": "| Entity | File | Repos |\n|---|---|---|\n"
            "| payroll | entities/payroll.md | /home/u/src/payroll |\n"
            "| notes | entities/notes.md | /home/u/src/notes |\n"
            "| alias | ./entities//payroll.md | /home/u/src/alias |\n"
            "| linked | entities/linked.md | /home/u/src/linked |\n"
            "| shared | sections/shared.md | /home/u/src/shared |\n",
            "entities/payroll.md": f"# payroll\n\n- salary table {TOKEN}\n",
            "entities/notes.md": "# notes\n\n- nothing private\n",
        }
    )
    os.link(root / "entities" / "payroll.md", root / "sections" / "shared.md")  # a hard link
    (root / "entities" / "linked.md").symlink_to("payroll.md")  # a symlink inside the store
    return root


def test_an_excluded_entity_is_withheld_under_every_other_name(make_store: Callable[..., Path]) -> None:
    """With payroll excluded, its file is withheld when reached through a second index row
    (another spelling of the path), a symlink, or a hard link: `dream entity` and `dream section`
    refuse (exit 1), `dream search` never lists it, and MCP's dream_entity, dream_section and
    dream_search do the same; the other entities are served as before."""
    root = _excluded_store(make_store)
    env = read_env(root, DREAM_MEMORY_EXCLUDE="payroll")
    for args in (("entity", "alias"), ("entity", "linked"), ("entity", "shared"), ("section", "shared")):
        outcome = cli(*args, "--store", str(root), env=env)
        assert outcome.refused(1) and "excluded" in outcome.err, (args, outcome)
        assert TOKEN not in outcome.out
    found = cli("search", "salary", "--store", str(root), "--json", env=env)
    assert found.code == 0 and json.loads(found.out)["results"] == [], found
    assert cli("entity", "notes", "--store", str(root), env=env).code == 0
    calls: list[tuple[str, dict[str, object]]] = [
        ("dream_entity", {"name": "alias"}),
        ("dream_entity", {"name": "linked"}),
        ("dream_entity", {"name": "shared"}),
        ("dream_section", {"name": "shared"}),
        ("dream_search", {"query": "salary"}),
    ]
    answers = _mcp(root, calls, "payroll")
    assert [is_error for is_error, _ in answers] == [True, True, True, True, False]
    assert all(TOKEN not in text for _, text in answers)


ESCAPES = "- likes \x1b]52;c;cm0gLXJmIH4=\x07 tea\x1b[2J\x1b[H, \u202edlrow\u202c, \x9b31m red\r done\n"


def test_read_commands_show_escape_sequences_instead_of_sending_them(make_store: Callable[..., Path]) -> None:
    """Memory text holding an OSC 52 clipboard write, a screen clear, a bidi override, a C1 CSI and
    a carriage return is printed by `dream section`, `dream entity`, `dream search` and `dream
    context` with those shown as escapes (\\x1b...); --json carries the exact text."""
    root = make_store({"memory/MEMORY.md": "# Memory\n" + ESCAPES, "entities/dream.md": "# dream\n" + ESCAPES})
    env = read_env(root)
    outcomes = [
        cli("section", "memory", "--store", str(root), env=env),
        cli("entity", "dream", "--store", str(root), env=env),
        cli("search", "likes", "--store", str(root), env=env),
        cli("context", "--workspace", str(root), env=env),
    ]
    for outcome in outcomes:
        assert outcome.code == 0, outcome
        for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
            assert raw not in outcome.out, (raw, outcome)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in outcomes[0].out and "\\x1b[2J" in outcomes[0].out
    exact = json.loads(cli("section", "memory", "--json", "--store", str(root), env=env).out)
    assert ESCAPES.rstrip("\n").replace("\r", "\n").split("\n")[0] in exact["text"]
    assert "\x1b]52;c;cm0gLXJmIH4=\x07" in exact["text"]


def test_mcp_text_shows_escape_sequences_as_the_cli_does(make_store: Callable[..., Path]) -> None:
    """The MCP tools, resources and errors return the CLI's text: the same escapes shown, never
    sent raw to a client that renders them; structured content is the exact --json text."""
    root = make_store({"memory/MEMORY.md": "# Memory\n" + ESCAPES, "entities/dream.md": "# dream\n" + ESCAPES})
    env = read_env(root)
    raws = ("\x1b", "\x07", "\x9b", "\u202e")

    async def go() -> None:
        async with Client(build_server(root, home="/home/u")) as client:
            section = await client.call_tool("dream_section", {"name": "memory"})
            text = "".join(block.text for block in section.content)
            assert text == cli("section", "memory", "--store", str(root), env=env).out
            assert not any(raw in text for raw in raws) and "\\x1b[2J" in text
            assert section.structured_content is not None
            assert "\x1b]52;c;cm0gLXJmIH4=\x07" in section.structured_content["text"]
            found = await client.call_tool("dream_search", {"query": "likes"})
            assert not any(raw in block.text for block in found.content for raw in raws)
            resource = await client.read_resource("memory://entities/dream")
            assert not any(raw in getattr(part, "text", "") for part in resource.contents for raw in raws)
            refused = await client.call_tool("dream_entity", {"name": "no\x1b[2Jsuch"})
            assert refused.is_error and "\x1b" not in "".join(block.text for block in refused.content)

    anyio.run(go)


def test_a_newline_in_a_file_name_cannot_forge_a_result_line(make_store: Callable[..., Path]) -> None:
    """A file named ``x.md<newline>fake.md (entity fake): 9/9 terms`` shows as one line with
    ``\\n`` in `dream search` and in the names `dream section` and `dream entity` suggest; before,
    its second half printed as a result line of its own."""
    forged = "nl\nfake.md (entity fake): 9/9 terms, 9 hits"
    root = make_store({f"sections/{forged}.md": "- NLTOKEN here\n", f"entities/{forged}.md": "# x\n- NLTOKEN\n"})
    env = read_env(root)
    found = cli("search", "NLTOKEN", "--store", str(root), env=env)
    assert found.code == 0, found
    assert not any(line.startswith("fake.md") for line in found.out.splitlines()), found.out
    assert "sections/nl\\nfake.md (entity fake): 9/9 terms, 9 hits.md (section" in found.out, found.out
    for command in ("section", "entity"):
        missing = cli(command, "nothing-here", "--store", str(root), env=env)
        assert missing.code != 0 and "nl\\nfake.md" in missing.err, missing
        assert not any(line.startswith("fake.md") for line in missing.err.splitlines()), missing.err


def test_absolute_symlinks_inside_a_store_reached_through_a_symlink_are_followed(
    make_store: Callable[..., Path], tmp_path: Path
) -> None:
    """A store opened through a symlinked path (~/memory -> /data/store): an absolute symlink
    inside it naming a file of the store by either path is followed like a relative one; one
    naming a file elsewhere is refused."""
    root = make_store()
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    (root / "entities" / "by-real.md").symlink_to(root / "entities" / "dream.md")
    (root / "entities" / "by-alias.md").symlink_to(alias / "entities" / "dream.md")
    (root / "entities" / "away.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text(f"# away\n{TOKEN}\n")
    env = read_env(alias)
    for name in ("by-real", "by-alias"):
        outcome = cli("entity", name, "--store", str(alias), env=env)
        assert outcome.code == 0 and "tests with pytest" in outcome.out, outcome
    outcome = cli("entity", "away", "--store", str(alias), env=env)
    assert outcome.refused(1) and TOKEN not in outcome.out


def _committed(root: Path) -> Path:
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=U", "-c", "user.email=u@e", "commit", "-qm", "m"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def test_why_and_blame_withhold_an_excluded_entity_under_every_spelling(make_store: Callable[..., Path]) -> None:
    """`dream why`, `dream blame` and MCP's dream_why answer for committed lines: with payroll
    excluded, its file is refused however the path is spelt (./, absolute), under another name
    (a second index row's file, a hard link) and by `why --text`; other files are answered."""
    root = _committed(_excluded_store(make_store))
    spellings = ["entities/payroll.md", "./entities/payroll.md", str(root / "entities" / "payroll.md")]
    spellings += ["sections/shared.md"]  # a hard link to it, and another entity's row
    answers = _mcp(root, [("dream_why", {"path": p, "line": 3}) for p in [*spellings, "entities/notes.md"]], "payroll")
    assert [is_error for is_error, _ in answers] == [True] * len(spellings) + [False], answers
    assert all(TOKEN not in text for _, text in answers)
    assert "nothing private" in answers[-1][1]
    env = read_env(root, DREAM_MEMORY_EXCLUDE="payroll")
    for path in spellings:
        for args in (("why", f"{path}:3"), ("blame", path)):
            outcome = cli(*args, "--workspace", str(root), env=env)
            assert outcome.code == 2 and "excluded" in outcome.err and TOKEN not in outcome.out, (args, outcome)
    text = cli("why", "--text", "salary", "--workspace", str(root), env=env)
    assert TOKEN not in text.out, text
    assert cli("why", "entities/notes.md:3", "--workspace", str(root), env=env).code == 0


def test_an_exclude_names_an_entity_whatever_unicode_form_its_file_name_has(make_store: Callable[..., Path]) -> None:
    """macOS writes file names in NFD; DREAM_MEMORY_EXCLUDE is typed in NFC (and any case):
    the entity is withheld by entity, search and MCP either way."""
    nfd = unicodedata.normalize("NFD", "café")
    root = make_store({f"entities/{nfd}.md": f"# {nfd}\n\n- {TOKEN}\n"})
    env = read_env(root, DREAM_MEMORY_EXCLUDE="CAFÉ")
    for name in (nfd, "café"):
        outcome = cli("entity", name, "--store", str(root), env=env)
        assert outcome.code != 0 and TOKEN not in outcome.out, (name, outcome)
    found = cli("search", TOKEN[:20], "--store", str(root), "--json", env=env)
    assert found.code == 0 and json.loads(found.out)["results"] == [], found
    answers = _mcp(root, [("dream_entity", {"name": nfd}), ("dream_search", {"query": TOKEN[:20]})], "CAFÉ")
    assert all(TOKEN not in text for _, text in answers), answers
