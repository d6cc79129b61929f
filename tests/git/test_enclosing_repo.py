"""A workspace inside a larger repository (a CI checkout, a dotfiles repo): that repository is
used, only memory paths are ever committed or staged, and the user's own files, staged or not,
are left exactly as they were."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dulwich.objects import Blob


def _user_repo(root: Path, git) -> None:
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    (root / "app.py").write_text("print('v1')\n", encoding="utf-8")
    (root / "README.md").write_text("# project\n", encoding="utf-8")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "project", identity=True)
    # work in progress: one change staged, one not, one new file not added at all
    (root / "app.py").write_text("print('v2, staged')\n", encoding="utf-8")
    git(root, "add", "app.py")
    (root / "README.md").write_text("# project\nunstaged line\n", encoding="utf-8")
    (root / "notes.txt").write_text("untracked\n", encoding="utf-8")


def test_only_memory_paths_are_committed_and_user_work_is_untouched(
    tmp_path: Path, dream, git, store, dream_commit
) -> None:
    """`dream init`, a Dream commit and a restore in agents/bot/: the user's staged change stays
    staged, the unstaged one unstaged, the untracked file untracked, their bytes unchanged; our
    commits hold only agents/bot/ paths; fsck is clean; the workspace's lock and journal files
    never show in `git status`."""
    repo = tmp_path / "project"
    _user_repo(repo, git)
    ws = repo / "agents" / "bot"
    before_cached = git(repo, "diff", "--cached")
    before_bytes = {n: (repo / n).read_bytes() for n in ("app.py", "README.md", "notes.txt")}

    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert "versioned in the enclosing repository" in init.stdout
    assert not (ws / ".git").exists() and not (ws / ".gitignore").exists()
    dream("append", "- fact", "--workspace", str(ws))
    sha = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- a fact\n"}, "a fact", (1, 1))
    restored = dream("restore", sha[:8], "--workspace", str(ws))
    assert restored.returncode == 0, restored.stderr

    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "trunk"
    for commit in git(repo, "log", "--format=%H", "-3").split():
        files = git(repo, "show", "--format=", "--name-only", commit).split()
        assert files and all(f.startswith("agents/bot/") for f in files), files
    assert git(repo, "log", "--format=%s").splitlines() == [
        f"dream: revert {sha[:10]} (dream: a fact)",
        "dream: a fact",
        "memory: init",
        "project",
    ]
    assert git(repo, "diff", "--cached") == before_cached
    assert {n: (repo / n).read_bytes() for n in before_bytes} == before_bytes
    # exactly the user's own work in progress, plus the workspace's files that are not versioned
    # unless the repository chooses to track them (history, prompts); no lock, journal or temp
    assert git(repo, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M README.md",
        "M  app.py",
        "?? agents/bot/memory/.cursor",
        "?? agents/bot/memory/history.jsonl",
        "?? agents/bot/prompts/README.md",
        "?? notes.txt",
    ]
    assert git(repo, "fsck", "--strict", "--no-progress", check=False) == ""
    exclude = (repo / ".git/info/exclude").read_text(encoding="utf-8")
    assert "/agents/bot/memory/.*.lock" in exclude and "/agents/bot/memory/.dream_journal.json" in exclude
    # the user commits their staged work with git afterwards: our memory commit is not undone
    git(repo, "commit", "-q", "-m", "user work", identity=True)
    assert git(repo, "show", "HEAD:app.py") == "print('v2, staged')\n"
    assert git(repo, "show", "HEAD:agents/bot/memory/MEMORY.md") == (ws / "memory/MEMORY.md").read_text(
        encoding="utf-8"
    )
    assert git(repo, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M README.md",
        "?? agents/bot/memory/.cursor",
        "?? agents/bot/memory/history.jsonl",
        "?? agents/bot/prompts/README.md",
        "?? notes.txt",
    ]


def test_a_user_repository_at_the_workspace_root_is_not_taken_over(tmp_path: Path, dream, git) -> None:
    """A repository already at the workspace root (nanobot's own, say) is used as it is: its
    .gitignore is not rewritten, and only memory paths are committed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / ".gitignore").write_text(
        "/*\n!memory/\n!SOUL.md\n!USER.md\n!memory/MEMORY.md\n!.gitignore\n", encoding="utf-8"
    )
    (ws / "AGENTS.md").write_text("instructions\n", encoding="utf-8")
    git(ws, "add", ".gitignore")
    git(ws, "commit", "-q", "-m", "nanobot", identity=True)
    gitignore = (ws / ".gitignore").read_bytes()
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert (ws / ".gitignore").read_bytes() == gitignore
    assert git(ws, "show", "--format=", "--name-only", "HEAD").split() == [
        "SOUL.md",
        "USER.md",
        "memory/.dream_cursor",
        "memory/MEMORY.md",
    ]
    assert git(ws, "fsck", "--strict", "--no-progress", check=False) == ""


