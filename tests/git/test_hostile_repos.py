"""Hostile repositories (issue 14): crafted trees, symlinked folders, tampered held records and
journals, damaged objects, shallow clones, a merge in progress, a detached HEAD, odd branch names,
escape sequences in commits.

What a user would notice if these failed: a restore, a `dream run --branch` or an applied held
batch writing or deleting a file outside the workspace or a hook inside .git (code run on the
next checkout); a traceback instead of a one-line cause; Dream committing conflict markers or
commits no branch holds; `dream log` failing in a CI checkout; a terminal whose clipboard a
model's text rewrote. Each test drives the CLI as a user would and looks at the disk.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.core.state import DreamState, HeldBatch
from dream_memory.testing.hostile import Outcome, cli, loose_object, raw_commit

PAYLOAD = b"#!/bin/sh\necho pwned > /tmp/pwned-by-a-hook\n"


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "DREAM_WORKSPACE": "", "DREAM_CONFIG": ""}


def _init(tmp_path: Path) -> tuple[Path, Callable[..., Outcome]]:
    ws = tmp_path / "ws"
    env = _env(tmp_path)

    def run(*args: str) -> Outcome:
        return cli(*args, "--workspace", str(ws), env=env)

    assert run("init").code == 0
    return ws, run


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    who = ["-c", "user.name=Someone", "-c", "user.email=someone@example.com"]
    proc = subprocess.run(["git", *who, *args], cwd=cwd, capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc.stdout + ("" if check else proc.stderr)


def _outside_listing(tmp_path: Path) -> dict[str, bytes]:
    """Every file under tmp_path except the workspace and the fake home: what no command may touch."""
    out: dict[str, bytes] = {}
    for path in sorted(tmp_path.rglob("*")):
        rel = path.relative_to(tmp_path)
        if rel.parts[0] in ("ws", "home") or path.is_symlink() or not path.is_file():
            continue
        out[rel.as_posix()] = path.read_bytes()
    return out


# --- crafted trees --------------------------------------------------------------------------------

# name path inside the commit -> where a write through it lands (relative to tmp_path)
CRAFTED = {
    "dotdot": ((b"skills", b"..", b"..", b"outside.md"), "outside.md"),
    "slash in a name": ((b"skills", b"../../outside.md"), "outside.md"),
    "absolute name": ((b"skills", b"/ABS/outside.md"), "outside.md"),
    "dot-git hook": ((b".git", b"hooks", b"post-checkout"), "ws/.git/hooks/post-checkout"),
    "dot-git folded": ((b"skills", b".GIT", b"hooks", b"post-checkout"), "ws/skills/.GIT/hooks/post-checkout"),
    "ntfs short name": ((b"skills", b"GIT~1", b"config"), "ws/skills/GIT~1/config"),
    "dot-git dotted": ((b"skills", b".git.", b"config"), "ws/skills/.git./config"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_tree_is_never_written_deleted_or_checked_out(tmp_path: Path, case: str) -> None:
    """A commit whose tree holds ``..``, a name with a slash, an absolute-looking name or a
    ``.git`` folder (in any spelling a case-folding filesystem takes for it) is refused whole by
    `dream restore` (either direction, with --force too), `dream run --branch` and `dream log`:
    exit 2 with a one-line cause naming the commit and the path; the file it names is never
    written, an existing one is never deleted, and HEAD does not move."""
    ws, run = _init(tmp_path)
    names, landing = CRAFTED[case]
    names = tuple(n.replace(b"/ABS/", os.fsencode(tmp_path) + b"/") for n in names)
    victim = tmp_path / landing
    added = raw_commit(ws, {names: PAYLOAD}, message="dream: add a skill")
    removed = raw_commit(ws, {names: None}, parent=added, message="dream: drop it", move="refs/heads/main")
    raw_commit(ws, {}, parent=added, message="dream: branch", move="refs/heads/evil")
    head = _git(ws, "rev-parse", "HEAD")

    outcome = run("restore", removed)  # would write the crafted file back
    assert outcome.refused(2), outcome
    assert "holds the path" in outcome.err and (added[:10] in outcome.err or removed[:10] in outcome.err)
    assert not victim.exists()

    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_bytes(PAYLOAD)
    outcome = run("restore", added, "--force")  # would delete the file it names
    assert outcome.refused(2), outcome
    assert victim.read_bytes() == PAYLOAD
    victim.unlink()

    outcome = run("run", "--branch", "evil", "--model", "offline")  # would check the crafted tree out
    assert outcome.code == 2 and "holds the path" in outcome.out, outcome
    assert not victim.exists()
    assert _git(ws, "rev-parse", "HEAD") == head and _git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/main"

    assert run("log", added).refused(2)
    assert not victim.exists() and not (ws / ".git" / "hooks" / "post-checkout").exists()


def test_a_tree_entry_holding_a_nul_is_a_damaged_repository(tmp_path: Path) -> None:
    """git's tree format ends a name at NUL, so an entry `x<NUL>../../../outside.md` makes the tree
    unreadable: restore, log, status and run say the repository is damaged (exit 1, one line),
    and nothing is written anywhere."""
    ws, run = _init(tmp_path)
    sha = raw_commit(ws, {(b"skills", b"x\x00../../../outside.md"): PAYLOAD}, move="refs/heads/main")
    for args in (("restore", sha, "--force"), ("log", sha), ("status",)):
        outcome = run(*args)
        assert outcome.refused(1) and "is damaged" in outcome.err, (args, outcome)
    outcome = run("run", "--model", "offline")
    assert outcome.code == 1 and "is damaged" in json.loads(outcome.out)["errors"][0]
    assert not (tmp_path / "outside.md").exists() and not (ws / "skills" / "x").exists()


def _link_skills_out(tmp_path: Path, ws: Path) -> Path:
    """Replace the workspace's skills/ by a symlink to a folder elsewhere; returns that folder."""
    import shutil

    outside = tmp_path / "shared-skills"
    outside.mkdir()
    shutil.rmtree(ws / "skills")
    (ws / "skills").symlink_to(outside, target_is_directory=True)
    return outside


