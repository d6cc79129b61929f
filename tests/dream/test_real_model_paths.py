"""Dream against models that behave like real small ones (issue 23), over the real wire.

Every reply shape here was seen from Qwen2.5-Coder-1.5B or SmolLM2-135M behind llama-cpp-python:
tool calls written as text, phase 2 answering prose, `[USER] [SKIP]`, edits to the wrong file.
The scripted server plays those replies; the rules under test are Dream's.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import Cli, make_workspace, sample_entries, use_preset

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, Step, from_chat_model, tool_call

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "dream_memory" / "data" / "sample"
TORONTO = "[USER] Timezone is now America/Toronto (EST) (was Europe/Lisbon)"


def by_phase(phase1: Callable[[dict[str, Any]], Step], phase2: Callable[[dict[str, Any]], Step]) -> Any:
    """A responder answering analysis requests (no tools, no facts block) with ``phase1`` and
    edit requests with ``phase2``."""

    def respond(request: dict[str, Any]) -> Step:
        user = next((m["content"] for m in request.get("messages", []) if m.get("role") == "user"), "")
        is_phase2 = bool(request.get("tools")) or "## Facts to Apply" in str(user)
        return phase2(request) if is_phase2 else phase1(request)

    return respond


def dream_cursor(workspace: Path) -> int:
    path = workspace / "memory" / ".dream_cursor"
    return int(path.read_text()) if path.exists() else 0


def memory(workspace: Path) -> dict[str, str]:
    return {
        p.relative_to(workspace).as_posix(): p.read_text()
        for p in sorted(workspace.rglob("*.md"))
        if ".git" not in p.parts and "prompts" not in p.parts
    }


def test_phase2_answering_text_is_a_content_failure_never_nothing_new(isolated: Cli) -> None:
    """Phase 1 finds a fact and phase 2 answers `functions.write_file:` with no call (what Qwen
    did): the batch fails with the model's reply in the error, the cursor stays, `dream status`
    shows the entries pending; the third such run sets the batch aside and says so in its status,
    and the entries are still in history."""
    respond = by_phase(lambda r: Reply(TORONTO), lambda r: Reply("functions.write_file:"))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server)
        make_workspace(isolated, sample_entries(3))
        for attempt in (1, 2):
            code, report = isolated.run_json("run")
            assert code == 1 and report["status"] == "failed", report
            assert f"content failure {attempt} of 3" in " ".join(report["batches"][0]["notes"])
            batch = report["batches"][0]
            assert batch["outcome"] == "failed"
            assert "phase 2 applied none" in batch["error"] and "functions.write_file:" in batch["error"]
            assert batch["facts"] == 1 and batch["duration_s"] > 0 and batch["usage"]["llm_calls"] == 2
            assert dream_cursor(isolated.workspace) == 0
            code, status = isolated.run_json("status", "--json")
            assert status["pending"] == 3, status
        code, report = isolated.run_json("run")
        assert code == 0 and report["status"] == "set_aside", report
        assert report["batches"][0]["outcome"] == "set_aside"
        assert len((isolated.workspace / "memory" / "history.jsonl").read_text().splitlines()) == 3


def test_skip_on_every_tag_is_nothing_new(isolated: Cli) -> None:
    """`[USER] [SKIP]` on every tag is a skip: a cursor-only commit, no phase-2 call."""
    with ScriptedLLMServer(responder=lambda r: Reply("[USER] [SKIP]\n[SOUL] [SKIP]\n[MEMORY] [SKIP]")) as server:
        use_preset(isolated, server)
        make_workspace(isolated, sample_entries(2))
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["outcome"] == "nothing_new"
        assert len(server.completion_requests()) == 1


def test_facts_already_in_memory_are_nothing_new(isolated: Cli) -> None:
    """Phase 2 making no edit is honest when every fact is already in the file."""
    respond = by_phase(lambda r: Reply("[USER] Prefers dark mode"), lambda r: Reply("USER.md already says so."))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server)
        make_workspace(
            isolated, sample_entries(1), files={"USER.md": "# User\n\n## Preferences\n\n- Prefers dark mode\n"}
        )
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["outcome"] == "nothing_new", report
        assert "every fact is already in memory" in report["batches"][0]["notes"]


EDIT = {"path": "USER.md", "old_text": "## Preferences\n", "new_text": "## Preferences\n\n- Prefers tea\n  at 4pm\n"}


@pytest.mark.parametrize(
    ("step", "dialect"),
    [
        (Reply(tool_calls=[tool_call("edit_file", **EDIT)]), "native"),
        (Reply("<tool_call>\n" + json.dumps({"name": "edit_file", "arguments": EDIT}) + "\n</tool_call>"), "hermes"),
        # Raw newlines inside the JSON strings, as Qwen wrote them.
        (
            Reply(
                'functions.edit_file: {"path": "USER.md", "old_text": "## Preferences\n", '
                '"new_text": "## Preferences\n\n- Prefers tea\n  at 4pm\n"}'
            ),
            "functions",
        ),
    ],
    ids=["native", "hermes", "functions-raw-newlines"],
)
def test_calls_written_as_text_apply_like_native_ones(isolated: Cli, step: Reply, dialect: str) -> None:
    """A `<tool_call>` block or `functions.edit_file: {...}` (with raw newlines in its strings)
    makes the same edit as a native call, and the report counts the call by dialect."""
    replies = iter([step, Reply("Done.")])
    respond = by_phase(lambda r: Reply("[USER] Prefers tea at 4pm"), lambda r: next(replies))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server)
        make_workspace(isolated, sample_entries(1), files={"USER.md": "# User\n\n## Preferences\n"})
        code, report = isolated.run_json("run")
        assert code == 0, report
        assert (isolated.workspace / "USER.md").read_text() == "# User\n\n## Preferences\n\n- Prefers tea\n  at 4pm\n"
        assert report["batches"][0]["tool_call_dialects"] == {dialect: 1}
        assert report["tool_call_dialects"] == {dialect: 1}


def test_every_request_with_tools_says_tool_choice_auto(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """llama-cpp-python drops the tools from the prompt when tool_choice is missing: every
    request that offers tools names it."""
    use_preset(isolated, offline_server)
    make_workspace(isolated, sample_entries(3))
    code, _ = isolated.run_json("run")
    assert code == 0
    with_tools = [r.body for r in offline_server.completion_requests() if r.tools]
    assert with_tools and all(body["tool_choice"] == "auto" for body in with_tools)


def test_edits_outside_the_facts_files_are_refused_naming_the_file(isolated: Cli) -> None:
    """A USER.md fact edited into SOUL.md is refused with an error naming USER.md; the model's
    corrected call lands."""
    replies = iter(
        [
            Reply(tool_calls=[tool_call("edit_file", path="SOUL.md", old_text="", new_text="- Likes tea\n")]),
            Reply(
                tool_calls=[
                    tool_call("edit_file", path="USER.md", old_text="# User\n", new_text="# User\n\n- Likes tea\n")
                ]
            ),
            Reply("Done."),
        ]
    )
    respond = by_phase(lambda r: Reply("[USER] Likes tea"), lambda r: next(replies))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server)
        make_workspace(isolated, sample_entries(1), files={"USER.md": "# User\n"})
        soul = (isolated.workspace / "SOUL.md").read_text()
        code, report = isolated.run_json("run")
        assert code == 0, report
        results = [m["content"] for m in server.completion_requests()[-1].messages if m["role"] == "tool"]
        assert results[0].startswith("Error: SOUL.md is not a file this batch's facts go to. Put the facts in USER.md")
        assert (isolated.workspace / "SOUL.md").read_text() == soul
        assert "- Likes tea" in (isolated.workspace / "USER.md").read_text()


def test_phase2_is_told_each_facts_file(isolated: Cli, offline_server: ScriptedLLMServer) -> None:
    """The edit request lists the facts under the file each goes to, each numbered for the edit
    tools' ``facts`` argument."""
    use_preset(isolated, offline_server)
    make_workspace(isolated, ["- [durable] User prefers tea", "- Decisions: the ledger uses Postgres 16"])
    isolated.run_json("run")
    phase2 = next(r for r in offline_server.completion_requests() if r.tools)
    user = phase2.messages[1]["content"]
    assert "### For USER.md\n1. [USER] User prefers tea" in user
    assert "### For memory/MEMORY.md\n2. [MEMORY] Decisions: the ledger uses Postgres 16" in user