def test_an_index_dulwich_cannot_rewrite_is_left_alone(tmp_path: Path, dream, git) -> None:
    """A split index keeps entries in a file dulwich does not read: rewriting it would unstage
    the user's work, so nothing is committed and the command says how to proceed (exit 1)."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n", encoding="utf-8")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "a", identity=True)
    git(repo, "update-index", "--split-index")
    (repo / "b.txt").write_text("b\n", encoding="utf-8")
    git(repo, "add", "b.txt")
    index = (repo / ".git/index").read_bytes()
    proc = dream("init", "--workspace", str(repo / "ws"))
    assert proc.returncode == 1
    assert "cannot rewrite safely" in proc.stderr and "--no-split-index" in proc.stderr
    assert (repo / ".git/index").read_bytes() == index
    assert git(repo, "log", "--format=%s").splitlines() == ["a"]
    assert "A  b.txt" in git(repo, "status", "--porcelain").splitlines()


def test_a_carried_history_snapshot_never_overwrites_later_appends(tmp_path: Path, dream, git, store) -> None:
    """In a repository that tracks history.jsonl, a Dream commit carries a snapshot of it. An
    append landing after the snapshot was taken is neither erased from disk by the commit nor by
    recovering an interrupted one, and `git status` shows history.jsonl as modified."""
    from dream_memory.adapters.history_log import HistoryLog
    from dream_memory.app.versioning import apply_commit
    from dream_memory.testing import FrozenClock

    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    ws = repo / "bot"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    assert dream("append", "- first", "--workspace", str(ws)).returncode == 0
    git(repo, "add", "bot/memory/history.jsonl")
    git(repo, "commit", "-q", "-m", "track history", identity=True)
    assert dream("append", "- second, in the snapshot", "--workspace", str(ws)).returncode == 0
    snapshot = (ws / "memory/history.jsonl").read_bytes()
    HistoryLog(ws, clock=FrozenClock()).append("- landed after the snapshot")
    history = ws / "memory/history.jsonl"
    past = history.stat().st_mtime - 10
    os.utime(history, (past, past))  # old enough for a stat cache to be trusted without hashing
    with store(ws) as s:
        sha = apply_commit(s, {"USER.md": b"# User\n- x\n", "memory/history.jsonl": snapshot}, "dream: x")
        on_disk = Blob.from_string(history.read_bytes()).id
        assert s.worktree_state(["memory/history.jsonl"]) == {"memory/history.jsonl": on_disk}
    assert sha is not None
    assert b"landed after the snapshot" in (ws / "memory/history.jsonl").read_bytes()
    assert git(repo, "show", f"{sha}:bot/memory/history.jsonl").encode() == snapshot
    assert git(repo, "status", "--porcelain", "bot/memory/history.jsonl").strip() == "M bot/memory/history.jsonl"
    git(repo, "add", "-u")  # git sees the append and can commit it
    assert "landed after the snapshot" in git(repo, "diff", "--cached")

    # the same commit found interrupted by a crash, recovered after yet another append
    import json

    from dream_memory.app.versioning import recover

    paths = ["USER.md", "memory/history.jsonl"]
    (ws / "memory/.dream_journal.json").write_text(json.dumps({"commit": sha, "base": None, "paths": paths}))
    HistoryLog(ws, clock=FrozenClock()).append("- landed before the recovery")
    with store(ws) as s:
        assert recover(s) is not None and recover(s) is None
    assert b"landed before the recovery" in history.read_bytes()


def test_a_memory_file_under_a_git_filter_is_never_committed_unfiltered(tmp_path: Path, dream, git) -> None:
    """A clean/smudge filter on a memory file (as git-crypt sets one): dulwich runs no filter,
    so the commit held the file as it is on disk (with git-crypt: the plaintext, pushed as such).
    Now `dream init`, and later a run whose change would touch a filtered file, exit 2 naming
    the file and the filter, and commit nothing."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    git(repo, "config", "filter.rot.clean", "tr A-Za-z N-ZA-Mn-za-m")
    git(repo, "config", "filter.rot.smudge", "tr A-Za-z N-ZA-Mn-za-m")
    (repo / ".gitattributes").write_text("bot/USER.md filter=rot\n", encoding="utf-8")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes", identity=True)
    ws = repo / "bot"
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 2, init.stderr
    assert f"USER.md has the git filter 'rot' ({repo / '.gitattributes'})" in init.stderr
    assert "`bot/USER.md -filter`" in init.stderr
    assert git(repo, "log", "--format=%s").splitlines() == ["attributes"]

    (repo / ".gitattributes").write_text("", encoding="utf-8")
    assert dream("init", "--workspace", str(ws)).returncode == 0
    (repo / ".gitattributes").write_text("bot/memory/MEMORY.md filter=rot\n", encoding="utf-8")
    head = git(repo, "rev-parse", "HEAD")
    dream("append", "- [durable] Decided to use PostgreSQL", "--workspace", str(ws))
    run = dream("run", "--workspace", str(ws), "--model", "offline")
    assert run.returncode == 2, run.stderr
    assert "memory/MEMORY.md has the git filter 'rot'" in run.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert "PostgreSQL" not in git(repo, "log", "-p", "--all")