SKILL = b"---\nname: x\n---\ntips\n"


def test_nothing_is_deleted_through_a_symlinked_folder(tmp_path: Path) -> None:
    """With skills/ replaced by a symlink to a folder elsewhere, restoring a commit that added a
    skill never deletes the file out there: beyond a symlink is not the workspace, so the skill
    counts as gone (a conflict), with --force too."""
    ws, run = _init(tmp_path)
    added = raw_commit(ws, {(b"skills", b"x", b"SKILL.md"): SKILL}, message="dream: add", move="refs/heads/main")
    _git(ws, "reset", "-q", "--hard")
    outside = _link_skills_out(tmp_path, ws)
    (outside / "x").mkdir()
    (outside / "x" / "SKILL.md").write_bytes(SKILL)
    outcome = run("restore", added)
    assert outcome.refused(1) and "changed since" in outcome.err, outcome
    run("restore", added, "--force")
    assert (outside / "x" / "SKILL.md").read_bytes() == SKILL


def test_nothing_is_written_through_a_symlinked_folder(tmp_path: Path) -> None:
    """With skills/ a symlink to a folder elsewhere, restoring a commit that removed a skill
    (which writes it back) exits 1 naming the symlink, before anything is committed; nothing is
    written out there."""
    ws, run = _init(tmp_path)
    added = raw_commit(ws, {(b"skills", b"x", b"SKILL.md"): SKILL}, message="dream: add")
    removed = raw_commit(ws, {(b"skills", b"x", b"SKILL.md"): None}, parent=added, message="dream: drop")
    _git(ws, "update-ref", "refs/heads/main", removed)
    outside = _link_skills_out(tmp_path, ws)
    head = _git(ws, "rev-parse", "HEAD")
    outcome = run("restore", removed)
    assert outcome.refused(1) and "skills is a symlink" in outcome.err, outcome
    assert list(outside.iterdir()) == []
    assert _git(ws, "rev-parse", "HEAD") == head