def _sample(tmp: Path, name: str) -> Path:
    target = tmp / name
    shutil.copytree(SAMPLE, target)
    return target


def test_text_protocol_gives_the_same_memory_as_tools_on_the_sample(isolated: Cli, tmp_path: Path) -> None:
    """The offline engine answering SEARCH/REPLACE blocks (editProtocol text) leaves exactly the
    memory its tool calls leave, batch for batch, on the bundled sample."""
    results = {}
    for protocol in ("tools", "text"):
        workspace = _sample(tmp_path, protocol)
        with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
            use_preset(isolated, server, editProtocol=protocol)
            code, report = isolated.run_json("run", "--workspace", str(workspace))
            assert code == 0 and report["status"] == "ok", report
            assert {b["edit_protocol"] for b in report["batches"]} == {protocol}
            if protocol == "text":
                assert not any(r.tools for r in server.completion_requests())
        results[protocol] = memory(workspace)
    assert results["text"] == results["tools"]
    assert "Maya Okafor" in results["text"]["USER.md"]


def test_scripted_search_replace_blocks_are_applied_and_errors_fed_back(isolated: Cli) -> None:
    """A block that does not match gets the error back; the corrected block lands."""
    replies = iter(
        [
            Reply("USER.md\n<<<<<<< SEARCH\n## Prefs\n=======\n## Prefs\n- Tea\n>>>>>>> REPLACE"),
            Reply("USER.md\n<<<<<<< SEARCH\n## Preferences\n=======\n## Preferences\n\n- Tea\n>>>>>>> REPLACE"),
        ]
    )
    respond = by_phase(lambda r: Reply("[USER] Tea"), lambda r: next(replies))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="text")
        make_workspace(isolated, sample_entries(1), files={"USER.md": "# User\n\n## Preferences\n"})
        code, report = isolated.run_json("run")
        assert code == 0, report
        feedback = server.completion_requests()[-1].messages[-1]["content"]
        assert "1. USER.md: Error: old_text was not found in USER.md" in feedback
        assert (isolated.workspace / "USER.md").read_text() == "# User\n\n## Preferences\n\n- Tea\n"
        assert report["batches"][0]["tool_call_dialects"] == {"text": 2}


