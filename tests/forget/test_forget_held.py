"""A change Dream held for review on a forgotten entity's file is dropped by the purge, which
says so: never left as a damaged record naming `entities/[forgotten].md` that review can
neither accept nor restore (the purge rewrote the git history it would be restored from)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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


def _file_lines(output: str) -> list[str]:
    """The report's lines on files, history and held changes (before git's), as the real run
    words them."""
    lines = output.split("\ngit:", maxsplit=1)[0].splitlines()[1:]
    return [line.replace("would be ", "") for line in lines]


@pytest.mark.parametrize("purge", [("--entity", "acmecorp"), ("--purge", "acmecorp")], ids=["deleted", "renamed"])
def test_a_dry_run_names_the_files_the_real_run_changes_in_the_same_words(
    tmp_path: Path, purge: tuple[str, str]
) -> None:
    """The held change's record goes with it: a dry run listed its files as lines it would
    rewrite, and the real run deletes them."""
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)
    fields = ("files", "removed", "renamed", "history", "cursors", "held_dropped")

    dry = env.dream("forget", *purge, "--dry-run")
    code, dry_json = env.dream_json("forget", *purge, "--dry-run")
    assert dry.exit_code == 0 and code == 0, dry.output
    assert ".dream_held" not in dry.output and dry_json["held_dropped"] == {"1-1.1": "entities/acmecorp.md"}
    real = env.dream("forget", *purge, "--json")

    assert real.exit_code == 0, real.output
    done = json.loads(real.stdout)
    assert {k: dry_json[k] for k in fields} == {k: done[k] for k in fields}
    assert not (env.ws / "memory/.dream_held/1-1.1").exists()


def test_a_dry_run_prints_the_real_runs_file_lines(tmp_path: Path) -> None:
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)

    dry = env.dream("forget", "--entity", "acmecorp", "--dry-run")
    real = env.dream("forget", "--entity", "acmecorp")

    assert dry.exit_code == 0 and real.exit_code == 0, dry.output + real.output
    assert _file_lines(dry.output) == _file_lines(real.output)


def test_the_drop_is_committed_as_forgets_not_as_a_review_reject(tmp_path: Path) -> None:
    env = Env(tmp_path)
    _held_on_the_entity(env, tmp_path)

    assert env.dream("forget", "--entity", "acmecorp").exit_code == 0

    subjects = env.git("log", "--format=%s").splitlines()
    assert subjects[0] == "dream: forget dropped held change 1-1.1 (its file is deleted by the purge)"
    assert not any("review" in s for s in subjects), subjects
    assert "acmecorp" not in env.git("log", "--format=%B", "--all").lower()
