"""A purge killed (SIGKILL) at any of its steps leaves a workspace that a rerun of the same purge
completes: the canary ends up nowhere, fsck is clean, history keeps every entry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from forget_helpers import CANARY, Env, dreamt_workspace, holders

# (write site, which write there): the journal, memory files, history, new objects, a ref,
# the reflogs, the index, the prune, the audit record and the journal's removal
KILL_POINTS = [
    ("forget.journal", 1),
    ("forget.write", 1),
    ("history.rewrite", 1),
    ("history.replaced", 2),  # history rewritten, the replaced file (value inside) still named
    ("forget.archive", 1),
    ("forget.objects", 1),
    ("forget.ref", 2),
    ("forget.reflog", 1),
    ("git.index", 1),
    ("forget.prune", 1),
    ("forget.prune", 3),
    ("forget.record", 2),
    ("forget.journal", 2),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    env = Env(root)
    dreamt_workspace(env, batches=3, compact=True)
    env.git("branch", "side", "HEAD~1")
    env.git("repack", "-adq")  # packed objects too
    return env.ws


@pytest.mark.parametrize(("site", "nth"), KILL_POINTS, ids=[f"{s}-{n}" for s, n in KILL_POINTS])
def test_a_killed_purge_is_finished_by_running_it_again(template: Path, tmp_path: Path, site: str, nth: int) -> None:
    """SIGKILL just before the given write; the rerun of the same purge exits 0 and the canary is
    gone from files, commits, reflogs and objects; history keeps its cursors."""
    env = Env(tmp_path)
    shutil.copytree(template, env.ws, symlinks=True)
    entries = len((env.ws / "memory/history.jsonl").read_text().splitlines())
    killed = env.process("forget", "--purge", CANARY, kill=(site, nth))
    assert killed.returncode == -9, f"the kill point was never reached: {killed.stdout}{killed.stderr}"
    done = env.process("forget", "--purge", CANARY, "--json")
    assert done.returncode == 0, done.stderr
    assert holders(env) == {}
    assert env.git("fsck", "--strict").strip() == ""
    assert not (env.ws / "memory/.forget_journal.json").exists()
    assert len((env.ws / "memory/history.jsonl").read_text().splitlines()) == entries
    record = json.loads((env.ws / "memory/.forgotten.json").read_text())
    assert len(record["purges"]) == 1
    assert env.git("status", "--porcelain").strip() == ""


def test_another_purge_waits_for_the_interrupted_one(template: Path, tmp_path: Path) -> None:
    """While an interrupted purge is unfinished, a purge of another value is refused (exit 2)
    with the instruction to finish the first; the first then completes."""
    env = Env(tmp_path)
    shutil.copytree(template, env.ws, symlinks=True)
    killed = env.process("forget", "--purge", CANARY, kill=("forget.ref", 1))
    assert killed.returncode == -9
    other = env.dream("forget", "--purge", "green tea variety")
    assert other.exit_code == 2 and "interrupted purge" in other.output
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    assert holders(env) == {}


def test_an_interrupted_forget_is_shown_and_dream_waits_for_it(template: Path, tmp_path: Path) -> None:
    """A purge killed half way: `dream status` and `dream doctor` say so, `dream run` refuses (exit
    2) instead of committing the half-purged files as hand edits, and the same forget finishes it."""
    env = Env(tmp_path)
    shutil.copytree(template, env.ws, symlinks=True)
    killed = env.process("forget", "--purge", CANARY, kill=("history.rewrite", 1))
    assert killed.returncode != 0
    assert (env.ws / "memory" / ".forget_journal.json").exists()
    status = env.dream("status")
    assert "forget" in status.stdout and "interrupted" in status.stdout, status.stdout
    _, state = env.dream_json("status")
    assert state["interrupted_forget"]["id"]
    doctor = env.dream("doctor")
    assert "interrupted" in doctor.output
    head = env.git("rev-parse", "HEAD")
    ran = env.dream("run", "--model", "offline")
    assert ran.exit_code == 2 and "interrupted" in ran.output
    assert env.git("rev-parse", "HEAD") == head  # nothing committed
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    assert env.dream_json("status")[1]["interrupted_forget"] is None
    assert env.dream("run", "--model", "offline").exit_code == 0


# Every command that commits: each would save the half-purged files as hand edits
COMMITTING = [
    ("restore", "HEAD"),
    ("restore", "--apply-held", "1-1"),
    ("restore", "--discard-held", "1-1"),
    ("review", "accept", "--all"),
    ("review", "reject", "--all"),
    ("init",),
]


@pytest.mark.parametrize("args", COMMITTING, ids=[" ".join(a) for a in COMMITTING])
def test_every_command_that_commits_waits_for_an_interrupted_purge(
    template: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A purge killed half way: the command refuses (exit 2), names the unfinished purge, says to
    run it again and commits nothing; once it is finished, no `memory: manual edits` commit holds
    the half-purged files."""
    env = Env(tmp_path)
    shutil.copytree(template, env.ws, symlinks=True)
    killed = env.process("forget", "--purge", CANARY, kill=("forget.objects", 1))
    assert killed.returncode == -9
    head = env.git("rev-parse", "HEAD")
    refused = env.dream(*args)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "interrupted purge" in said, said
    assert "run that same dream forget again" in said
    assert env.git("rev-parse", "HEAD") == head
    assert env.dream("forget", "--purge", CANARY).exit_code == 0
    assert "memory: manual edits" not in env.git("log", "--format=%s")
    assert holders(env) == {}


def test_init_refused_for_an_interrupted_purge_writes_nothing_either(template: Path, tmp_path: Path) -> None:
    """`dream init` says it commits nothing until the purge is finished: it creates no missing
    template file either."""
    env = Env(tmp_path)
    shutil.copytree(template, env.ws, symlinks=True)
    assert env.process("forget", "--purge", CANARY, kill=("forget.objects", 1)).returncode == -9
    (env.ws / "SOUL.md").unlink()
    refused = env.dream("init")
    assert refused.exit_code == 2 and "interrupted purge" in " ".join(refused.output.split())
    assert not (env.ws / "SOUL.md").exists()