# --- held records ------------------------------------------------------------------------------------


def _held(ws: Path, records: dict[str, bytes]) -> None:
    """Held batches as a tampered workspace would hold them, committed like Dream's own."""
    state = DreamState()
    files: dict[tuple[bytes, ...], bytes | None] = {}
    for held_id, data in records.items():
        state = state.add_held(HeldBatch(held_id, 1, 2, "deletes lines", "2026-04-03T00:00:00", ()))
        files[(b"memory", b".dream_held", held_id.encode(), b"held.json")] = data
    files[(b"memory", b".dream_state.json")] = state.to_json().encode()
    raw_commit(ws, files, message="dream: held 1..2", move="refs/heads/main")
    _git(ws, "reset", "-q", "--hard")


def _record(path: str) -> bytes:
    return json.dumps({"id": "x", "files": [{"path": path, "before": None, "after": PAYLOAD.decode()}]}).encode()


@pytest.mark.parametrize(
    ("path", "landing"),
    [
        ("/ABS/held-abs.md", "held-abs.md"),
        ("../held-up.md", "held-up.md"),
        ("skills/../../held-up.md", "held-up.md"),
        (".git/hooks/post-checkout", "ws/.git/hooks/post-checkout"),
        ("memory/history.jsonl", None),
        ("skills/x/../../../held-up.md", "held-up.md"),
    ],
)
def test_a_tampered_held_record_writes_nothing(tmp_path: Path, path: str, landing: str | None) -> None:
    """`dream restore --apply-held` on a record naming an absolute path, a `../` path, a git
    hook or a file Dream may never write refuses with exit 2 and one line naming the record and
    the path; nothing is written and nothing is committed. The record can still be discarded."""
    ws, run = _init(tmp_path)
    _held(ws, {"1-2": _record(path.replace("/ABS/", str(tmp_path) + "/"))})
    head = _git(ws, "rev-parse", "HEAD")
    history = (ws / "memory" / "history.jsonl").read_bytes() if (ws / "memory" / "history.jsonl").exists() else None
    outcome = run("restore", "--apply-held", "1-2", "--force")
    assert outcome.refused(2) and "held.json names the path" in outcome.err, outcome
    if landing is not None:
        assert not (tmp_path / landing).exists()
    if history is not None:
        assert (ws / "memory" / "history.jsonl").read_bytes() == history
    assert _git(ws, "rev-parse", "HEAD") == head
    assert run("restore", "--discard-held", "1-2").code == 0
    assert not (ws / "memory" / ".dream_held" / "1-2").exists()


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"files": [{"path": 3}]}'])
def test_a_held_record_that_cannot_be_read_is_a_clear_error(tmp_path: Path, data: bytes) -> None:
    """A held.json that is not JSON, not UTF-8, or not the expected shape: exit 2 with a one-line
    cause that names the file and says how to discard it (no traceback); discarding works."""
    ws, run = _init(tmp_path)
    _held(ws, {"1-2": data})
    outcome = run("restore", "--apply-held", "1-2")
    assert outcome.refused(2) and "memory/.dream_held/1-2/held.json" in outcome.err, outcome
    assert "--discard-held 1-2" in outcome.err
    assert run("restore", "--discard-held", "1-2").code == 0


