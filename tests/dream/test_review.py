"""Guarded writes end to end: the write policy holds a rewrite of a hand-written line while the
batch's additions land, and `dream review` lists, shows, accepts and rejects it, each step a
commit (CLI and API, a scripted model over HTTP, real git)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import Cli, git, make_workspace, use_server

from dream_memory import Workspace
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

HAND_LINE = "- Drinks tea every morning"
USER = "# User\n\n## Profile\n\n- Name: Ada\n" + HAND_LINE + "\n\n## Preferences\n\n- Editor: vim\n"


def _model(edits: list[dict[str, Any]]) -> Any:
    """Phase 1 answers two facts; phase 2 makes ``edits`` (edit_file calls), then says it is done."""

    def respond(request: dict[str, Any]) -> Reply:
        if not request.get("tools"):
            return Reply(
                "[USER] Uses Rust at work [from 1]\n[USER] Lives in Oslo [from 1]\n"
                "[USER] Drinks coffee every morning (was tea) [from 1]"
            )
        if any(m.get("role") == "tool" for m in request.get("messages") or []):
            return Reply("Done.")
        return Reply(tool_calls=[tool_call("edit_file", **e) for e in edits])

    return respond


ADD_AND_REWRITE = [
    {"path": "USER.md", "old_text": "- Editor: vim", "new_text": "- Editor: vim\n- Uses Rust at work\n- Lives in Oslo"},
    {"path": "USER.md", "old_text": HAND_LINE, "new_text": "- Drinks coffee every morning"},
]


def _hand_written(isolated: Cli) -> Path:
    """A workspace whose USER.md holds lines a person wrote (a `memory: manual edits` commit)."""
    ws = make_workspace(isolated, ["- The user switched from tea to coffee; uses Rust; lives in Oslo."])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(USER, encoding="utf-8")
    return ws


def _subjects(ws: Path) -> list[str]:
    return git(ws, "log", "--format=%s").splitlines()


def test_additions_land_the_rewrite_waits_and_review_accepts_it(isolated: Cli) -> None:
    """Two additions and a rewrite of a hand-written line: the additions are committed, the rewrite
    is held (listed with its diff by `dream review --json`), `accept` applies it, and git log shows
    the manual edits, the batch and the accept as three commits."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "held", report
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- Uses Rust at work\n- Lives in Oslo\n" in text
    assert HAND_LINE in text and "coffee" not in text
    assert report["cursor_after"] == 1 and report["batches"][0]["outcome"] == "committed"
    [held] = report["held"]
    assert held["path"] == "USER.md" and held["lines"] == [6, 6] and "a line a person wrote" in held["reason"]

    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and listed["count"] == 1
    [change] = listed["changes"]
    assert change["id"] == held["id"] and change["removed"] == [HAND_LINE]
    assert change["added"] == ["- Drinks coffee every morning"]
    assert f"-{HAND_LINE}\n+- Drinks coffee every morning\n" in change["diff"]
    shown = isolated.run("review", "show", held["id"])
    assert shown.exit_code == 0 and "+- Drinks coffee every morning" in shown.stdout
    _, one = isolated.run_json("review", "show", held["id"], "--json")
    assert one["facts"] == ["[USER] Drinks coffee every morning (was tea)  <- 1"]  # the fact that asked, its cursor
    assert one["section"] == ["User", "Profile"]

    before = len(_subjects(ws))
    accepted = isolated.run("review", "accept", held["id"])
    assert accepted.exit_code == 0, accepted.output
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- Drinks coffee every morning" in text and HAND_LINE not in text and "- Lives in Oslo" in text
    subjects = _subjects(ws)
    assert len(subjects) == before + 1 and subjects[0].startswith(f"dream: apply held {held['id']}: USER.md line 6")
    assert subjects[1].startswith("dream: 1..1: USER.md +2 -0 (1 held for review)")
    assert subjects[2] == "memory: manual edits"
    assert not (ws / "memory" / ".dream_held" / held["id"]).exists()
    assert isolated.run_json("review", "--json")[1]["count"] == 0
    assert git(ws, "status", "--porcelain") == ""


