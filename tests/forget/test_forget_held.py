"""A change Dream held for review on a forgotten entity's file is dropped by the purge, which
says so: never left as a damaged record naming `entities/[forgotten].md` that review can
neither accept nor restore (the purge rewrote the git history it would be restored from)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forget_helpers import Env

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call


def _respond(request: dict[str, Any]) -> Reply:
    """One entity fact; then an edit of the line a person wrote, which Dream holds for review."""
    if not request.get("tools"):
        return Reply("[ENTITY] acmecorp: Acmecorp deploys on Mondays now (was Fridays) [from 1]")
    if any(m.get("role") == "tool" for m in request.get("messages") or []):
        return Reply("Done.")
    return Reply(
        tool_calls=[
            tool_call(
                "edit_file",
                path="entities/acmecorp.md",
                old_text="- Acmecorp deploys on Fridays",
                new_text="- Acmecorp deploys on Mondays",
            )
        ]
    )


def _held_on_the_entity(env: Env, tmp_path: Path) -> None:
    assert env.dream("init").exit_code == 0
    (env.ws / "entities").mkdir(exist_ok=True)
    (env.ws / "entities/acmecorp.md").write_text("# acmecorp\n\n- Acmecorp deploys on Fridays\n")
    (env.ws / "index.md").write_text(
        "# Index\n\n| Entity | File | Repos |\n|---|---|---|\n| acmecorp | [acmecorp](entities/acmecorp.md) | /src/acme |\n"
    )
    assert env.dream("append", "acmecorp now deploys on Mondays").exit_code == 0
    with ScriptedLLMServer(responder=_respond) as server:
        env.env.update(server.write_config(tmp_path / "dream.json"))
        assert env.dream("run").exit_code == 0
    listed = env.dream("review")
    assert "1-1.1" in listed.output and "entities/acmecorp.md" in listed.output


def test_forget_entity_drops_the_change_held_on_its_file_and_says_so(tmp_path: Path) -> None:
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)

    shown = env.dream("forget", "--entity", "acmecorp")

    assert shown.exit_code == 0, shown.output
    review = env.dream("review")
    assert review.exit_code == 0 and "damaged" not in review.output, review.output
    assert "held change 1-1.1 on entities/acmecorp.md: dropped" in shown.output
    assert "nothing is held" in review.output
    assert not (env.ws / "memory/.dream_held/1-1.1").exists()
    assert env.git("status", "--porcelain").strip() == ""
    assert "acmecorp" not in env.git("log", "-p", "--all").lower()


def test_a_dry_run_names_the_held_change_and_drops_nothing(tmp_path: Path) -> None:
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)

    code, dry = env.dream_json("forget", "--entity", "acmecorp", "--dry-run")

    assert code == 0 and dry["held_dropped"] == {"1-1.1": "entities/acmecorp.md"}
    assert (env.ws / "memory/.dream_held/1-1.1").is_dir()
    assert "1-1.1" in env.dream("review").output


def test_a_held_record_it_cannot_read_fails_the_purge_before_it_starts(tmp_path: Path) -> None:
    """A damaged Dream state committed to the repository: forget --entity cannot tell which held
    changes it would drop, so it stops (exit 2) before its journal, leaving no unfinished purge
    that every command that commits would then wait for."""
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)
    (env.ws / "memory/.dream_state.json").write_text("{bad")
    env.git("add", "-f", "memory/.dream_state.json")
    env.git("commit", "-qm", "a damaged state")

    failed = env.dream("forget", "--entity", "acmecorp")

    assert failed.exit_code == 2, failed.output
    assert not (env.ws / "memory/.forget_journal.json").exists()
    assert "unfinished" not in env.dream("status").output