@pytest.mark.parametrize("held_id", ["../../skills", "1-2/../../x", ".", "a/b", "..", "-x"])
def test_a_held_id_is_one_plain_name(tmp_path: Path, held_id: str) -> None:
    """--apply-held / --discard-held with an id that is not one plain name (even one the tampered
    state lists) is exit 2 and deletes nothing: the folder removal never climbs out of
    memory/.dream_held/."""
    ws, run = _init(tmp_path)
    state = DreamState().add_held(HeldBatch(held_id, 1, 2, "r", "t", ()))
    raw_commit(ws, {(b"memory", b".dream_state.json"): state.to_json().encode()}, move="refs/heads/main")
    _git(ws, "reset", "-q", "--hard")
    before = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if ".git" not in p.parts)
    for flag in ("--apply-held", "--discard-held"):
        outcome = run("restore", f"{flag}={held_id}")
        assert outcome.refused(2) and "not a held batch id" in outcome.err, outcome
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if ".git" not in p.parts) == before


def test_a_tampered_journal_names_nothing_to_write(tmp_path: Path) -> None:
    """memory/.dream_journal.json is a plain file: one naming paths its commit never changed
    (here `../victim.md`) makes the next writer finish nothing outside that commit; the file
    out there stays."""
    ws, run = _init(tmp_path)
    victim = tmp_path / "victim.md"
    victim.write_text("keep me\n")
    head = _git(ws, "rev-parse", "HEAD").strip()
    journal = {"commit": head, "base": None, "paths": ["../victim.md", "skills/../../victim.md"], "on_disk": False}
    (ws / "memory" / ".dream_journal.json").write_text(json.dumps(journal))
    run("run", "--model", "offline")
    assert victim.read_text() == "keep me\n"
    assert not (ws / "memory" / ".dream_journal.json").exists()


# --- damaged, shallow, busy and detached repositories --------------------------------------------------


def _damage_object(ws: Path, sha: str) -> None:
    import zlib

    path = loose_object(ws, sha)
    raw = zlib.decompress(path.read_bytes())
    path.chmod(0o644)
    path.write_bytes(zlib.compress(raw[:40]))


def _damage_head_commit(ws: Path) -> None:
    _damage_object(ws, _git(ws, "rev-parse", "HEAD").strip())


def _damage_packs(ws: Path) -> None:
    """Flip bytes through every pack's compressed objects (a disk error, a bad copy), leaving
    the header and the index whole: each object read fails inside zlib."""
    for pack in (ws / ".git" / "objects" / "pack").glob("*.pack"):
        data = bytearray(pack.read_bytes())
        for i in range(40, len(data) - 30, 7):
            data[i] ^= 0x5A
        pack.chmod(0o644)
        pack.write_bytes(bytes(data))


@pytest.mark.parametrize("command", [("status",), ("run", "--model", "offline"), ("log",), ("restore",)])
@pytest.mark.parametrize("damage", [_damage_head_commit, _damage_packs], ids=["commit object", "packs"])
def test_a_damaged_object_is_a_one_line_error(
    tmp_path: Path, command: tuple[str, ...], damage: Callable[[Path], None]
) -> None:
    """A truncated commit object (dulwich's ObjectFormatException), or packs whose objects fail
    inside zlib: every command that reads them exits 1 with one line saying the repository is
    damaged and how to check it (git fsck), never a traceback. (With damaged packs, status, log
    and restore crashed before: closing the repository failed with a BufferError over the error,
    whose frames still viewed the pack's memory map.)"""
    ws, run = _init(tmp_path)
    assert run("append", "a fact").code == 0
    assert run("run", "--model", "offline").code == 0
    damage(ws)
    outcome = run(*command)
    if command[0] == "run":
        assert outcome.code == 1 and outcome.crash is None, outcome
        assert "is damaged" in json.loads(outcome.out)["errors"][0]
    else:
        assert outcome.refused(1), outcome
        assert "is damaged" in outcome.err and "git fsck" in outcome.err