def test_reject_drops_the_change_in_its_own_commit(isolated: Cli) -> None:
    """`dream review reject ID` leaves the hand-written line, removes the record and commits that."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    result = isolated.run("review", "reject", held_id)
    assert result.exit_code == 0, result.output
    assert HAND_LINE in (ws / "USER.md").read_text(encoding="utf-8")
    assert _subjects(ws)[0].startswith(f"dream: reject held {held_id}: USER.md line 6")
    assert isolated.run_json("status", "--json")[1]["held"] == []
    again = isolated.run("review", "accept", held_id)
    assert again.exit_code == 2 and "nothing held under" in again.output


def test_restore_apply_held_and_discard_held_take_a_held_change(isolated: Cli) -> None:
    """The existing `dream restore --apply-held ID` / `--discard-held ID` settle a held change too."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    code, applied = isolated.run_json("restore", "--apply-held", held_id, "--json")
    assert code == 0 and applied["applied"] == held_id and applied["files"] == ["USER.md"]
    assert "coffee every morning" in (ws / "USER.md").read_text(encoding="utf-8")


def test_an_unknown_id_names_what_is_held_from_restore_and_review_alike(isolated: Cli) -> None:
    """A mistyped id: `--apply-held`, `--discard-held` and `review accept` / `reject` each refuse
    (exit 2) naming the held change's id, which is what the person meant to type."""
    _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    for args in (
        ("restore", "--apply-held"),
        ("restore", "--discard-held"),
        ("review", "accept"),
        ("review", "reject"),
    ):
        refused = isolated.run(*args, "1-1.9")
        assert refused.exit_code == 2 and f"(held now: {held_id})" in refused.output, (args, refused.output)
    assert isolated.run_json("status", "--json")[1]["held"] == [held_id]


def test_status_and_doctor_count_held_changes(isolated: Cli) -> None:
    """`dream status` lists the held change's id; `dream doctor` names it and says to run dream review."""
    _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    assert isolated.run_json("status", "--json")[1]["held"] == [held_id]
    doctor = isolated.run("doctor")
    assert f"1 change(s) held for a person to decide: {held_id}" in doctor.output
    assert "dream review" in doctor.output


def test_api_review_lists_shows_and_accepts(isolated: Cli) -> None:
    """The Python API's Workspace.review is the same service: list, show, accept."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        config = use_server(isolated, server)
        isolated.run_json("run")
    workspace = Workspace(ws, config=config, env=isolated.env)
    listed = workspace.review()
    assert listed["count"] == 1
    held_id = listed["changes"][0]["id"]
    assert workspace.review("show", held_id)["removed"] == [HAND_LINE]
    done = workspace.review("accept", held_id)
    assert done["accepted"][0]["files"] == ["USER.md"] and done["accepted"][0]["commit"]
    assert workspace.review()["count"] == 0
    assert "coffee every morning" in (ws / "USER.md").read_text(encoding="utf-8")


def test_the_config_can_let_rewrites_of_hand_lines_land(isolated: Cli) -> None:
    """writePolicy.manual = "apply": the same batch lands whole, nothing is held."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        config = use_server(isolated, server)
        data = json.loads(config.read_text(encoding="utf-8"))
        data["agents"]["defaults"]["dream"] = {"writePolicy": {"manual": "apply"}}
        config.write_text(json.dumps(data), encoding="utf-8")
        code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "ok" and report["held"] == []
    assert "- Drinks coffee every morning" in (ws / "USER.md").read_text(encoding="utf-8")