FACTS = "\n".join(
    [
        "[USER] Prefers concise answers",
        "[MEMORY] Decisions: the ledger stores balances in PostgreSQL 16",
        "[ENTITY] ledger-api: the service Maya works on",
        "[OBSERVATION] Seems to work late on Fridays",
    ]
)


def test_facts_protocol_places_the_facts_with_no_edit_call(isolated: Cli) -> None:
    """editProtocol facts: phase 1 only; Dream files each fact in its file itself."""
    respond = by_phase(lambda r: Reply(FACTS), lambda r: Reply("I cannot call tools."))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, sample_entries(4))
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["outcome"] == "committed", report
        assert len(server.completion_requests()) == 1
    files = memory(isolated.workspace)
    assert "- Prefers concise answers" in files["USER.md"]
    assert "- The ledger stores balances in PostgreSQL 16" in files["memory/MEMORY.md"].split("## Decisions")[1]
    assert "the service Maya works on" in files["entities/ledger-api.md"]
    assert "| ledger-api | entities/ledger-api.md |" in files["index.md"]
    assert "Seems to work late on Fridays" in files["observations.md"]


def test_auto_falls_back_to_text_then_to_the_rules(isolated: Cli) -> None:
    """editProtocol auto with a model that only ever answers prose: tools, then text, then the
    placement rules; the facts land and the notes say which protocol did it."""
    respond = by_phase(lambda r: Reply(FACTS), lambda r: Reply("I have updated the memory files."))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="auto")
        make_workspace(isolated, sample_entries(4))
        code, report = isolated.run_json("run")
        assert code == 0, report
        batch = report["batches"][0]
        assert batch["edit_protocol"] == "facts" and batch["outcome"] == "committed"
        assert any("falling back to text" in n for n in batch["notes"])
        assert any("falling back to facts" in n for n in batch["notes"])
        phase2 = [r for r in server.completion_requests() if "## Facts to Apply" in r.messages[1]["content"]]
        assert [bool(r.tools) for r in phase2] == [True, False]
    assert "- Prefers concise answers" in (isolated.workspace / "USER.md").read_text()


