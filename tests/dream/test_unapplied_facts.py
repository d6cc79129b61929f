"""A fact phase 1 found and phase 2 left out is not dropped: it waits for review in its file, as
the placement rules would add it. Before, the batch landed as `committed`, the run `ok`, with a
note ("facts for USER.md may not all be applied") and the fact in no file: the standard says no
fact a model produced is dropped silently. A fact the model wrote in words of its own, or that a
later fact of the same batch replaced, is not left out and waits for nobody."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

Dream = Callable[..., subprocess.CompletedProcess[str]]
ENTRIES = ["I drink green tea every morning.", "My sister Ana lives in Porto.", "Ana moved to Lisbon last week."]


def _run(dream: Dream, tmp_path: Path, facts: str, *edits: tuple[str, str]) -> tuple[Path, dict[str, Any]]:
    """One run: phase 1 answers ``facts``; phase 2 adds each (after, line) under that heading."""
    ws = build_workspace(tmp_path / "ws", history=ENTRIES)
    calls = [
        tool_call("edit_file", path="USER.md", old_text=after, new_text=f"{after}\n\n{line}") for after, line in edits
    ]
    with ScriptedLLMServer([Reply(facts), Reply(tool_calls=calls), Reply("Done.")]) as server:
        run = dream("run", "-w", str(ws), "--json", env=server.write_config(tmp_path / "dream.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    return ws, json.loads(run.stdout)


def test_a_fact_phase_2_left_out_waits_for_review_and_accepting_adds_it(dream: Dream, tmp_path: Path) -> None:
    facts = "[USER] User drinks green tea every morning. [from 1]\n[USER] User's sister Ana lives in Porto. [from 2]"
    ws, report = _run(dream, tmp_path, facts, ("## Preferences", "- Drinks green tea every morning."))
    assert report["status"] == "held" and report["cursor_after"] == 3, report
    (waiting,) = report["held"]
    assert waiting["path"] == "USER.md" and waiting["reason"].startswith("phase 2 did not apply 1 fact(s)")
    user = (ws / "USER.md").read_text(encoding="utf-8")
    assert "green tea" in user and "Porto" not in user

    record = json.loads((ws / "memory/.dream_held" / waiting["id"] / "change.json").read_text(encoding="utf-8"))
    assert record["facts"] == ["[USER] User's sister Ana lives in Porto.  <- 2"]
    assert "- User's sister Ana lives in Porto." in record["added"], record
    accepted = dream("review", "accept", waiting["id"], "-w", str(ws))
    assert accepted.returncode == 0, accepted.stderr
    assert "- User's sister Ana lives in Porto." in (ws / "USER.md").read_text(encoding="utf-8")


def test_a_fact_written_in_the_models_own_words_is_not_held(dream: Dream, tmp_path: Path) -> None:
    facts = "[USER] User drinks green tea every morning. [from 1]\n[USER] User's sister Ana lives in Porto. [from 2]"
    ws, report = _run(
        dream,
        tmp_path,
        facts,
        ("## Preferences", "- Green tea each morning."),
        ("## Work Context", "- Sister: Ana (Porto)."),
    )
    assert report["status"] == "ok" and report["held"] == [], report
    assert not (ws / "memory/.dream_held").exists()


def test_a_fact_a_later_one_of_the_batch_replaced_is_named_not_held(dream: Dream, tmp_path: Path) -> None:
    facts = "[USER] User's sister Ana lives in Porto. [from 2]\n[USER] User's sister Ana lives in Lisbon. [from 3]"
    ws, report = _run(dream, tmp_path, facts, ("## Work Context", "- User's sister Ana lives in Lisbon."))
    assert report["status"] == "ok" and report["held"] == [], report
    (batch,) = report["batches"]
    assert any(
        note.startswith('fact 1 ("User\'s sister Ana lives in Porto.") is not in memory: the later fact 2')
        for note in batch["notes"]
    ), batch["notes"]
    assert "Porto" not in (ws / "USER.md").read_text(encoding="utf-8")


def _scripted(dream: Dream, tmp_path: Path, ws: Path, replies: list[Reply], *args: str, **dream_cfg: Any) -> Any:
    with ScriptedLLMServer(replies) as server:
        env = server.write_config(tmp_path / "dream.json")
        if dream_cfg:
            config = json.loads((tmp_path / "dream.json").read_text(encoding="utf-8"))
            config["agents"]["defaults"]["dream"] = dream_cfg
            (tmp_path / "dream.json").write_text(json.dumps(config), encoding="utf-8")
        run = dream("run", "-w", str(ws), "--json", *args, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def _tea(after: str = "## Preferences") -> Reply:
    return Reply(tool_calls=[tool_call("edit_file", path="USER.md", old_text=after, new_text=f"{after}\n\n- Tea.")])


def test_facts_left_out_in_two_batches_are_accepted_after_later_lines_in_their_section(
    dream: Dream, tmp_path: Path
) -> None:
    """Each held fact was a diff against the file as its batch left it: a second batch adding a
    line under the same heading made accepting the first a conflict (exit 1, nothing accepted).
    Accepting places the facts anew in the file as it is now."""
    ws = build_workspace(tmp_path / "ws", history=["tea", "Ana in Porto", "Rui in Faro", "jazz"])
    replies = [
        Reply("[USER] User drinks tea. [from 1]\n[USER] User's sister Ana lives in Porto. [from 2]"),
        _tea(),
        Reply("Done."),
        Reply("[USER] User likes jazz. [from 4]\n[USER] User's brother Rui lives in Faro. [from 3]"),
        Reply(tool_calls=[tool_call("edit_file", path="USER.md", old_text="- Tea.", new_text="- Tea.\n- Jazz.")]),
        Reply("Done."),
    ]
    report = _scripted(dream, tmp_path, ws, replies, "--batch-size", "2")
    assert [h["path"] for h in report["held"]] == ["USER.md", "USER.md"], report["held"]
    accepted = dream("review", "accept", "--all", "-w", str(ws))
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    user = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- User's sister Ana lives in Porto." in user and "- User's brother Rui lives in Faro." in user


def test_a_left_out_fact_holding_a_secret_waits_redacted(dream: Dream, tmp_path: Path) -> None:
    """The fact as phase 1 gave it held a token; the batch's record holds it redacted. Compared
    with each other, the two never matched and the fact was dropped without a word."""
    token = "ghp_" + "aB3dEfGh1jKlMn0pQrStUvWxYz0123456789"
    ws = build_workspace(tmp_path / "ws", history=["tea", "my CI token is in the vault"])
    facts = Reply(f"[USER] User drinks tea. [from 1]\n[USER] User's CI token is {token} [from 2]")
    report = _scripted(dream, tmp_path, ws, [facts, _tea(), Reply("Done.")])
    (waiting,) = report["held"]
    record = (ws / "memory/.dream_held" / waiting["id"] / "change.json").read_text(encoding="utf-8")
    assert "User's CI token is [REDACTED:github_token]" in record and token not in record


def test_a_fact_about_someone_else_does_not_replace_the_users_own(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["I am vegetarian.", "My wife is vegetarian too."])
    facts = Reply("[USER] User is vegetarian. [from 1]\n[USER] User's wife is vegetarian. [from 2]")
    edit = tool_call(
        "edit_file", path="USER.md", old_text="## Profile", new_text="## Profile\n\n- User's wife is vegetarian."
    )
    report = _scripted(dream, tmp_path, ws, [facts, Reply(tool_calls=[edit]), Reply("Done.")])
    assert report["status"] == "held", report
    record = (ws / "memory/.dream_held" / report["held"][0]["id"] / "change.json").read_text(encoding="utf-8")
    assert "User is vegetarian." in record


def test_a_pinned_file_gets_no_proposal_and_a_note_says_so(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["tea", "Ana in Porto"])
    facts = Reply("[MEMORY] User drinks tea. [from 1]\n[USER] User's sister Ana lives in Porto. [from 2]")
    first = (ws / "memory/MEMORY.md").read_text(encoding="utf-8").splitlines()[0]
    edit = tool_call("edit_file", path="memory/MEMORY.md", old_text=first, new_text=f"{first}\n\n- Drinks tea.")
    pin = {"writePolicy": {"files": {"USER.md": {"pin": True}}}}
    report = _scripted(dream, tmp_path, ws, [facts, Reply(tool_calls=[edit]), Reply("Done.")], **pin)
    assert report["status"] == "ok" and report["held"] == [], report
    (batch,) = report["batches"]
    assert any("left out of USER.md are not proposed for review: USER.md is pinned" in n for n in batch["notes"])


def test_a_dry_run_says_facts_would_wait(dream: Dream, tmp_path: Path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["tea", "Ana in Porto"])
    facts = Reply("[USER] User drinks tea. [from 1]\n[USER] User's sister Ana lives in Porto. [from 2]")
    report = _scripted(dream, tmp_path, ws, [facts, _tea(), Reply("Done.")], "--dry-run")
    (batch,) = report["batches"]
    assert any("fact(s) phase 2 left out; a run holds those memory lacks for review" in n for n in batch["notes"])


def test_instead_of_replaces_the_line_about_it_not_one_quoting_its_words() -> None:
    """From a real workspace (patria): "a full run instead of 'website only'" replaced the first
    bullet holding "website only", a fact about Dutch that quoted the user asking "waarom website
    only"; the fact it was about stayed. The line sharing most words with it is replaced now, and
    the earlier fact it replaced is named, not held."""
    from dream_memory.core.facts import Fact
    from dream_memory.core.placement import add_fact
    from dream_memory.core.provenance import replaced_in_batch

    text = (
        "# User\n\n## Preferences\n\n"
        '- Communication style should be in Dutch (the user asked "waarom website only").\n\n'
        '## Work Context\n\n- User requested a "website-only" run, skipping Bluesky and LinkedIn.\n'
    )
    later = 'The user requested a "full run" instead of "website only".'
    after = add_fact(text, "USER.md", later)
    assert "should be in Dutch" in after and "skipping Bluesky" not in after
    assert '- The user requested a "full run" instead of "website only".' in after
    facts = [
        Fact("USER", 'User requested a "website-only" run, skipping Bluesky and LinkedIn.', sources=(1,)),
        Fact("USER", later, sources=(9,)),
    ]
    assert replaced_in_batch([1], facts, {2}) == {1: 2}