def test_a_damaged_pack_prints_nothing_more_at_exit(tmp_path: Path, dream_process) -> None:
    """The process's stderr is the error and its hint: no finalizer's traceback at exit (the
    packs are closed, not left to the interpreter's shutdown)."""
    ws, run = _init(tmp_path)
    assert run("append", "a fact").code == 0
    assert run("run", "--model", "offline").code == 0
    _damage_packs(ws)
    done = dream_process("status", "--workspace", str(ws), env=_env(tmp_path))
    assert done.returncode == 1
    error, hint = done.stderr.splitlines()  # and no "Exception ignored in ..." after them
    assert error.startswith("dream: error: ") and "is damaged" in error, done.stderr
    assert hint.strip().startswith("hint: `git fsck`"), done.stderr


def test_a_shallow_clone_shows_what_it_holds(tmp_path: Path) -> None:
    """In a clone of depth 1 (actions/checkout's default), `dream log` shows the latest Dream
    change and the restore list the versions that are there, each saying the clone is shallow;
    restoring the oldest commit there (whose parent is absent) is exit 2 saying why."""
    origin, run = _init(tmp_path)
    for fact in ("likes tea", "likes vim", "lives in Lyon"):
        assert run("append", f"the user {fact}").code == 0
        assert run("run", "--model", "offline").code == 0
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--depth", "1", origin.as_uri(), str(clone))
    env = _env(tmp_path)
    latest = cli("log", "--workspace", str(clone), env=env)
    assert latest.code == 0 and "commit  " in latest.out and "shallow" in latest.err, latest
    listing = cli("restore", "--workspace", str(clone), env=env)
    assert listing.code == 0 and "dream:" in listing.out and "shallow" in listing.err, listing
    assert cli("log", "--json", "--workspace", str(clone), env=env).code == 0
    head = _git(clone, "rev-parse", "HEAD").strip()
    outcome = cli("restore", head, "--workspace", str(clone), env=env)
    assert outcome.refused(2) and "shallow" in outcome.err, outcome


def test_dream_refuses_to_commit_during_a_conflicted_merge(tmp_path: Path) -> None:
    """In the middle of a merge with a conflict in memory/MEMORY.md, `dream run` and `dream
    restore` exit 2 naming the merge, the unmerged file and the fix; the index (with its unmerged
    entries), HEAD and the conflict markers on disk are left exactly as they were."""
    ws, run = _init(tmp_path)
    _git(ws, "checkout", "-q", "-b", "other")
    (ws / "memory" / "MEMORY.md").write_text("# Memory\n- other line\n")
    _git(ws, "commit", "-qam", "other")
    _git(ws, "checkout", "-q", "main")
    (ws / "memory" / "MEMORY.md").write_text("# Memory\n- main line\n")
    _git(ws, "commit", "-qam", "main")
    _git(ws, "merge", "other", check=False)
    index = (ws / ".git" / "index").read_bytes()
    head = _git(ws, "rev-parse", "HEAD")
    markers = (ws / "memory" / "MEMORY.md").read_bytes()
    assert b"<<<<<<<" in markers
    assert run("append", "the user likes tea").code == 0

    outcome = run("run", "--model", "offline")
    assert outcome.code == 2, outcome
    error = json.loads(outcome.out)["errors"][0]
    assert "middle of a merge" in error and "memory/MEMORY.md" in error and "--abort" in outcome.out
    restored = run("restore", "HEAD")
    assert restored.refused(2) and "middle of a merge" in restored.err, restored
    assert (ws / ".git" / "index").read_bytes() == index
    assert _git(ws, "rev-parse", "HEAD") == head
    assert (ws / "memory" / "MEMORY.md").read_bytes() == markers
    assert "UU memory/MEMORY.md" in _git(ws, "status", "--porcelain")