ALEX = "AlexEgorov85__workspaces_nanobot/workspace"
# The five facts a real model's phase 1 produced for batch 1..20 of this workspace.
ALEX_FACTS = "\n".join(
    [
        "[USER] Name is Алексей (Alexey)",
        "[USER] Prefers answers in Russian",
        "[USER] Prefers concise, direct answers without procedural detail",
        "[MEMORY] Audit data in audit.db covers only 2024: 7 audits that year, 0 in 2025",
        "[MEMORY] Solutions: audit queries run through audit_analyze.bat on Windows or audit_analyzer.sh on Linux",
    ]
)


def test_facts_protocol_lands_the_real_workspaces_first_batch(
    isolated: Cli, fixtures_root: Path, tmp_path: Path
) -> None:
    """On a real nanobot workspace, the five facts of batch 1..20 land with editProtocol facts
    although phase 2 never produces an edit."""
    workspace = tmp_path / "alex"
    shutil.copytree(fixtures_root / ALEX, workspace)
    respond = by_phase(lambda r: Reply(ALEX_FACTS), lambda r: Reply("functions.edit_file:"))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="facts")
        code, report = isolated.run_json("run", "--workspace", str(workspace), "--max-batches", "1")
        assert code == 0, report
    batch = report["batches"][0]
    assert (batch["cursor_from"], batch["cursor_to"], batch["facts"], batch["outcome"]) == (1, 20, 5, "committed")
    user = (workspace / "USER.md").read_text()
    mem = (workspace / "memory" / "MEMORY.md").read_text()
    for text in ("Name is Алексей (Alexey)", "Prefers answers in Russian", "Prefers concise, direct answers"):
        assert text in user
    assert "Audit data in audit.db covers only 2024" in mem and "audit_analyze.bat on Windows" in mem
    assert len((workspace / "memory" / "history.jsonl").read_text().splitlines()) == 37


def test_a_small_context_window_splits_history_and_cuts_files_to_outlines(isolated: Cli) -> None:
    """contextWindow bounds every prompt: a long USER.md is shown as its outline, the history
    goes in several calls, and the report names what was left out."""
    big = "# User\n\n" + "".join(f"## Section {i}\n\n" + f"- detail {i} " * 40 + "\n\n" for i in range(12))
    entries = [f"- [durable] User fact {i}: " + "word " * 200 for i in range(8)]
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        use_preset(isolated, server, contextWindow=4096, maxTokens=512, editProtocol="facts")
        make_workspace(isolated, entries, files={"USER.md": big})
        code, report = isolated.run_json("run")
        assert code == 0, report
        left_out = report["batches"][0]["left_out"]
        assert any("USER.md: outline" in item for item in left_out), left_out
        assert any("history: given in" in item for item in left_out), left_out
        phase1 = server.completion_requests()
        assert len(phase1) > 1
        for request in phase1:
            assert sum(len(m["content"]) for m in request.messages) / 4 < 4096 - 512


def test_a_cut_off_analysis_keeps_its_complete_lines(isolated: Cli) -> None:
    """SmolLM2 rambles until the token limit: the complete fact lines before the cut are kept,
    the cut line is left out, and the report says so."""
    cut = Reply("[USER] Likes green tea\n[MEMORY] The ledger runs on Postg", finish_reason="length")
    with ScriptedLLMServer(responder=by_phase(lambda r: cut, lambda r: Reply("no tools here"))) as server:
        use_preset(isolated, server, editProtocol="facts")
        make_workspace(isolated, sample_entries(1))
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["facts"] == 1, report
        assert any("cut off by the token limit" in n for n in report["batches"][0]["notes"])
    assert "- Likes green tea" in (isolated.workspace / "USER.md").read_text()
    assert "Postg" not in (isolated.workspace / "memory" / "MEMORY.md").read_text()