def test_accepting_over_a_later_hand_edit_of_the_same_line_conflicts_and_changes_nothing(isolated: Cli) -> None:
    """The person edited the held line since: accept exits 1 naming USER.md and line 6, and
    nothing changes (the file, git log, the held change); reject still works."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    edited = (ws / "USER.md").read_text(encoding="utf-8").replace(HAND_LINE, "- Drinks tea every evening")
    (ws / "USER.md").write_text(edited, encoding="utf-8")
    log_before = _subjects(ws)
    result = isolated.run("review", "accept", held_id)
    assert result.exit_code == 1
    assert f"cannot accept {held_id}: USER.md line 6 changed since it was held; nothing was changed" in result.output
    assert (ws / "USER.md").read_text(encoding="utf-8") == edited
    assert _subjects(ws) == log_before
    assert isolated.run_json("review", "--json")[1]["count"] == 1
    assert isolated.run("review", "reject", held_id).exit_code == 0
    assert "- Drinks tea every evening" in (ws / "USER.md").read_text(encoding="utf-8")


def test_a_crafted_held_change_record_writes_nothing_outside_memory(isolated: Cli) -> None:
    """A change record edited to name .git/hooks/post-commit, or a state id leaving the held
    folder: accept exits 2 naming the problem, no hook appears, and the crafted record can still
    be rejected."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    record_path = ws / "memory" / ".dream_held" / held_id / "change.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["path"] = ".git/hooks/post-commit"
    record["theirs"] = "#!/bin/sh\necho owned\n"
    record_path.write_text(json.dumps(record), encoding="utf-8")
    result = isolated.run("review", "accept", held_id)
    assert result.exit_code == 2 and "names the path" in result.output and "nothing was changed" in result.output
    assert not (ws / ".git" / "hooks" / "post-commit").exists()
    listed = isolated.run_json("review", "--json")[1]
    assert "names the path" in listed["changes"][0]["problem"]
    assert isolated.run("review", "reject", held_id).exit_code == 0
    assert not (ws / ".git" / "hooks" / "post-commit").exists()

    state_path = ws / "memory" / ".dream_state.json"
    state = json.loads(state_path.read_text(encoding="utf-8"))
    state["changes"] = [{"id": "../../../outside", "path": "USER.md", "cursor_from": 1, "cursor_to": 1,
                         "reason": "r", "created": "t"}]  # fmt: skip
    state_path.write_text(json.dumps(state), encoding="utf-8")
    for action in ("accept", "reject"):
        crafted = isolated.run("review", action, "--all")
        assert crafted.exit_code == 2 and "is not a held batch id" in crafted.output


def _legacy_batch(ws: Path, line: str) -> None:
    """A whole batch held by an earlier version (held.json and its state entry), adding ``line``."""
    folder = ws / "memory" / ".dream_held" / "7-9"
    folder.mkdir(parents=True)
    user = (ws / "USER.md").read_text(encoding="utf-8")
    files = [{"path": "USER.md", "before": user, "after": user + line + "\n"}]
    meta = {"id": "7-9", "cursor_from": 7, "cursor_to": 9, "reason": "would remove 12 of 20 lines", "files": files}
    (folder / "held.json").write_text(json.dumps(meta), encoding="utf-8")
    (folder / "changes.diff").write_text(f"+{line}\n", encoding="utf-8")
    state_path = ws / "memory" / ".dream_state.json"
    state = json.loads(state_path.read_text(encoding="utf-8"))
    state["held"] = [
        {k: meta[k] for k in ("id", "cursor_from", "cursor_to", "reason")} | {"created": "t", "files": ["USER.md"]}
    ]
    state_path.write_text(json.dumps(state), encoding="utf-8")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "dream: held 7..9 (from an old version)")