def test_dream_refuses_a_detached_head_of_its_own_repository(tmp_path: Path) -> None:
    """After `git checkout <older sha>` in the repository dream-memory made, `dream run` exits 2
    saying HEAD is detached and how to fix it (no commit that no branch would hold), before any
    model call; with
    --branch it checks a branch out and commits there."""
    ws, run = _init(tmp_path)
    assert run("append", "the user likes tea").code == 0
    assert run("run", "--model", "offline").code == 0
    _git(ws, "checkout", "-q", "HEAD~1")
    head = _git(ws, "rev-parse", "HEAD")
    assert run("append", "the user likes coffee").code == 0
    outcome = run("run", "--model", "offline")
    assert outcome.code == 2 and "detached" in json.loads(outcome.out)["errors"][0], outcome
    # Found before the model is asked: a scheduled job with a paid model pays nothing for it.
    assert json.loads(outcome.out)["usage"]["llm_calls"] == 0, outcome
    assert _git(ws, "rev-parse", "HEAD") == head
    outcome = run("run", "--model", "offline", "--branch", "dream/recovered")
    assert outcome.code == 0, outcome
    assert _git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/dream/recovered"
    assert "coffee" in _git(ws, "show", "HEAD:USER.md")


def test_a_detached_checkout_of_a_users_repository_still_commits(tmp_path: Path) -> None:
    """CI checks out a commit, not a branch: in a repository that is not dream-memory's own, a
    detached HEAD is used as it is (the job pushes HEAD to a branch itself)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("a project\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "start")
    _git(repo, "checkout", "-q", "--detach")
    ws = repo / "agent"
    env = _env(tmp_path)
    assert cli("init", "--workspace", str(ws), env=env).code == 0
    assert cli("append", "the user likes tea", "--workspace", str(ws), env=env).code == 0
    assert cli("run", "--model", "offline", "--workspace", str(ws), env=env).code == 0
    assert "dream:" in _git(repo, "log", "-1", "--format=%s")


BAD_BRANCHES = [
    "HEAD",
    "-x",
    "a..b",
    "a b",
    "a.lock",
    ".a",
    "a/.b",
    "a~1",
    "a^",
    "a:b",
    "x/",
    "a//b",
    "a.",
    "@",
    "@{-1}",
]


@pytest.mark.parametrize("name", BAD_BRANCHES)
def test_branch_names_git_refuses_are_refused(tmp_path: Path, name: str) -> None:
    """`dream run --branch NAME` with a name `git check-ref-format --branch` refuses (HEAD
    among them) exits 2 naming the problem; no branch is created and HEAD does not move."""
    ws, run = _init(tmp_path)
    refs = _git(ws, "for-each-ref")
    outcome = run("run", "--model", "offline", "--branch", name)
    assert outcome.code == 2 and "is not a branch name git accepts" in outcome.out, outcome
    assert _git(ws, "for-each-ref") == refs
    assert _git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


# --- what a terminal is shown ---------------------------------------------------------------------------

ESCAPES = "- likes \x1b]52;c;cm0gLXJmIH4=\x07 tea\x1b[2J\x1b[H and \u202edlrow\u202c and \x9b31m red\n"


def test_dream_log_shows_escape_sequences_instead_of_sending_them(tmp_path: Path) -> None:
    """Text a model wrote with an OSC 52 clipboard write, a screen clear, a C1 CSI and a bidi
    override is shown by `dream log` and the restore list as visible escapes (\\x1b...), never as
    raw control characters; `dream log --json` keeps the exact text (JSON-escaped)."""
    ws, run = _init(tmp_path)
    sha = raw_commit(
        ws,
        {(b"memory", b"MEMORY.md"): ("# Memory\n" + ESCAPES).encode()},
        message="dream: 1..1: \x1b[2Jmemory",
        move="refs/heads/main",
    )
    _git(ws, "reset", "-q", "--hard")
    for outcome in (run("log"), run("log", sha), run("restore"), run("log", "HEAD~1..HEAD"), run("status")):
        assert outcome.code == 0, outcome
        for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert raw not in outcome.out + outcome.err
    shown = run("log").out
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown and "\\x1b[2J" in shown and "\\u202e" in shown
    data = run("log", "--json")
    diff = json.loads(data.out)["files"][0]["diff"]
    assert "+" + ESCAPES.rstrip("\n") in diff
    assert "\x1b" not in data.out and "\x9b" not in data.out