def test_a_whole_file_answer_is_applied_only_when_it_keeps_the_file(isolated: Cli) -> None:
    """Asked for SEARCH/REPLACE blocks, Qwen rewrote whole files in a fence. Such an answer is
    applied when it keeps every line of the file; one that drops lines is refused with the reason."""
    original = "# User\n\nAbout the user.\n\n## Preferences\n\n- Likes coffee\n"
    replies = iter(
        [
            Reply("USER.md\n```markdown\n# User\n\n## Preferences\n\n- Likes tea\n```"),
            Reply("USER.md\n```markdown\n" + original + "- Likes tea\n```"),
        ]
    )
    respond = by_phase(lambda r: Reply("[USER] Likes tea"), lambda r: next(replies))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="text")
        make_workspace(isolated, sample_entries(1), files={"USER.md": original})
        code, report = isolated.run_json("run")
        assert code == 0, report
        feedback = server.completion_requests()[-1].messages[-1]["content"]
        assert "the whole-file answer drops 2 of the file's 4 lines" in feedback
    assert (isolated.workspace / "USER.md").read_text() == original + "- Likes tea\n"
    assert report["batches"][0]["tool_call_dialects"] == {"whole": 2}


def test_auto_moves_on_after_an_empty_edit_reply(isolated: Cli) -> None:
    """Qwen behind its own chat template answered phase 2 with nothing at all: under auto that is
    one more reply without an edit, and the facts still land."""
    respond = by_phase(lambda r: Reply("[USER] Prefers tea"), lambda r: Reply(""))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="auto")
        make_workspace(isolated, sample_entries(1))
        code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["edit_protocol"] == "facts", report
    assert "- Prefers tea" in (isolated.workspace / "USER.md").read_text()


def test_a_block_copying_the_prompts_example_is_refused(isolated: Cli) -> None:
    """Qwen copied the text protocol's example bullet into USER.md instead of its fact: such a
    block is refused with the reason, and the model's next block lands."""
    from dream_memory.core.prompts import TEXT_EXAMPLE_LINE

    block = "USER.md\n<<<<<<< SEARCH\n## Preferences\n=======\n## Preferences\n\n{}\n>>>>>>> REPLACE"
    replies = iter([Reply(block.format(TEXT_EXAMPLE_LINE)), Reply(block.format("- Tea"))])
    respond = by_phase(lambda r: Reply("[USER] Tea"), lambda r: next(replies))
    with ScriptedLLMServer(responder=respond) as server:
        use_preset(isolated, server, editProtocol="text")
        make_workspace(isolated, sample_entries(1), files={"USER.md": "# User\n\n## Preferences\n"})
        code, report = isolated.run_json("run")
        assert code == 0, report
        assert "is the prompt's example" in server.completion_requests()[-1].messages[-1]["content"]
    assert (isolated.workspace / "USER.md").read_text() == "# User\n\n## Preferences\n\n- Tea\n"


def test_a_context_window_too_small_names_the_smallest_that_fits(isolated: Cli) -> None:
    """A contextWindow the prompt cannot fit in is exit 2 naming the smallest one that fits: that
    window runs, one token less is refused the same way (the margins need no working out)."""
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        make_workspace(isolated, sample_entries(2))
        use_preset(isolated, server, contextWindow=1280, maxTokens=128, editProtocol="facts")
        refused = isolated.run("run", "--model", "local")
        assert refused.exit_code == 2 and "contextWindow 1280 is too small" in refused.stderr
        found = re.search(r"a contextWindow of at least (\d+)", refused.stderr)
        assert found is not None, refused.stderr
        smallest = int(found.group(1))
        use_preset(isolated, server, contextWindow=smallest - 1, maxTokens=128, editProtocol="facts")
        again = isolated.run("run", "--model", "local")
        assert again.exit_code == 2 and f"at least {smallest}" in again.stderr
        use_preset(isolated, server, contextWindow=smallest, maxTokens=128, editProtocol="facts")
        assert isolated.run("run", "--model", "local").exit_code == 0
