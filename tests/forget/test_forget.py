"""dream forget --purge / --entity: the value leaves every file, history line, archive line,
commit, tag, reflog and object; git's own CLI is the judge (docs/forget.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forget_helpers import CANARY, Env, dreamt_workspace, holders, indexed_store, tree_bytes

from dream_memory.testing.faults import fault_hook


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_purge_leaves_the_canary_nowhere_git_or_files_can_find_it(env: Env) -> None:
    """After three Dream batches, a side branch, an annotated tag naming the canary and a
    compaction into memory/archive/, `dream forget --purge` leaves it in no file, no history or
    archive line, no commit reachable from any ref, no reflog and no object at all; fsck is clean
    and history cursors are unchanged."""
    dreamt_workspace(env, batches=3, compact=True)
    env.git("branch", "side", "HEAD~1")
    env.git("tag", "-a", "v1", "-m", f"tagged while {CANARY} was known")
    assert list((env.ws / "memory" / "archive").glob("history-*.jsonl")), "compaction archived nothing"
    before = holders(env)
    assert "USER.md" in before and "memory/history.jsonl" in before and before["log -p --all"]
    cursors_before = [json.loads(line)["cursor"] for line in (env.ws / "memory/history.jsonl").read_text().splitlines()]

    code, report = env.dream_json("forget", "--purge", CANARY)

    assert code == 0, report
    assert holders(env) == {}
    assert env.git("fsck", "--strict").strip() == ""
    assert CANARY not in env.git("fsck", "--unreachable", "--no-reflogs", "--no-dangling")
    unreachable = env.git("fsck", "--unreachable", "--no-reflogs").split()
    assert not unreachable, unreachable
    cursors_after = [json.loads(line)["cursor"] for line in (env.ws / "memory/history.jsonl").read_text().splitlines()]
    assert cursors_after == cursors_before
    assert "[forgotten]" in (env.ws / "USER.md").read_text()
    assert {"refs/heads/main", "refs/heads/side", "refs/tags/v1"} <= set(report["refs"])
    assert report["history"] and report["cursors"] and report["commits_holding"]
    assert env.git("status", "--porcelain").strip() == ""


def test_log_and_restore_work_on_the_rewritten_history(env: Env) -> None:
    """dream log shows the rewritten latest change and dream restore undoes a rewritten commit."""
    dreamt_workspace(env, batches=2)
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    log = env.dream("log")
    assert log.exit_code == 0 and "dream:" in log.output and CANARY not in log.output
    head = env.git("rev-parse", "HEAD").strip()
    restored = env.dream("restore", head)
    assert restored.exit_code == 0, restored.output
    assert env.git("fsck", "--strict").strip() == ""
    assert holders(env) == {}


def test_the_audit_record_names_the_purge_without_the_value(env: Env) -> None:
    """memory/.forgotten.json records the purge (id, kind, time, counts) and never the value; it
    is untracked, and a second run of the same purge finds nothing and records nothing twice."""
    dreamt_workspace(env, batches=1)
    code, report = env.dream_json("forget", "--purge", CANARY)
    assert code == 0
    text = (env.ws / "memory/.forgotten.json").read_text()
    assert CANARY not in text and CANARY.lower() not in text.lower()
    record = json.loads(text)
    assert [p["id"] for p in record["purges"]] == [report["purge_id"]]
    assert record["purges"][0]["kind"] == "value" and record["purges"][0]["at"]
    assert "memory/.forgotten.json" not in env.git("ls-files")
    assert env.git("status", "--porcelain").strip() == ""
    code, again = env.dream_json("forget", "--purge", CANARY)
    assert code == 0 and again["commits_rewritten"] == 0 and not again["files"]
    assert len(json.loads((env.ws / "memory/.forgotten.json").read_text())["purges"]) == 1


def test_a_purged_value_is_refused_later_even_when_allowlisted(env: Env) -> None:
    """After the purge, an append holding the value stores [REDACTED:forgotten] in its place,
    although the secret allowlist names it."""
    dreamt_workspace(env, batches=1)
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    config = json.loads((env.ws / "dream.json").read_text()) if (env.ws / "dream.json").exists() else {}
    config.setdefault("agents", {}).setdefault("defaults", {}).setdefault("dream", {})["secretAllowlist"] = [CANARY]
    (env.ws / "dream.json").write_text(json.dumps(config))
    assert env.dream("append", f"- [durable] again {CANARY} here").exit_code == 0
    last = (env.ws / "memory/history.jsonl").read_text().splitlines()[-1]
    assert CANARY not in last and "[REDACTED:forgotten]" in last


def test_dry_run_lists_the_changes_and_writes_nothing(env: Env) -> None:
    """--dry-run names files, lines, history entries and commits, and leaves every byte of the
    workspace and its repository as it was."""
    dreamt_workspace(env, batches=2)
    before = tree_bytes(env.ws)
    code, report = env.dream_json("forget", "--purge", CANARY, "--dry-run")
    assert code == 0
    assert report["dry_run"] and "USER.md" in report["files"] and report["cursors"] and report["commits_holding"]
    assert report["refs"]["refs/heads/main"]["old"] == env.git("rev-parse", "HEAD").strip()
    assert tree_bytes(env.ws) == before


def test_entity_purge_removes_its_file_and_its_name(env: Env) -> None:
    """--entity NAME removes entities/NAME.md from disk and every commit, its index.md row, and
    the name everywhere else."""
    dreamt_workspace(env, batches=1)
    (env.ws / "entities").mkdir(exist_ok=True)
    (env.ws / "entities" / "Zorblatt.md").write_text("# Zorblatt\n\nLives in the attic.\n")
    index = env.ws / "index.md"
    index.write_text((index.read_text() if index.exists() else "") + "- [Zorblatt](entities/Zorblatt.md): a ghost\n")
    (env.ws / "USER.md").write_text((env.ws / "USER.md").read_text() + "\n- Friend of Zorblatt\n")
    env.git("add", "-A")
    env.git("commit", "-qm", "add Zorblatt by hand")
    code, report = env.dream_json("forget", "--entity", "Zorblatt")
    assert code == 0, report
    assert "entities/Zorblatt.md" in report["removed"]
    assert not (env.ws / "entities" / "Zorblatt.md").exists()
    assert "Zorblatt" not in env.git("log", "-p", "--all", "--stat")
    assert "Zorblatt" not in env.git("cat-file", "--batch-all-objects", "--batch")
    assert "Zorblatt" not in (env.ws / "USER.md").read_text() and "Zorblatt" not in index.read_text()
    assert env.git("fsck", "--strict").strip() == ""


def test_refuses_a_dirty_tree_and_a_merge_in_progress(env: Env) -> None:
    """Uncommitted edits of memory files and a merge under way are refused with exit 2 and a
    message; nothing changes."""
    dreamt_workspace(env, batches=1)
    user = env.ws / "USER.md"
    user.write_text(user.read_text() + "\n- edited by hand\n")
    result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 2 and "uncommitted edits" in result.output
    assert CANARY in user.read_text()
    env.git("checkout", "USER.md")
    (env.ws / ".git" / "MERGE_HEAD").write_text(env.git("rev-parse", "HEAD"))
    result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 2 and "merge" in result.output
    assert CANARY in user.read_text()


def test_bad_values_are_refused_with_exit_2(env: Env) -> None:
    """A value too short to purge safely, or both options at once, is a one-line error, exit 2."""
    dreamt_workspace(env, batches=1)
    short = env.dream("forget", "--purge", "tea")
    assert short.exit_code == 2 and "fewer than" in short.output
    both = env.dream("forget", "--purge", CANARY, "--entity", "Bob")
    assert both.exit_code == 2 and "exactly one" in both.output


def test_a_pushed_repository_gets_the_exact_force_push(env: Env, tmp_path: Path) -> None:
    """With a remote, the report prints `git push --force-with-lease=<ref>:<old> <remote> <refs>`
    for each rewritten branch and warns about forks and pull requests; the command pushes."""
    dreamt_workspace(env, batches=2)
    remote = tmp_path / "remote.git"
    env.git("init", "-q", "--bare", str(remote))
    env.git("remote", "add", "origin", str(remote))
    env.git("push", "-q", "origin", "main")
    env.git("fetch", "-q", "origin")
    result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 0, result.output
    push = [line.strip() for line in result.output.splitlines() if line.strip().startswith("git push")]
    branches = [line for line in push if "refs/heads/main:" in line]
    assert len(branches) == 1 and " origin " in branches[0] and "refs/notes/" not in branches[0]
    assert "pull request" in result.output and "fork" in result.output
    env.git(*branches[0].split()[1:])
    assert env.git("--git-dir", str(remote), "log", "-p", "--all").count(CANARY) == 0
    # The notes were never pushed: their own command is refused and nothing is lost by that.
    for line in push:
        if line not in branches:
            assert "refs/notes/dream:refs/notes/dream" in line
            assert "stale info" in env.git(*line.split()[1:], check=False)


def test_pushed_notes_are_replaced_by_their_own_command(env: Env, tmp_path: Path) -> None:
    """Provenance notes pushed beside the branch (as the pull-request flow does) are rewritten
    too: after both printed commands ran, the remote holds the canary in no commit and no note."""
    dreamt_workspace(env, batches=2)
    remote = tmp_path / "remote.git"
    env.git("init", "-q", "--bare", str(remote))
    env.git("remote", "add", "origin", str(remote))
    env.git("push", "-q", "origin", "main", "refs/notes/dream:refs/notes/dream")
    env.git("fetch", "-q", "origin")
    assert env.git("--git-dir", str(remote), "log", "-p", "--all").count(CANARY) > 0
    result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 0, result.output
    push = [line.strip() for line in result.output.splitlines() if line.strip().startswith("git push")]
    assert len(push) == 2, push
    for line in push:
        env.git(*line.split()[1:])
    notes = env.git("--git-dir", str(remote), "log", "-p", "refs/notes/dream")
    assert CANARY not in notes and CANARY not in env.git("--git-dir", str(remote), "log", "-p", "--all")


def test_dream_never_writes_a_purged_value_back(env: Env) -> None:
    """An agent that appends to history.jsonl itself (nanobot does, without our guard) brings the
    value back in an entry; the next Dream run writes [REDACTED:forgotten] into memory instead."""
    dreamt_workspace(env, batches=1)
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    history = env.ws / "memory/history.jsonl"
    last = json.loads(history.read_text().splitlines()[-1])["cursor"]
    line = {"cursor": last + 1, "timestamp": "2026-04-03 10:00", "content": f"- [durable] User's new code is {CANARY}"}
    with history.open("a") as f:
        f.write(json.dumps(line) + "\n")
    result = env.dream("run", "--model", "offline")
    assert result.exit_code == 0, result.output
    assert CANARY not in (env.ws / "USER.md").read_text()
    assert CANARY not in env.git("log", "-p", "--all")


def test_the_python_api_runs_the_same_purge(env: Env) -> None:
    """Workspace.forget is the CLI's service: a dry run first changes nothing, then the purge
    leaves the canary nowhere."""
    from dream_memory import Workspace

    dreamt_workspace(env, batches=1)
    ws = Workspace(env.ws, env=env.env)
    planned = ws.forget(CANARY, dry_run=True)
    assert planned.dry_run and planned.commits_holding and holders(env)
    done = ws.forget(CANARY)
    assert done.purge_id and done.commits_rewritten == planned.commits_rewritten
    assert holders(env) == {}


def test_notes_and_commit_ids_named_in_messages_follow_the_rewrite(env: Env) -> None:
    """A git note on a rewritten commit stays attached to its new id (its text purged), and the
    id a revert's message names ("Reverts: <id>") is the rewritten commit's, which exists."""
    dreamt_workspace(env, batches=2)
    first = env.git("rev-parse", "HEAD").strip()
    assert env.dream("restore", first).exit_code == 0
    env.git("notes", "add", "-m", f"reviewed; mentions {CANARY}", "HEAD~1")
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    assert holders(env) == {}
    assert "reviewed; mentions [forgotten]" in env.git("notes", "show", "HEAD~1")
    body = env.git("log", "-1", "--format=%B", "HEAD")
    reverted = next(line.split()[1] for line in body.splitlines() if line.startswith("Reverts:"))
    assert reverted != first
    assert env.git("cat-file", "-t", reverted).strip() == "commit"
    short = env.git("log", "-1", "--format=%s", "HEAD").split()[2]
    assert reverted.startswith(short)
    assert env.git("fsck", "--strict").strip() == ""


def test_the_search_index_holding_the_value_is_removed(env: Env, tmp_path: Path) -> None:
    """A store large enough for `dream search` to keep an index in the cache folder: the index
    holds the canary before the purge and is gone after it; the next search answers without it."""
    indexes = indexed_store(env, tmp_path / "cache")
    code, report = env.dream_json("forget", "--purge", CANARY)
    assert code == 0 and report["search_index_removed"]
    assert not any(p.exists() for p in indexes)
    after = env.dream("search", "locker")
    assert after.exit_code == 0 and CANARY not in after.output and "[forgotten]" in after.output


def test_inside_a_users_repository_only_dream_memorys_files_are_rewritten(tmp_path: Path) -> None:
    """A workspace in a folder of a larger repository: its memory files are purged in every
    commit, the user's own file that holds the value is left as it is and named in a warning,
    and the work tree stays clean."""
    env = Env(tmp_path)
    repo = tmp_path / "project"
    env.ws = repo / "agent" / "ws"
    env.env["DREAM_WORKSPACE"] = str(env.ws)
    env.ws.mkdir(parents=True)
    (repo / "NOTES.txt").write_text(f"the user's own mention of {CANARY}\n")
    env.git("-C", str(repo), "init", "-q", "-b", "main")
    env.git("-C", str(repo), "add", "NOTES.txt")
    env.git("-C", str(repo), "commit", "-qm", "user's work")
    dreamt_workspace(env, batches=1)
    env.git("-C", str(repo), "add", "-A")
    env.git("-C", str(repo), "commit", "-qm", "track what dream committed beside")
    code, report = env.dream_json("forget", "--purge", CANARY)
    assert code == 0, report
    assert any("NOTES.txt" in w for w in report["warnings"])
    assert CANARY in (repo / "NOTES.txt").read_text()
    log = env.git("-C", str(repo), "log", "-p", "--all", "--", "agent/ws")
    assert CANARY not in log
    assert env.git("-C", str(repo), "status", "--porcelain").strip() == ""
    assert env.git("-C", str(repo), "fsck", "--strict").strip() == ""


def test_held_batches_dream_state_and_consolidation_progress_lose_the_value(env: Env) -> None:
    """A held batch under memory/.dream_held/, Dream's state and .consolidation.json holding the
    value (escaped, as JSON writes it) lose it on disk and in every commit, and stay valid JSON."""
    dreamt_workspace(env, batches=1)
    held = env.ws / "memory" / ".dream_held" / "h1"
    held.mkdir(parents=True)
    (held / "batch.json").write_text(
        json.dumps({"reason": "deletions", "files": {"USER.md": f"- {CANARY}\n"}}, indent=2)
    )
    state = env.ws / "memory" / ".dream_state.json"
    data = json.loads(state.read_text()) if state.exists() else {}
    data["note"] = f'quoted "{CANARY}"'
    state.write_text(json.dumps(data, ensure_ascii=True, indent=2))
    env.git("add", "-f", "memory/.dream_held", "memory/.dream_state.json")
    env.git("commit", "-qm", "held batch and state by hand")
    (env.ws / "memory" / ".consolidation.json").write_text(json.dumps({"s": {"summary": CANARY}}))
    code, report = env.dream_json("forget", "--purge", CANARY)
    assert code == 0, report
    assert {"memory/.dream_held/h1/batch.json", "memory/.dream_state.json", "memory/.consolidation.json"} <= set(
        report["files"]
    )
    for path in (held / "batch.json", state, env.ws / "memory" / ".consolidation.json"):
        assert "[forgotten]" in json.dumps(json.loads(path.read_text()))
    assert holders(env) == {}
    assert env.git("status", "--porcelain").strip() == ""


def test_a_linked_worktree_keeps_working_after_the_rewrite(env: Env, tmp_path: Path) -> None:
    """A linked worktree on an older commit: its HEAD follows the rewrite (no dangling HEAD after
    the prune), fsck finds nothing missing or broken, and the report says what is left to do
    there (its own index and files still hold their copy until it is checked out again)."""
    dreamt_workspace(env, batches=2)
    linked = tmp_path / "linked"
    env.git("worktree", "add", "-q", "--detach", str(linked), "HEAD~1")
    code, report = env.dream_json("forget", "--purge", CANARY)
    assert code == 0, report
    assert any("linked worktrees" in w for w in report["warnings"])
    fsck = env.git("fsck", "--strict")
    assert "error" not in fsck and "missing" not in fsck, fsck
    assert CANARY not in env.git("-C", str(linked), "log", "-p")
    assert env.git("-C", str(linked), "rev-parse", "HEAD").strip() == env.git("rev-parse", "HEAD~1").strip()


def test_entity_purge_matches_the_name_in_any_case_everywhere(env: Env) -> None:
    """--entity ledger-api also removes `Ledger-api` and `LEDGER-API` (a sentence's start, a
    heading) from memory files, history, Dream's commits and their provenance notes, and the dry
    run lists those files first: git's own CLI finds the name in no case afterwards."""
    assert env.dream("init").exit_code == 0
    (env.ws / "entities").mkdir(exist_ok=True)
    (env.ws / "entities" / "ledger-api.md").write_text("# ledger-api\n\nThe accounts service.\n")
    env.git("add", "-A")
    env.git("commit", "-qm", "add the ledger-api entity by hand")
    for text in (
        "- [durable] Ledger-api stores balances in PostgreSQL 16",
        "- [durable] User maintains LEDGER-API on weekends",
    ):
        assert env.dream("append", text, "--session-key", "cli:direct").exit_code == 0
    result = env.dream("run", "--model", "offline")
    assert result.exit_code == 0, result.output
    assert "ledger-api" in env.git("log", "-p", "--all").lower()

    code, dry = env.dream_json("forget", "--entity", "ledger-api", "--dry-run")
    assert code == 0, dry
    changed = set(dry["files"]) | set(dry["history"])
    assert "memory/history.jsonl" in changed
    assert any(not rel.startswith(("entities/", "memory/history")) for rel in changed), changed

    code, report = env.dream_json("forget", "--entity", "ledger-api")
    assert code == 0, report
    assert "ledger-api" not in env.git("log", "-p", "--all", "--notes=*").lower()
    assert "ledger-api" not in env.git("cat-file", "--batch-all-objects", "--batch").lower()
    for path in env.ws.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(env.ws).parts:
            assert b"ledger-api" not in path.read_bytes().lower(), path
    assert env.git("fsck", "--strict").strip() == ""


