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
