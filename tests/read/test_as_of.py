"""`dream entity NAME --as-of DATE` and `dream section NAME --as-of DATE` read the store as it
was then: the last commit by the end of that day, or by an exact time; the API shares it.
The store is a real git repository built by three offline Dream runs at fixed clock times."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from dream_memory import Workspace
from dream_memory.core.history import HistoryEntry
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import FrozenClock, build_workspace

RUNS = (
    ("2026-04-03T10:00:00+00:00", "- [durable] User prefers green tea", "- [entity] ledger-api: stores balances"),
    ("2026-04-05T09:00:00+00:00", "- [durable] User prefers window seats", "- [entity] ledger-api: runs on Postgres"),
    ("2026-04-07T18:00:00+00:00", "- [durable] User prefers quiet cafes", "- [entity] ledger-api: deploys on Fridays"),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("as-of") / "ws"
    build_workspace(root)
    env = {"HOME": str(root.parent), "DREAM_WORKSPACE": str(root)}
    cursor = 0
    for when, *texts in RUNS:
        with (root / "memory" / "history.jsonl").open("a", encoding="utf-8") as history:
            for text in texts:
                cursor += 1
                history.write(HistoryEntry(cursor, when[:16].replace("T", " "), text).to_json_line() + "\n")
        report = Workspace(root, env=env, clock=FrozenClock(when, step=1)).dream(model="offline")
        assert report.exit_code == 0, report.to_json()
    return root


def _read(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, [*args, "--workspace", str(store)], env={"HOME": str(store.parent), "DREAM_MEMORY_STORE": None}
    )
    return result.exit_code, result.stdout, result.stderr


def _commit_by(store: Path, when: str) -> str:
    return subprocess.run(
        ["git", "-C", str(store), "rev-list", "-1", "--first-parent", f"--before={when}", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_day_reads_the_last_commit_by_its_end(store: Path) -> None:
    """--as-of 2026-04-04 shows what the first run wrote and nothing later; 2026-04-05 (the whole
    day) includes the second run; with no --as-of, everything. stderr names the commit chosen."""
    code, out, err = _read(store, "section", "user", "--as-of", "2026-04-04")
    assert code == 0, err
    assert "green tea" in out and "window seats" not in out and "quiet cafes" not in out
    assert "dream: as of 2026-04-04: commit" in err and "2026-04-03 10:" in err
    code, out, _ = _read(store, "section", "user", "--as-of", "2026-04-05")
    assert "window seats" in out and "quiet cafes" not in out
    code, out, _ = _read(store, "section", "user")
    assert "quiet cafes" in out


def test_an_exact_time_and_an_offset_are_honoured(store: Path) -> None:
    """08:59 on the 5th is before the second run's 09:00 commit, 09:00 is not; 10:00+02:00 is
    08:00 UTC, before it too. The JSON revision is the commit git itself picks."""
    code, out, _ = _read(store, "section", "user", "--as-of", "2026-04-05 08:59")
    assert code == 0 and "window seats" not in out
    code, out, _ = _read(store, "section", "user", "--as-of", "2026-04-05 09:00:30")
    assert "window seats" in out
    code, out, _ = _read(store, "section", "user", "--as-of", "2026-04-05T10:00+02:00", "--json")
    page = json.loads(out)
    assert "window seats" not in page["text"]
    assert page["revision"] == _commit_by(store, "2026-04-05T08:00:59+00:00")


def test_an_entity_reads_as_it_was(store: Path) -> None:
    """The entity page on the 6th holds the first two facts, not the third; today's holds all."""
    code, out, err = _read(store, "entity", "ledger-api", "--as-of", "2026-04-06")
    assert code == 0, err
    page = out.casefold()
    assert "stores balances" in page and "runs on postgres" in page and "deploys on fridays" not in page
    code, out, _ = _read(store, "entity", "ledger-api")
    assert "deploys on fridays" in out.casefold()


def test_bad_dates_exit_2_with_one_line(store: Path) -> None:
    """A date that is not one, a relative word, a date before the first commit, and --at with
    --as-of: exit 2, a one-line error naming the problem, no traceback."""
    for args, message in (
        (["--as-of", "2026-13-01"], "is not a date"),
        (["--as-of", "yesterday"], "is not a date"),
        (["--as-of", "2026-04-04 10:00+99:99"], "is no time zone"),  # a traceback before
        (["--as-of", "2026-04-04T10:00-24:00"], "is no time zone"),
        (["--as-of", "2026-04-02"], "is before the store's first commit, made 2026-04-03 10:00"),
        (["--as-of", "2026-04-04", "--at", "HEAD"], "either --at or --as-of"),
    ):
        code, out, err = _read(store, "section", "user", *args)
        assert code == 2, (args, out, err)
        assert message in err and "Traceback" not in err, (args, err)


def test_the_api_shares_the_read(store: Path) -> None:
    """Workspace.section and Workspace.entity take as_of and answer what the CLI answers."""
    ws = Workspace(store, env={"HOME": str(store.parent)})
    assert "window seats" not in ws.section("user", as_of="2026-04-04").text
    assert "runs on postgres" in ws.entity("ledger-api", as_of="2026-04-05").text.casefold()
    assert "runs on postgres" not in ws.entity("ledger-api", as_of="2026-04-04 23:00").text.casefold()


def test_the_mcp_tools_take_as_of(store: Path) -> None:
    """dream_section and dream_entity take asOf (the same read as the CLI's); a bad date is a
    tool error with the CLI's message; without it they read the store now."""
    import anyio
    from mcp import Client

    from dream_memory.entrypoints.mcp_server import build_server

    def text_of(result: object) -> str:
        return "".join(block.text for block in result.content)  # type: ignore[attr-defined]

    async def go() -> None:
        async with Client(build_server(store, home=str(store.parent))) as client:
            then = await client.call_tool("dream_section", {"name": "user", "asOf": "2026-04-04"})
            assert not then.is_error and "green tea" in text_of(then) and "window seats" not in text_of(then)
            now = await client.call_tool("dream_section", {"name": "user"})
            assert "quiet cafes" in text_of(now)
            entity = await client.call_tool("dream_entity", {"name": "ledger-api", "asOf": "2026-04-05"})
            assert "runs on postgres" in text_of(entity).casefold()
            assert "deploys on fridays" not in text_of(entity).casefold()
            bad = await client.call_tool("dream_section", {"name": "user", "asOf": "2026-04-01"})
            assert bad.is_error and "before the store's first commit" in text_of(bad)
            zone = await client.call_tool("dream_entity", {"name": "ledger-api", "asOf": "2026-04-05 10:00+99:99"})
            assert zone.is_error and "is no time zone" in text_of(zone)  # not "Error executing tool"

    anyio.run(go)