def test_a_value_in_a_last_history_line_without_a_newline_is_reported(env: Env) -> None:
    """An unterminated last line of history.jsonl may be a writer's line half written: a rewrite
    would cut its rest off from it, so it is left as it is, and the report says the value is in
    it (run the same forget again once it is complete). The complete lines are purged."""
    assert env.dream("init").exit_code == 0
    assert env.dream("append", "first entry mentions zebra42").exit_code == 0
    history = env.ws / "memory" / "history.jsonl"
    with history.open("a", encoding="utf-8") as handle:
        handle.write('{"cursor": 2, "timestamp": "2026-01-01 10:00", "content": "agent wrote zebra42 here')
    code, report = env.dream_json("forget", "--purge", "zebra42")
    assert code == 0, report
    assert report["history"] == {"memory/history.jsonl": [1]}
    assert any("has no newline" in w and "run the same dream forget again" in w for w in report["warnings"])
    with history.open("a", encoding="utf-8") as handle:
        handle.write('"}\n')  # the writer finishes its line
    code, report = env.dream_json("forget", "--purge", "zebra42")
    assert code == 0 and report["history"] == {"memory/history.jsonl": [2]} and not report["warnings"], report
    assert "zebra42" not in history.read_text(encoding="utf-8")


def test_line_numbers_and_cursors_count_newlines_only(env: Env) -> None:
    """An entry holding U+2028 (stored raw: JSON allows it) is one line, not two: the report's line
    numbers and cursors are the file's."""
    assert env.dream("init").exit_code == 0
    assert env.dream("append", "vault is C:\\vault\\ok7").exit_code == 0
    assert env.dream("append", "copied\u2028vault is C:\\vault\\ok7 again").exit_code == 0
    code, report = env.dream_json("forget", "--purge", "C:\\vault\\ok7")
    assert code == 0, report
    assert report["history"] == {"memory/history.jsonl": [1, 2]} and report["cursors"] == [1, 2]


