"""Every memory line has a source: `dream blame`, `dream why`, the provenance note beside each
batch commit, through hand edits, compaction and a model that cites badly."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import Cli, make_workspace
from test_real_model_paths import by_phase, use_preset

from dream_memory.core import layout
from dream_memory.core.provenance import key_words
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

OFFLINE = {"DREAM_MODEL": "offline"}
ENTRIES = [
    "- [durable] User lives in Lyon and works as a baker.",
    "user: what's the weather like?",
    "- [durable] User prefers answers in French when the topic is cooking.",
    "- Decisions: the ledger service stores balances in PostgreSQL 16.",
]


def _blame(cli: Cli, path: str) -> list[dict[str, Any]]:
    result = cli.run("blame", path, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _why(cli: Cli, *args: str) -> Any:
    result = cli.run("why", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_blame_after_a_run_gives_every_line_a_source(isolated: Cli) -> None:
    """After an offline run, each line of USER.md and MEMORY.md is either a template line
    (memory: init) or a Dream line whose cited entries hold its key words; blank lines and
    headings Dream added carry the facts of the lines they came with."""
    make_workspace(isolated, ENTRIES)
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0, report
    contents = dict(enumerate(ENTRIES, start=1))
    dream_lines = 0
    for path in ("USER.md", "memory/MEMORY.md"):
        for line in _blame(isolated, path):
            assert line["kind"] in ("init", "dream"), line
            if line["kind"] == "init":
                assert line["subject"] == "memory: init"
                continue
            assert line["sources"], line
            if line["text"].strip() and not line["text"].startswith("#"):
                dream_lines += 1
                cited = " ".join(s["content"] for s in line["sources"])
                assert key_words(line["text"]) & key_words(cited), line
                assert all(contents[s["cursor"]] == s["content"] for s in line["sources"])
                assert all(s["where"] == layout.HISTORY for s in line["sources"])
    assert dream_lines == 3
    assert report["batches"][0]["provenance"]["facts_unsourced"] == 0


def test_why_names_commit_model_fact_and_entry(isolated: Cli) -> None:
    """`dream why PATH:LINE` and `dream why --text` name the commit, its time, the model, the
    fact with its cursors, and each source entry with its timestamp and content."""
    make_workspace(isolated, ENTRIES, session_key="telegram:42")
    isolated.run("run", env=OFFLINE)
    lyon = next(line for line in _blame(isolated, "USER.md") if "Lyon" in line["text"])
    found = _why(isolated, f"USER.md:{lyon['line']}")
    assert found["kind"] == "dream" and found["model"] == "offline"
    assert found["commit"] == lyon["commit"] and found["time"].endswith("+00:00")
    assert [f["sources"] for f in found["facts"]] == [[1]]
    (entry,) = found["sources"]
    assert entry["cursor"] == 1 and entry["session_key"] == "telegram:42"
    assert entry["timestamp"] == "2026-04-03 00:02" and "Lyon" in entry["content"]
    by_text = _why(isolated, "--text", "postgresql 16")
    assert [(f["path"], f["sources"][0]["cursor"]) for f in by_text] == [("memory/MEMORY.md", 4)]
    human = isolated.run("why", f"USER.md:{lyon['line']}")
    assert "entry 1  2026-04-03 00:02, session telegram:42  (memory/history.jsonl)" in human.stdout
    assert "fact 1  [USER] User lives in Lyon and works as a baker.  (entries: 1)" in human.stdout


def test_a_hand_edit_is_reported_as_manual(isolated: Cli) -> None:
    """A line a person added, committed as `memory: manual edits` by the next run, is reported
    by `dream why` as hand-written with the commit's subject and author, not as Dream's."""
    make_workspace(isolated, ENTRIES[:1])
    isolated.run("run", env=OFFLINE)
    user = isolated.workspace / "USER.md"
    user.write_text(user.read_text(encoding="utf-8") + "- Written by hand: allergic to peanuts\n", encoding="utf-8")
    isolated.run("run", env=OFFLINE)
    text = user.read_text(encoding="utf-8").splitlines()
    number = text.index("- Written by hand: allergic to peanuts") + 1
    found = _why(isolated, f"USER.md:{number}")
    assert found["kind"] == "manual" and found["subject"] == "memory: manual edits"
    assert "written by hand" in found["note"] and found["sources"] == []
    assert "memory: manual edits" in isolated.run("why", f"USER.md:{number}").stdout


def test_sources_still_resolve_after_compaction_moved_them(isolated: Cli) -> None:
    """With maxHistoryEntries 10, the run's compaction moves the cited entries to memory/archive/;
    `dream why` still prints each of them, read from the archive file."""
    entries = [f"- [durable] User owns a bicycle model number {i} for commuting." for i in range(1, 31)]
    make_workspace(isolated, entries)
    (isolated.workspace / layout.WORKSPACE_CONFIG).write_text(
        json.dumps({"agents": {"defaults": {"dream": {"maxHistoryEntries": 10}}}}), encoding="utf-8"
    )
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0 and report["compaction"]["archived"] >= 20, report
    first = next(line for line in _blame(isolated, "USER.md") if "number 1 for" in line["text"])
    (entry,) = first["sources"]
    assert entry["cursor"] == 1 and entry["where"].startswith(layout.ARCHIVE_DIR + "/history-")
    assert "bicycle model number 1 " in entry["content"]
    shown = isolated.run("why", f"USER.md:{first['line']}")
    assert f"({entry['where']})" in shown.stdout and "bicycle model number 1 " in shown.stdout


def test_a_fact_citing_outside_its_batch_is_kept_with_an_unknown_source(isolated: Cli, tmp_path: Path) -> None:
    """A model citing cursor 99 in a batch of 1..2 (and another fact citing nothing) gets both
    facts applied; the report counts them as unsourced and says why; `dream why` on their
    lines says the source is unknown, never a crash."""
    make_workspace(isolated, ["user: I moved to Porto last month", "user: I now cycle to work"])
    phase1 = Reply("[USER] Lives in Porto [from 99]\n[USER] Cycles to work")
    edits = [
        Reply(
            tool_calls=[
                tool_call(
                    "edit_file",
                    path="USER.md",
                    old_text="## Preferences\n",
                    new_text="## Preferences\n\n- Lives in Porto\n- Cycles to work\n",
                    facts=[1, 2],
                )
            ]
        ),
        Reply("Done."),
    ]
    queue = list(edits)
    with ScriptedLLMServer(
        responder=by_phase(lambda _: phase1, lambda _: queue.pop(0) if queue else Reply("Done."))
    ) as server:
        use_preset(isolated, server)
        code, report = isolated.run_json("run")
    assert code == 0, report
    batch = report["batches"][0]
    assert batch["outcome"] == "committed"
    provenance = batch["provenance"]
    assert provenance["facts_unsourced"] == 2
    assert [f["source"] for f in provenance["facts"]] == ["unknown", "unknown"]
    assert provenance["facts"][0]["cited_outside_batch"] == [99]
    assert any("cites 99, outside entries 1..2" in n for n in batch["notes"])
    porto = next(line for line in _blame(isolated, "USER.md") if line["text"] == "- Lives in Porto")
    assert porto["sources"] == [] and "source is unknown" in porto["note"]
    assert porto["facts"][0]["text"] == "Lives in Porto"


@pytest.mark.skipif(shutil.which("git") is None, reason="the git CLI is not installed")
def test_the_note_is_a_real_git_note_and_the_body_lists_the_facts(isolated: Cli) -> None:
    """`git notes --ref dream show` reads the batch's note (facts, lines, the cited entries), and
    `git log` shows the facts with their cursors in the commit body."""
    make_workspace(isolated, ENTRIES)
    isolated.run("run", env=OFFLINE)
    ws = str(isolated.workspace)
    note = subprocess.run(
        ["git", "-C", ws, "notes", "--ref", "dream", "show", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    data = json.loads(note)
    assert [e["cursor"] for e in data["entries"]] == [1, 3, 4]
    assert {ln["path"] for ln in data["lines"]} == {"USER.md", "memory/MEMORY.md"}
    body = subprocess.run(["git", "-C", ws, "log", "-1", "--format=%B"], capture_output=True, text=True).stdout
    assert "Facts (each with the history entries it comes from):" in body
    assert "[USER] User lives in Lyon and works as a baker.  <- 1" in body
    fsck = subprocess.run(["git", "-C", ws, "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_why_refuses_bad_targets_with_exit_2(isolated: Cli) -> None:
    """A target that is not PATH:LINE, a line past the end, a file that is not memory: one-line
    errors, exit 2, no traceback. A path climbing out through a memory folder is not memory
    either: nothing outside is read, nor said to exist (it was read whole, and "not committed
    yet" told that it existed)."""
    make_workspace(isolated, ENTRIES[:1])
    isolated.run("run", env=OFFLINE)
    (isolated.workspace.parent / "outside.txt").write_text("a file beside the workspace\n", encoding="utf-8")
    for args, message in (
        (["why", "USER.md"], "is not PATH:LINE"),
        (["why", "USER.md:\u00b2"], "is not PATH:LINE"),
        (["why", "skills/../../outside.txt:1"], "is not a memory file"),
        (["why", "entities/./../../outside.txt:1"], "is not a memory file"),
        (["blame", "skills/../../outside.txt"], "is not a memory file"),
        (["blame", "skills//x.md"], "is not a memory file"),
        (["why", "USER.md:999"], "there is no line 999"),
        (["why", "dream.json:1"], "is not a memory file"),
        (["blame", "../etc/passwd"], "is not a memory file"),
        (["why"], "give either PATH:LINE or --text"),
    ):
        result = isolated.run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output


def test_report_commit_and_log_say_what_was_removed_and_why(isolated: Cli) -> None:
    """A batch that replaces one line and removes another: the report lists both with the fact
    that asked for each, the commit body lists them, and `dream log` (text and JSON) shows them."""
    user = "# User\n\n## Preferences\n\n- Drinks tea every morning\n- Old phone number 555-0100\n"
    make_workspace(
        isolated, ["user: I switched to coffee", "user: forget my old phone number"], files={"USER.md": user}
    )
    phase1 = Reply(
        "[USER] Drinks coffee every morning (was tea) [from 1]\n[USER] Forget: the phone number 555-0100 [from 2]"
    )
    edit = tool_call(
        "edit_file",
        path="USER.md",
        old_text="- Drinks tea every morning\n- Old phone number 555-0100\n",
        new_text="- Drinks coffee every morning\n",
    )
    queue = [Reply(tool_calls=[edit]), Reply("Done.")]
    with ScriptedLLMServer(
        responder=by_phase(lambda _: phase1, lambda _: queue.pop(0) if queue else Reply("Done."))
    ) as server:
        use_preset(isolated, server)
        # The lines came with the workspace (a person's): let their removal land, not wait for review.
        config = Path(isolated.env["DREAM_CONFIG"])
        data = json.loads(config.read_text(encoding="utf-8"))
        data["agents"]["defaults"]["dream"] = {"writePolicy": {"manual": "apply"}}
        config.write_text(json.dumps(data), encoding="utf-8")
        code, report = isolated.run_json("run")
    assert code == 0, report
    removed = {r["text"]: r for r in report["batches"][0]["provenance"]["removed"]}
    assert removed["- Drinks tea every morning"]["facts"] == [1]
    assert removed["- Drinks tea every morning"]["replaced_by"] == "- Drinks coffee every morning"
    assert removed["- Old phone number 555-0100"]["facts"] == [2]
    assert removed["- Old phone number 555-0100"]["reason"] == "[USER] Forget: the phone number 555-0100"
    shown = isolated.run("log").stdout
    assert "Removed or replaced, and the fact that asked for it:" in shown
    assert (
        "USER.md: replaced '- Drinks tea every morning' (fact 1: [USER] Drinks coffee every morning (was tea))" in shown
    )
    assert "USER.md: removed '- Old phone number 555-0100' (fact 2: [USER] Forget: the phone number 555-0100)" in shown
    logged = json.loads(isolated.run("log", "--json").stdout)
    assert len(logged["removed"]) == 2


def test_mcp_dream_why_answers_as_the_cli_does(isolated: Cli) -> None:
    """The MCP tool dream_why(path, line), called through the SDK's own client, returns the CLI's
    text and its --json object; a line past the end is a tool error, not an empty success."""
    import anyio
    from mcp import Client

    from dream_memory.entrypoints.mcp_server import build_server

    make_workspace(isolated, ENTRIES)
    isolated.run("run", env=OFFLINE)
    lyon = next(line for line in _blame(isolated, "USER.md") if "Lyon" in line["text"])
    expected = _why(isolated, f"USER.md:{lyon['line']}")
    shown = isolated.run("why", f"USER.md:{lyon['line']}").stdout

    async def go() -> None:
        async with Client(build_server(isolated.workspace)) as client:
            found = await client.call_tool("dream_why", {"path": "USER.md", "line": lyon["line"]})
            assert not found.is_error
            assert found.structured_content == expected
            assert "".join(block.text for block in found.content) == shown
            missing = await client.call_tool("dream_why", {"path": "USER.md", "line": 9999})
            assert missing.is_error and "there is no line 9999" in missing.content[0].text
            # Only MCP can send a NUL; it was a ValueError, which the client saw as a bare
            # "Error executing tool dream_why" with no reason.
            nul = await client.call_tool("dream_why", {"path": "USER.md\u0000", "line": 1})
            assert nul.is_error and "is not a memory file" in nul.content[0].text
            out = await client.call_tool("dream_why", {"path": "skills/../../outside.txt", "line": 1})
            assert out.is_error and "is not a memory file" in out.content[0].text

    anyio.run(go)


def test_read_side_sources_say_where_lines_were_learned(isolated: Cli) -> None:
    """`dream section user --sources` lists each shown line's origin (the entry it was learned
    from, template, by hand), `--json` adds them as `sources`, and `dream context --sources`
    puts "(learned from session ... on ...)" after Dream's lines only."""
    make_workspace(isolated, ENTRIES, session_key="telegram:42")
    isolated.run("run", env=OFFLINE)
    text = isolated.run("section", "user", "--sources").stdout
    lyon = next(line for line in _blame(isolated, "USER.md") if "Lyon" in line["text"])
    assert f"  {lyon['line']}: learned from session telegram:42 on 2026-04-03 (entry 1)" in text
    assert "  1: template (memory: init)" in text
    page = json.loads(isolated.run("section", "user", "--sources", "--json").stdout)
    row = next(r for r in page["sources"] if r["line"] == lyon["line"])
    assert row["kind"] == "dream" and row["entries"] == [1] and row["commit"] == lyon["commit"]
    block = isolated.run("context", "--sources").stdout
    assert (
        "- User lives in Lyon and works as a baker.  (learned from session telegram:42 on 2026-04-03 (entry 1))"
        in block
    )
    assert "# User  (" not in block and "learned from" not in isolated.run("context").stdout


def test_the_pull_request_body_shows_each_line_with_its_evidence(isolated: Cli) -> None:
    """The Action's summary (the Dream pull request's body) lists every line a batch added with
    the history entries it comes from (cursor, time, session, content)."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "deploy" / "github-action" / "dream_action.py"
    spec = importlib.util.spec_from_file_location("dream_action_for_provenance", script)
    assert spec is not None and spec.loader is not None
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    make_workspace(isolated, ENTRIES, session_key="telegram:42")
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0
    body = action.render_summary("run", report, 0)
    assert "**Lines and their sources**" in body
    added = [
        line["text"]
        for fact in report["batches"][0]["provenance"]["facts"]
        for line in fact["lines"]
        if line["text"].strip()
    ]
    assert len(added) >= 3
    for text in added:
        row = next(r for r in body.splitlines() if f"+ `{text}`" in r)
        assert "← entry " in row and "telegram:42" in row, row
    assert "← entry 1 (2026-04-03 00:02, telegram:42): - [durable] User lives in Lyon" in body


def test_sources_survive_a_restore_and_a_replay(isolated: Cli) -> None:
    """Restoring the latest batch leaves the earlier batch's lines explained by their own note;
    `--replay` dreams the range again as a new commit whose note cites the same entries."""
    make_workspace(isolated, ENTRIES[:1])
    isolated.run("run", env=OFFLINE)
    (isolated.workspace / layout.HISTORY).open("a", encoding="utf-8").write(
        json.dumps({"cursor": 2, "timestamp": "2026-04-04 09:00", "content": ENTRIES[2]}) + "\n"
    )
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0, report
    second = report["commits"][0]
    restored = isolated.run("restore", second, "--replay")
    assert restored.exit_code == 0, restored.output
    lyon = next(line for line in _blame(isolated, "USER.md") if "Lyon" in line["text"])
    assert [s["cursor"] for s in lyon["sources"]] == [1]
    assert not any("French" in line["text"] for line in _blame(isolated, "USER.md"))
    replayed = isolated.run("run", env=OFFLINE)
    assert replayed.exit_code == 0, replayed.output
    french = next(line for line in _blame(isolated, "USER.md") if "French" in line["text"])
    assert french["commit"] != second and [s["cursor"] for s in french["sources"]] == [2]


def test_after_dream_demo_every_user_md_line_has_a_source(isolated: Cli) -> None:
    """The acceptance run: after `dream demo`, `dream blame USER.md --json` gives every line a
    source: Dream's lines resolve to entries whose content holds the line's key words, template
    lines to `memory: init`."""
    import re

    demo = isolated.run("demo", env=OFFLINE)
    assert demo.exit_code == 0, demo.output
    (where,) = set(re.findall(r"the demo workspace stays at (\S+/workspace)", demo.output))
    result = isolated.run("blame", "USER.md", "--json", "--workspace", where)
    rows = json.loads(result.stdout)
    assert {r["kind"] for r in rows} == {"init", "dream"}
    for row in rows:
        if row["kind"] == "init":
            assert row["subject"] == "memory: init" and "template line" in row["note"], row
            continue
        assert row["sources"], row
        if row["text"].strip() and not row["text"].startswith("#"):
            cited = " ".join(s["content"] for s in row["sources"])
            assert key_words(row["text"]) & key_words(cited), row
    shutil.rmtree(Path(where).parent, ignore_errors=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="the git CLI is not installed")
def test_without_the_note_the_commit_body_still_gives_the_sources(isolated: Cli) -> None:
    """A clone that did not fetch refs/notes/dream (or a rebased pull request): `dream why`
    reads the facts and cursors the commit body lists and matches the line to its fact."""
    make_workspace(isolated, ENTRIES)
    isolated.run("run", env=OFFLINE)
    subprocess.run(["git", "-C", str(isolated.workspace), "update-ref", "-d", "refs/notes/dream"], check=True)
    lyon = next(line for line in _blame(isolated, "USER.md") if "Lyon" in line["text"])
    assert [s["cursor"] for s in lyon["sources"]] == [1]
    assert lyon["facts"][0]["text"] == "User lives in Lyon and works as a baker."
    assert lyon["model"] == "offline"
