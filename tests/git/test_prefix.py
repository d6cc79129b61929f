"""Commits are named by a unique prefix of at least 4 hex digits; a short, unknown or ambiguous
prefix is bad input (exit 2) and the message names it."""

from __future__ import annotations

from pathlib import Path

from dulwich.objects import Commit
from dulwich.refs import Ref


def _two_commits_sharing_a_prefix(store, ws: Path) -> tuple[str, str, str]:
    """Two real commits (on branches a and b) whose SHAs start with the same 4 hex digits."""
    with store(ws) as s:
        head = s._commit(s.head())
        seen: dict[str, Commit] = {}
        n = 0
        while True:
            n += 1
            commit = Commit()
            commit.tree, commit.parents = head.tree, [head.id]
            commit.author = commit.committer = b"dream-memory <dream-memory@localhost>"
            commit.author_time = commit.commit_time = head.commit_time + n
            commit.author_timezone = commit.commit_timezone = 0
            commit.message = f"dream: candidate {n}\n".encode()
            prefix = commit.id.decode()[:4]
            if prefix in seen:
                for name, obj in (("a", seen[prefix]), ("b", commit)):
                    s.repo.object_store.add_object(obj)
                    s.repo.refs[Ref(b"refs/heads/" + name.encode())] = obj.id
                return prefix, seen[prefix].id.decode(), commit.id.decode()
            seen[prefix] = commit


def test_prefixes(tmp_path: Path, dream, git, store, dream_commit) -> None:
    """A unique 4-digit prefix, a longer one and the full SHA all name the commit, as in git;
    three digits, a non-hex word, an unknown prefix and an ambiguous one are exit 2, naming it."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    sha = dream_commit(ws, {"memory/MEMORY.md": "# Memory\n- one\n"}, "one", (1, 1))
    for rev in (sha[:4], sha.upper()):
        shown = dream("log", rev, "--json", "--workspace", str(ws))
        assert shown.returncode == 0, (rev, shown.stderr)
        assert f'"commit": "{sha}"' in shown.stdout
        assert git(ws, "rev-parse", rev.lower()).strip() == sha

    prefix, first, second = _two_commits_sharing_a_prefix(store, ws)
    assert "ambiguous" in git(ws, "rev-parse", prefix, check=False)
    cases = {
        sha[:3]: "no branch or commit named",
        "zzzz": "no branch or commit named",
        prefix: "is ambiguous: it matches 2 commits",
        _unknown_prefix(ws, git): "no branch or commit matches",
    }
    for rev, message in cases.items():
        for command in ("log", "restore") if rev == prefix else ("log",):
            proc = dream(command, rev, "--workspace", str(ws))
            assert proc.returncode == 2, (command, rev, proc.stderr)
            assert f"'{rev}'" in proc.stderr and message in proc.stderr, proc.stderr
    ambiguous = dream("log", prefix, "--workspace", str(ws)).stderr
    assert first[:12] in ambiguous and second[:12] in ambiguous


def _unknown_prefix(ws: Path, git) -> str:
    objects = set(git(ws, "rev-list", "--all", "--objects").split())
    objects |= {line.split()[0] for line in git(ws, "cat-file", "--batch-all-objects", "--batch-check").splitlines()}
    for n in range(0x10000):
        candidate = f"{n:04x}"
        if not any(o.startswith(candidate) for o in objects):
            return candidate
    raise AssertionError("every 4-digit prefix is taken")