@pytest.mark.parametrize(
    ("option", "value", "part_of"),
    [
        ("--entity", "Cursor", "'.cursor'"),  # every history line's "cursor" key
        ("--purge", "time", "'timestamp'"),
        ("--entity", "soul", "'SOUL.md'"),  # a rename of the agent's soul file
        ("--entity", "Dream", "'.dream_cursor'"),  # Dream's own files, commits and author
    ],
)
def test_a_value_inside_dream_memorys_own_names_is_refused_with_exit_2(
    env: Env, option: str, value: str, part_of: str
) -> None:
    """Forgetting the editor `Cursor` used to turn every history line's "cursor" key into
    "[forgotten]" (Dream then skipped them all as foreign), `soul` renamed SOUL.md in every
    commit, `dream` made Dream's commits read as hand edits. Now it is refused before anything
    changes, naming the name it is part of."""
    dreamt_workspace(env, batches=1)
    before = tree_bytes(env.ws)
    result = env.dream("forget", option, value)
    assert result.exit_code == 2, result.output
    assert f"is part of dream-memory's own name {part_of}" in result.output
    assert tree_bytes(env.ws) == before


def test_a_history_lines_cursor_time_and_session_key_keep_their_values(env: Env) -> None:
    """A value that is also in a session key, a timestamp or a cursor (`Telegram`, a PIN such as
    `2026`) is replaced in the text only. Rewriting the session key moved Alice's private entry
    out of her scope, where Bob's search found it; a rewritten timestamp or cursor made the line
    unreadable. The report says what was left, and why."""
    assert env.dream("init").exit_code == 0
    (env.ws / "dream.json").write_text(
        json.dumps({"agents": {"defaults": {"scopes": {"telegram:*": "user:{id}"}}}}), encoding="utf-8"
    )
    assert env.dream("append", "--session-key", "telegram:alice", "Alice: my locker code is heron-4471").exit_code == 0
    assert env.dream("append", "--session-key", "telegram:bob", "Bob: I use Telegram; PIN 2026").exit_code == 0
    assert env.dream("run", "--model", "offline").exit_code == 0
    lines_before = (env.ws / "memory" / "history.jsonl").read_text(encoding="utf-8").splitlines()

    for value in ("Telegram", "2026"):
        option = "--entity" if value == "Telegram" else "--purge"
        result = env.dream("forget", option, value)
        assert result.exit_code == 0, result.output
        assert "still hold it in a cursor, a timestamp, a session key" in result.output

    entries = [json.loads(line) for line in (env.ws / "memory" / "history.jsonl").read_text().splitlines()]
    old = [json.loads(line) for line in lines_before]
    assert [(e["cursor"], e["timestamp"], e["session_key"]) for e in entries] == [
        (e["cursor"], e["timestamp"], e["session_key"]) for e in old
    ]
    assert entries[1]["content"] == "Bob: I use [forgotten]; PIN [forgotten]"
    code, status = env.dream_json("status")
    assert (code, status["malformed"]) == (0, 0)
    bob = env.dream("search", "--history", "--session-key", "telegram:bob", "locker")
    assert "heron" not in bob.output