def test_a_whole_batch_held_by_an_earlier_version_is_listed_and_settled(isolated: Cli) -> None:
    """Migration: a held.json batch record and its state entry from before per-change holds are
    listed by `dream review` (type batch) and accepted through it, as --apply-held did."""
    ws = _hand_written(isolated)
    assert isolated.run("run", "--model", "offline").exit_code == 0
    _legacy_batch(ws, "- from the old batch")
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [b["id"] for b in listed["batches"]] == ["7-9"] and listed["count"] == 1
    assert isolated.run("review", "show", "7-9").exit_code == 0
    code, done = isolated.run_json("review", "accept", "7-9", "--json")
    assert code == 0 and done["accepted"][0]["type"] == "batch"
    assert (ws / "USER.md").read_text(encoding="utf-8").endswith("- from the old batch\n")
    assert isolated.run_json("review", "--json")[1]["count"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("fault", [("journal.write", 2), ("memory.write", 2)])
def test_a_crash_while_a_partly_held_batch_lands_loses_nothing(isolated: Cli, fault: tuple[str, int]) -> None:
    """SIGKILL before the batch's commit is journaled (rolled back: the next run dreams the batch
    again) or while its files are written (finished by the next command): either way the held
    change is recorded exactly once, the additions land once, the cursor passes the batch and the
    tree is clean."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        env = {**os.environ, **isolated.env}
        crashed = subprocess.run(
            [sys.executable, "-c", _KILLER, fault[0], str(fault[1]), "run"], env=env, capture_output=True, text=True
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        code, report = isolated.run_json("run")
    assert code == 0, report
    listed = isolated.run_json("review", "--json")[1]
    assert [c["removed"] for c in listed["changes"]] == [[HAND_LINE]]
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert text.count("- Uses Rust at work") == 1 and HAND_LINE in text
    assert isolated.run_json("status", "--json")[1]["dream_cursor"] == 1
    assert git(ws, "status", "--porcelain") == ""


_KILLER = """
import os, signal, sys
from dream_memory.testing.faults import fault_hook
site, nth = sys.argv[1], int(sys.argv[2])
seen = [0]
def inject(name, path):
    if name == site:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
with fault_hook(inject):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[3:]]
    main()
"""


def test_a_mistyped_write_policy_key_is_warned_about_and_a_bad_action_refused(isolated: Cli) -> None:
    """ "pinn": true under a section would silently pin nothing: it is warned about by name; an
    action other than apply/hold is a config error (exit 2) naming the key."""
    make_workspace(isolated, [])
    config = isolated.home / "dream.json"
    policy = {"files": {"USER.md": {"sections": {"Profile": {"pinn": True}}}}}
    config.write_text(json.dumps({"agents": {"defaults": {"dream": {"writePolicy": policy}}}}), encoding="utf-8")
    result = isolated.run("status", "--config", str(config))
    assert result.exit_code == 0
    assert "unknown setting agents.defaults.dream.writePolicy.files.USER.md.sections.Profile.pinn" in result.stderr
    bad = {"agents": {"defaults": {"dream": {"writePolicy": {"manual": "maybe"}}}}}
    config.write_text(json.dumps(bad), encoding="utf-8")
    refused = isolated.run("status", "--config", str(config))
    assert refused.exit_code == 2 and "agents.defaults.dream.writePolicy.manual" in refused.stderr


def test_accept_all_keeps_an_old_held_batch_beside_a_held_change_of_the_same_file(isolated: Cli) -> None:
    """The old batch's file was written first, then the change's commit wrote the file as it was
    before the batch: `accepted 7-9; accepted 1-1.1`, exit 0, and the batch's line gone."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    _legacy_batch(ws, "- from the old batch")
    code, done = isolated.run_json("review", "accept", "--all", "--json")
    assert code == 0, done
    assert sorted(d["id"] for d in done["accepted"]) == sorted(["7-9", held_id])
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert "- from the old batch" in text
    assert HAND_LINE not in text  # the held rewrite of the hand line landed too
    assert isolated.run_json("review", "--json")[1]["count"] == 0


def test_a_forced_accept_says_what_it_wrote_over(isolated: Cli) -> None:
    """`restore --apply-held ID --force` takes the change's side of a line edited since; the text
    output said only `accepted ...`, and what it replaced was named in --json alone."""
    ws = _hand_written(isolated)
    with ScriptedLLMServer(responder=_model(ADD_AND_REWRITE)) as server:
        use_server(isolated, server)
        _, report = isolated.run_json("run")
    held_id = report["held"][0]["id"]
    user = ws / "USER.md"
    user.write_text(user.read_text(encoding="utf-8").replace(HAND_LINE, "- Drinks green tea"), encoding="utf-8")
    result = isolated.run("restore", "--apply-held", held_id, "--force")
    assert result.exit_code == 0, result.output
    assert "--force replaced later work in USER.md (it is still in git history)" in result.output
