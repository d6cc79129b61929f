"""`dream restore SHA` as `git revert`: the inverse of that commit is merged into each file it
touched, so later batches and hand edits on other lines stay; a conflict only where the same
lines changed since, named by file and line range, changing nothing; --force takes the
restore's side in those lines only. Checked against git's own `git revert --no-commit`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dream_memory.api import Workspace
from dream_memory.errors import RestoreConflict
from dream_memory.testing import build_workspace

git_missing = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _init(tmp_path: Path, dream, name: str = "ws") -> Path:
    ws = build_workspace(tmp_path / name)
    proc = dream("init", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    return ws


def _user(ws: Path) -> str:
    return (ws / "USER.md").read_text(encoding="utf-8")


def _three_batches(ws: Path, dream_commit) -> tuple[str, str]:
    """Three Dream batches each append lines to USER.md (batch 2's and 3's right after batch 1's),
    then a hand-added line at the end. Returns (batch 1's sha, USER.md before batch 1)."""
    template = _user(ws)
    b1 = template + "- Prefers tea over coffee\n- Uses vim\n"
    first = dream_commit(ws, {"USER.md": b1}, "1..2: USER.md +2 -0", (1, 2))
    b2 = b1 + "- Works on the billing service\n"
    dream_commit(ws, {"USER.md": b2}, "3..3: USER.md +1 -0", (3, 3))
    dream_commit(ws, {"USER.md": b2 + "- Has a cat named Miso\n"}, "4..4: USER.md +1 -0", (4, 4))
    with (ws / "USER.md").open("a", encoding="utf-8") as f:
        f.write("my own line, written by hand\n")
    return first, template


BATCH_2_3_AND_HAND = "- Works on the billing service\n- Has a cat named Miso\nmy own line, written by hand\n"


def test_restoring_batch_1_removes_its_lines_and_keeps_later_batches_and_a_hand_line(
    tmp_path: Path, dream, git, dream_commit
) -> None:
    """Through the CLI, without --force: exit 0, exactly batch 1's two lines are gone, batches 2
    and 3 and the hand-added line stay, one revert commit says which commit it reverts."""
    ws = _init(tmp_path, dream)
    first, template = _three_batches(ws, dream_commit)

    proc = dream("restore", first, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _user(ws) == template + BATCH_2_3_AND_HAND
    assert "kept the later changes to USER.md" in proc.stdout
    assert "USER.md  +0 -2  modified" in proc.stdout
    log = git(ws, "log", "--format=%s", "-2").splitlines()
    assert log == [f"dream: revert {first[:10]} (dream: 1..2: USER.md +2 -0)", "memory: manual edits"]
    assert f"This reverts commit {first}." in git(ws, "log", "-1", "--format=%b")
    assert git(ws, "status", "--porcelain") == ""


def test_the_api_restores_the_same_way(tmp_path: Path, dream, dream_commit) -> None:
    """Workspace.restore gives the same file and reports the merge: `merged` names USER.md, nothing
    was forced."""
    ws = _init(tmp_path, dream)
    first, template = _three_batches(ws, dream_commit)
    result = Workspace(ws).restore(first)
    assert _user(ws) == template + BATCH_2_3_AND_HAND
    assert result.merged == ("USER.md",) and result.forced_over == () and result.commit is not None
    assert result.to_json()["forced_lines"] == {}


def _changed_since(ws: Path, dream_commit) -> tuple[str, str]:
    """Batch 1 adds two lines; batch 2 appends one; batch 3 rewrites batch 1's second line."""
    template = _user(ws)
    b1 = template + "- Prefers tea over coffee\n- Uses vim\n"
    first = dream_commit(ws, {"USER.md": b1}, "1..2: USER.md +2 -0", (1, 2))
    b2 = b1 + "- Works on the billing service\n"
    dream_commit(ws, {"USER.md": b2}, "3..3: USER.md +1 -0", (3, 3))
    dream_commit(ws, {"USER.md": b2.replace("- Uses vim\n", "- Uses neovim\n")}, "4..4: USER.md +1 -1", (4, 4))
    with (ws / "USER.md").open("a", encoding="utf-8") as f:
        f.write("my own line, written by hand\n")
    return first, template


def test_a_later_change_to_batch_1s_line_is_a_conflict_naming_the_file_and_lines(
    tmp_path: Path, dream, snapshot, dream_commit
) -> None:
    """A later batch rewrote one of batch 1's lines: restore exits 1 naming USER.md and the lines
    of that hunk (1-based, in the file now), and the workspace, index and HEAD are byte-identical.
    --force then removes batch 1's lines (the rewritten one included) and leaves every other line."""
    ws = _init(tmp_path, dream)
    first, template = _changed_since(ws, dream_commit)
    hunk_start = template.count("\n") + 1  # batch 1's first line
    before = snapshot(ws)

    refused = dream("restore", first, "--workspace", str(ws))
    assert refused.returncode == 1
    assert f"USER.md lines {hunk_start}-{hunk_start + 1} changed since that commit; nothing was changed" in (
        refused.stderr
    )
    assert "--force to take the restore's side in those lines only" in refused.stderr
    after = snapshot(ws)
    assert after.pop("memory/.dream.lock", b"") == before.pop("memory/.dream.lock", b"") == b""
    assert after == before

    forced = dream("restore", first, "--force", "--workspace", str(ws))
    assert forced.returncode == 0, forced.stderr
    assert _user(ws) == template + "- Works on the billing service\nmy own line, written by hand\n"
    assert f"--force: took the restore's side in USER.md lines {hunk_start}-{hunk_start + 1}" in forced.stdout


def test_the_api_raises_the_conflict_with_the_file(tmp_path: Path, dream, snapshot, dream_commit) -> None:
    """Workspace.restore raises RestoreConflict naming USER.md (exit code 1) and changes nothing;
    with force=True it reports the forced line range per file."""
    ws = _init(tmp_path, dream)
    first, template = _changed_since(ws, dream_commit)
    before = snapshot(ws)
    with pytest.raises(RestoreConflict) as caught:
        Workspace(ws).restore(first)
    assert caught.value.paths == ["USER.md"] and caught.value.exit_code == 1
    after = snapshot(ws)
    after.pop("memory/.dream.lock", None), before.pop("memory/.dream.lock", None)
    assert after == before
    start = template.count("\n") + 1
    result = Workspace(ws).restore(first, force=True)
    assert result.forced_lines == {"USER.md": [(start, start + 1)]}
    assert result.to_json()["forced_lines"] == {"USER.md": [[start, start + 1]]}


def test_a_created_file_edited_since_keeps_only_the_users_lines(tmp_path: Path, dream, dream_commit) -> None:
    """Restoring the commit that created a file the user has edited since keeps the file and
    removes only that commit's lines; an unedited created file is removed as before."""
    ws = _init(tmp_path, dream)
    made = dream_commit(ws, {"entities/tea.md": "# tea\n- green, no sugar\n", "entities/vim.md": "# vim\n"}, "new")
    (ws / "entities/tea.md").write_text("# tea\n- green, no sugar\n- my note: oolong too\n", encoding="utf-8")

    proc = dream("restore", made, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert (ws / "entities/tea.md").read_text(encoding="utf-8") == "- my note: oolong too\n"
    assert not (ws / "entities/vim.md").exists()


def test_a_deleted_file_comes_back_and_a_different_file_there_is_a_conflict(
    tmp_path: Path, dream, dream_commit
) -> None:
    """Restoring a commit that deleted a file re-creates it; when a file with other content is at
    that path now, the restore is a conflict naming it, and --force puts the old file back (the
    other one stays in git history as a manual edit)."""
    ws = _init(tmp_path, dream)
    dream_commit(ws, {"entities/a.md": "# a\n- one\n", "entities/b.md": "# b\n- two\n"}, "add")
    gone = dream_commit(ws, {"entities/a.md": None, "entities/b.md": None}, "drop")
    (ws / "entities").mkdir(exist_ok=True)
    (ws / "entities/b.md").write_text("# b, written anew\n", encoding="utf-8")

    refused = dream("restore", gone, "--workspace", str(ws))
    assert refused.returncode == 1
    assert "entities/b.md (a different file is there now) changed since that commit" in refused.stderr
    assert not (ws / "entities/a.md").exists()

    forced = dream("restore", gone, "--force", "--workspace", str(ws))
    assert forced.returncode == 0, forced.stderr
    assert (ws / "entities/a.md").read_text(encoding="utf-8") == "# a\n- one\n"
    assert (ws / "entities/b.md").read_text(encoding="utf-8") == "# b\n- two\n"
    assert "entities/b.md (the whole file)" in forced.stdout
    assert "committed your unsaved edits first" in forced.stdout


def test_crlf_and_no_final_newline_files_keep_their_form(tmp_path: Path, dream, dream_commit) -> None:
    """A CRLF file and a file without a final newline: undoing one batch among later ones keeps
    CRLF line ends and the missing final newline byte for byte."""
    ws = _init(tmp_path, dream)
    crlf = {
        "base": "# w\r\n- one\r\n",
        "mid": "# w\r\n- one\r\n- two\r\n",
        "late": "# w\r\n- one\r\n- two\r\n- three\r\n",
    }
    bare = {"base": "# n\n- a\n- one", "mid": "# n\n- zero\n- a\n- one", "late": "# n\n- zero\n- a\n- one\n- two"}
    dream_commit(ws, {"entities/w.md": crlf["base"], "entities/n.md": bare["base"]}, "base")
    target = dream_commit(ws, {"entities/w.md": crlf["mid"], "entities/n.md": bare["mid"]}, "mid")
    dream_commit(ws, {"entities/w.md": crlf["late"], "entities/n.md": bare["late"]}, "late")

    proc = dream("restore", target, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert (ws / "entities/w.md").read_bytes() == b"# w\r\n- one\r\n- three\r\n"
    assert (ws / "entities/n.md").read_bytes() == b"# n\n- a\n- one\n- two"


# --- the real client: git's own revert ------------------------------------------------------------


def _sections_scenario(ws: Path, dream_commit, git) -> str:
    """Batches writing to different sections of USER.md and to other files, a committed hand
    edit, a created file, a deleted file, CRLF and a missing final newline: the cases git
    reverts without a conflict. Returns the commit to restore."""
    user = _user(ws)
    b1 = user.replace("## Profile\n", "## Profile\n- Lives in Lisbon\n- Speaks Portuguese\n")
    files = {
        "USER.md": b1,
        "entities/new.md": "# new\n- made by batch 1\n",
        "entities/gone.md": None,
        "entities/crlf.md": "# crlf\r\n- one\r\n- batch 1\r\n- two\r\n",
        "entities/bare.md": "# bare\n- batch 1\n- a\n- last",
    }
    (ws / "entities").mkdir(exist_ok=True)
    dream_commit(
        ws,
        {
            "entities/gone.md": "# gone\n- was here\n",
            "entities/crlf.md": "# crlf\r\n- one\r\n- two\r\n",
            "entities/bare.md": "# bare\n- a\n- last",
        },
        "setup",
        (0, 0),  # the cursor file exists before batch 1, as in a workspace Dream has run in
    )
    target = dream_commit(ws, files, "1..2: batch 1", (1, 2))
    b2 = b1.replace("## Preferences\n", "## Preferences\n- Likes dark mode\n")
    dream_commit(ws, {"USER.md": b2, "entities/crlf.md": files["entities/crlf.md"] + "- three\r\n"}, "3..3", (3, 3))
    b3 = b2.replace("## Work Context\n", "## Work Context\n- Billing team\n")
    dream_commit(ws, {"USER.md": b3, "entities/bare.md": "# bare\n- batch 1\n- a\n- last\n- after"}, "4..4", (4, 4))
    (ws / "USER.md").write_text("my own line\n" + b3, encoding="utf-8")
    git(ws, "add", "USER.md")
    git(ws, "commit", "-q", "-m", "memory: manual edits", identity=True)
    return target


@git_missing
def test_restore_gives_what_git_revert_gives(tmp_path: Path, dream, git, dream_commit) -> None:
    """For the same repository, `git revert --no-commit SHA` and `dream restore SHA` leave every
    memory file with the same bytes (USER.md with later batches in other sections and a hand line, a
    created file, a deleted file, a CRLF file, a file without a final newline)."""
    ws = _init(tmp_path, dream)
    target = _sections_scenario(ws, dream_commit, git)
    twin = tmp_path / "twin"
    shutil.copytree(ws, twin, symlinks=True)
    reverted = git(twin, "revert", "--no-commit", target, check=False)
    # Dream's cursor changes in every batch, so git conflicts there; dream restore leaves it alone.
    conflicts = [line for line in reverted.splitlines() if line.startswith("CONFLICT")]
    assert all(line.endswith("memory/.dream_cursor") for line in conflicts), reverted

    proc = dream("restore", target, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    for rel in ("USER.md", "entities/new.md", "entities/gone.md", "entities/crlf.md", "entities/bare.md"):
        mine, gits = ws / rel, twin / rel
        assert mine.exists() == gits.exists(), rel
        if gits.exists():
            assert mine.read_bytes() == gits.read_bytes(), rel
    assert "my own line\n" in _user(ws) and "- Lives in Lisbon" not in _user(ws)
    assert (ws / "entities/gone.md").read_text(encoding="utf-8") == "# gone\n- was here\n"


# --- a range: git revert A..B ----------------------------------------------------------------------


def test_a_range_reverts_each_commit_newest_first_in_one_commit(tmp_path: Path, dream, git, dream_commit) -> None:
    """`dream restore A..B` undoes every commit after A up to B (batches 1 and 2 here), newest
    first, keeping batch 3 and the hand line, in one revert commit naming both commits."""
    ws = _init(tmp_path, dream)
    first, template = _three_batches(ws, dream_commit)
    log = git(ws, "log", "--format=%H %s").splitlines()
    second = next(line.split()[0] for line in log if "3..3" in line)

    start = git(ws, "rev-parse", f"{first}~1").strip()
    proc = dream("restore", f"{start}..{second}", "--workspace", str(ws), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["reverted"] == [second, first]
    assert _user(ws) == template + "- Has a cat named Miso\nmy own line, written by hand\n"
    subject, body = git(ws, "log", "-1", "--format=%s%n%b").split("\n", 1)
    assert subject == f"dream: revert {start[:10]}..{second[:10]} (2 commits)"
    assert f"Reverts: {second}\nReverts: {first}" in body
    assert git(ws, "log", "--format=%s", "-3").splitlines()[1] == "memory: manual edits"


def test_the_same_range_restore_twice_keeps_a_hand_line_and_says_what_it_skipped(tmp_path: Path, dream, git) -> None:
    """Three offline batches, a hand-written line, then `dream restore <batch 1>..` twice: the
    first undoes batches 2 and 3 and keeps the hand line (committed first as `memory: manual
    edits`); the second changes nothing (no commit, the hand line stays) and names each commit of
    the range it skipped and why: the revert, the manual edits, and the batches already undone."""
    ws = _init(tmp_path, dream)
    for i in (1, 2, 3):
        assert dream("append", "-w", str(ws), f"- Decided to use tool {i} for job {i}").returncode == 0
        proc = dream("run", "-w", str(ws), "--model", "offline")
        assert proc.returncode == 0, proc.stderr
    first = next(line.split()[0] for line in git(ws, "log", "--format=%H %s").splitlines() if " 1..1: " in line)
    memory = ws / "memory" / "MEMORY.md"
    with memory.open("a", encoding="utf-8") as f:
        f.write("- hand note\n")

    once = dream("restore", f"{first}..", "-w", str(ws))
    assert once.returncode == 0, once.stderr
    assert "undid the changes of 2 commits" in once.stdout
    text = memory.read_text(encoding="utf-8")
    assert "- hand note" in text and "tool 2" not in text and "tool 3" not in text and "tool 1" in text
    head = git(ws, "rev-parse", "HEAD").strip()

    twice = dream("restore", f"{first}..", "-w", str(ws))
    assert twice.returncode == 0, twice.stderr
    assert memory.read_text(encoding="utf-8") == text
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert "nothing to write" in twice.stdout
    assert f"skipped {head[:10]} (dream: revert " in twice.stdout and "a restore (revert) commit" in twice.stdout
    assert "(memory: manual edits): a person's edits, not Dream's" in twice.stdout
    assert twice.stdout.count(f"already undone by {head[:10]}") == 2
    report = json.loads(dream("restore", f"{first}..", "-w", str(ws), "--json").stdout)
    assert report["commit"] is None and report["reverted"] == []


def test_a_range_skips_a_persons_commit_and_reverts_only_the_batches(tmp_path: Path, dream, git, dream_commit) -> None:
    """A range holding a person's own `git commit` between two batches undoes the two batches and
    leaves the person's line, saying it skipped their commit."""
    ws = _init(tmp_path, dream)
    template = _user(ws)
    start = git(ws, "rev-parse", "HEAD").strip()
    dream_commit(ws, {"USER.md": template + "- batch one\n"}, "1..1: USER.md +1 -0", (1, 1))
    (ws / "USER.md").write_text(template + "- batch one\n- mine\n", encoding="utf-8")
    git(ws, "commit", "-qam", "my line", identity=True)
    dream_commit(ws, {"USER.md": template + "- batch one\n- mine\n- batch two\n"}, "2..2: USER.md +1 -0", (2, 2))

    proc = dream("restore", f"{start}..", "-w", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert _user(ws) == template + "- mine\n"
    assert "(my line): a person's edits, not Dream's" in proc.stdout


def test_a_bad_range_is_exit_2_and_changes_nothing(tmp_path: Path, dream, snapshot, dream_commit) -> None:
    """A range without its older end, backwards, or empty is bad input (exit 2, one line naming
    it), and nothing changes."""
    ws = _init(tmp_path, dream)
    first = dream_commit(ws, {"USER.md": "# User\n- a\n"}, "one", (1, 1))
    second = dream_commit(ws, {"USER.md": "# User\n- a\n- b\n"}, "two", (2, 2))
    before = snapshot(ws)
    for rev, says in [
        (f"..{second}", "a range needs its older end"),
        (f"{second}..{first}", "is not before"),
        (f"{first}..{first}", "names no commits"),
    ]:
        proc = dream("restore", rev, "--workspace", str(ws))
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, (rev, proc.stderr)
    after = snapshot(ws)
    after.pop("memory/.dream.lock", None), before.pop("memory/.dream.lock", None)
    assert after == before


@git_missing
def test_a_range_gives_what_git_revert_of_the_range_gives(tmp_path: Path, dream, git, dream_commit) -> None:
    """The real client on a range: `git revert --no-commit A..B` over three batches (git reverts
    each, newest first) and `dream restore A..B` leave every memory file with the same bytes."""
    ws = _init(tmp_path, dream)
    target = _sections_scenario(ws, dream_commit, git)
    rev = f"{git(ws, 'rev-parse', target + '~1').strip()}..{git(ws, 'rev-parse', 'HEAD~1').strip()}"
    twin = tmp_path / "twin"
    shutil.copytree(ws, twin, symlinks=True)
    reverted = git(twin, "revert", "--no-commit", rev, check=False)
    assert "CONFLICT" not in reverted and "error" not in reverted, reverted

    proc = dream("restore", rev, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert "undid the changes of 3 commits, newest first," in proc.stdout
    for rel in ("USER.md", "entities/new.md", "entities/gone.md", "entities/crlf.md", "entities/bare.md"):
        mine, gits = ws / rel, twin / rel
        assert mine.exists() == gits.exists(), rel
        if gits.exists():
            assert mine.read_bytes() == gits.read_bytes(), rel
    assert _user(ws).startswith("my own line\n") and "- Billing team" not in _user(ws)