def test_a_forgotten_entity_is_kept_out_in_any_case(env: Env) -> None:
    """The purge matched `zephyrcorp` in any case, the guard only as spelt: `ZephyrCorp` in a new
    entry came back into USER.md and into the commits. Now the guard folds case for an entity."""
    assert env.dream("init").exit_code == 0
    (env.ws / "entities").mkdir()
    (env.ws / "entities" / "zephyrcorp.md").write_text("# zephyrcorp\n")
    assert env.dream("append", "- [durable] User consults for zephyrcorp").exit_code == 0
    assert env.dream("run", "--model", "offline").exit_code == 0
    assert env.dream("forget", "--entity", "zephyrcorp").exit_code == 0
    for spelling in ("ZephyrCorp", "ZEPHYRCORP"):
        assert env.dream("append", f"- [durable] User signed a contract with {spelling}").exit_code == 0
    result = env.dream("run", "--model", "offline")
    assert result.exit_code == 0, result.output
    assert "zephyrcorp" not in (env.ws / "USER.md").read_text().casefold()
    assert "zephyrcorp" not in env.git("log", "-p", "--all").casefold()


def test_an_append_made_while_the_purge_runs_is_guarded_already(env: Env) -> None:
    """`dream append` takes no Dream lock, so an agent can append while a purge rewrites the
    files and the commits. The guard's record used to be saved last: such an entry kept the value
    in history.jsonl although forget reported success. It is saved before the purge starts now."""
    dreamt_workspace(env, batches=1)
    appended: list[subprocess.CompletedProcess[str]] = []

    def append_meanwhile(site: str, path: str) -> None:
        if site == "forget.write" and not appended:
            code = "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()"
            appended.append(
                subprocess.run(
                    [sys.executable, "-c", code, "append", f"- [durable] The new locker code is {CANARY}"],
                    env={**os.environ, **env.env},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            )

    with fault_hook(append_meanwhile):
        result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 0, result.output
    assert appended and appended[0].returncode == 0, appended
    assert CANARY not in (env.ws / "memory/history.jsonl").read_text()
    assert "[REDACTED:forgotten]" in (env.ws / "memory/history.jsonl").read_text()


def test_the_legacy_history_and_its_migration_backup_lose_the_value(env: Env) -> None:
    """memory/HISTORY.md (nanobot's old format, migrated by the next run) and the HISTORY.md.bak a
    migration leaves were never purged: "nothing held it", and the next run's migration put the
    value into history.jsonl under the guard's nose."""
    assert env.dream("init").exit_code == 0
    legacy = env.ws / "memory" / "HISTORY.md"
    legacy.write_text(f"[2026-01-05 10:00] alarm PIN is {CANARY}\n", encoding="utf-8")
    result = env.dream("forget", "--purge", CANARY)
    assert result.exit_code == 0 and "memory/HISTORY.md: line 1" in result.output, result.output
    assert env.dream("run", "--model", "offline").exit_code == 0
    assert holders(env) == {}

    legacy.write_text(f"[2026-01-06 10:00] the gate code is {CANARY}-2\n", encoding="utf-8")
    assert env.dream("run", "--model", "offline").exit_code == 0  # migrated: HISTORY.md.bak keeps it
    assert any(p.name.startswith("HISTORY.md.bak") for p in (env.ws / "memory").iterdir())
    assert env.dream("forget", "--purge", f"{CANARY}-2").exit_code == 0
    assert not any(f"{CANARY}-2" in p.read_text() for p in (env.ws / "memory").iterdir() if p.is_file())


def test_a_value_a_writer_escaped_otherwise_than_python_is_found_in_history(env: Env) -> None:
    """Upper-case `\\u00EB` and `\\/` (what other JSON writers produce) hid the value from the
    purge: history.jsonl kept it, and the report never named it."""
    assert env.dream("init").exit_code == 0
    line = (
        '{"cursor":1,"timestamp":"2026-04-03 10:00","content":"- [durable] therapist Zo\\u00EBl M\\u00FCller, '
        'https:\\/\\/x.io\\/s3cr3t-tok"}\n'
    )
    (env.ws / "memory" / "history.jsonl").write_text(line, encoding="utf-8")
    for value in ("Zoël Müller", "https://x.io/s3cr3t-tok"):
        result = env.dream("forget", "--purge", value)
        assert result.exit_code == 0 and "history entries rewritten" in result.output, result.output
    content = json.loads((env.ws / "memory" / "history.jsonl").read_text(encoding="utf-8"))["content"]
    assert content == "- [durable] therapist [forgotten], [forgotten]"


def test_the_message_files_git_leaves_behind_lose_the_value(env: Env) -> None:
    """A person's own `git commit` whose message named the value: git keeps that message in
    .git/COMMIT_EDITMSG, which no commit or ref reaches, and the purge left it there."""
    dreamt_workspace(env, batches=1)
    with (env.ws / "USER.md").open("a", encoding="utf-8") as f:
        f.write("- A line written by hand\n")
    env.git("-c", "user.name=Hand", "-c", "user.email=hand@example.invalid", "commit", "-qam", f"noted {CANARY}")
    assert CANARY in (env.ws / ".git/COMMIT_EDITMSG").read_text(encoding="utf-8")
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    assert (env.ws / ".git/COMMIT_EDITMSG").read_text(encoding="utf-8") == "noted [forgotten]\n"
    assert holders(env) == {}