def _agent_repo_tracking_history(tmp_path: Path, dream, git, *, ignore: str = "") -> tuple[Path, Path]:
    """A project whose agent committed 12 history entries of bot/, with a history cap of 10."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    ws = repo / "bot"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    (ws / "dream.json").write_text('{"agents": {"defaults": {"dream": {"maxHistoryEntries": 10}}}}\n')
    (repo / ".gitignore").write_text(ignore)
    for n in range(1, 13):
        assert dream("append", f"- [memory] fact number {n}", "--workspace", str(ws)).returncode == 0
    git(repo, "add", ".gitignore", "bot/memory/history.jsonl", "bot/dream.json")
    git(repo, "commit", "-q", "-m", "agent: history", identity=True)
    return repo, ws


def test_compaction_in_a_repository_tracking_history_commits_the_archive(tmp_path: Path, dream, git) -> None:
    """A CI checkout: the agent commits history.jsonl, Dream runs with a small history cap. The
    compaction commit shortened the tracked history.jsonl and left the archive untracked, so a
    fresh clone (the runner is thrown away) had lost the archived entries. Now a clone holds
    every entry, in history.jsonl or memory/archive/, and neither shows in `git status`."""
    repo, ws = _agent_repo_tracking_history(tmp_path, dream, git)
    run = dream("run", "--model", "offline", "--workspace", str(ws), "--config", str(ws / "dream.json"))
    assert run.returncode == 0, run.stderr
    assert git(repo, "log", "-1", "--format=%s").startswith("dream: compact history (")
    assert git(repo, "status", "--porcelain", "bot/memory/history.jsonl", "bot/memory/archive") == ""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    kept = [
        line
        for path in [clone / "bot/memory/history.jsonl", *sorted((clone / "bot/memory/archive").glob("*.jsonl"))]
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert [f"fact number {n}" in " ".join(kept) for n in range(1, 13)] == [True] * 12, kept


def test_compaction_waits_while_the_repository_ignores_the_archive(tmp_path: Path, dream, git) -> None:
    """The repository tracks history.jsonl but ignores memory/archive/: compacting would take the
    entries out of the repository. The first run failed (exit 2) after its batch had committed,
    left history.jsonl shortened on disk, and every later run failed the same way. Now the run
    is ok, history.jsonl keeps every entry, and a note says why and what to change."""
    _repo, ws = _agent_repo_tracking_history(tmp_path, dream, git, ignore="bot/memory/archive/\n")
    for _ in range(2):
        run = dream("run", "--model", "offline", "--workspace", str(ws), "--config", str(ws / "dream.json"), "--json")
        assert run.returncode == 0, run.stdout + run.stderr
        report = json.loads(run.stdout)
        assert report["compaction"] is None
        assert any(n.startswith("history compaction skipped: the repository tracks") for n in report["notes"])
        assert dream("append", "- [memory] one more", "--workspace", str(ws)).returncode == 0
    assert len((ws / "memory/history.jsonl").read_text(encoding="utf-8").splitlines()) == 14
    assert not (ws / "memory/archive").exists()
