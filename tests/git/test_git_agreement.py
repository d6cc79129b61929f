"""The real `git` CLI agrees with GitStore after init, Dream commits, a restore, hand edits and a
forced restore, in a standalone repository made by `dream init` on a machine whose HOME is empty
(no git identity anywhere)."""

from __future__ import annotations

from pathlib import Path

STATUS = {"A": "added", "M": "modified", "D": "deleted"}


def _check_agreement(ws: Path, git, store) -> list[str]:
    """git log, git show --name-status, git fsck --strict and git status against GitStore."""
    fsck = git(ws, "fsck", "--strict", "--no-progress", check=False)
    assert fsck == "", f"git fsck --strict is not clean: {fsck}"
    assert git(ws, "status", "--porcelain", "--untracked-files=all") == ""
    log = [line.split(" ", 1) for line in git(ws, "log", "--format=%H %s").splitlines()]
    with store(ws) as s:
        ours = [(c.id.decode(), c.message.decode().split("\n")[0]) for c in s.first_parent_chain()]
        assert [tuple(x) for x in log] == ours
        for sha, _ in ours:
            shown = git(ws, "show", "--format=", "--name-status", sha).split()
            git_files = sorted(zip(shown[1::2], (STATUS[c] for c in shown[0::2]), strict=True))
            assert git_files == sorted((f.path, f.status) for f in s.info(sha).files), sha
            stat = git(ws, "show", "--stat", "--format=%an <%ae>", sha)
            assert stat.startswith("dream-memory <dream-memory@localhost>\n")
            assert all(f.path in stat for f in s.info(sha).files)
            assert "gpgsig" not in git(ws, "cat-file", "-p", sha)
    return [subject for _, subject in ours]


def test_git_agrees_through_the_whole_lifecycle(tmp_path: Path, dream, git, store, dream_commit) -> None:
    """Every commit we make is a real git commit with a 40-hex SHA that `git log` lists, that
    `git show --stat` describes the same way, and that leaves `git fsck --strict` and
    `git status` clean."""
    ws = tmp_path / "ws"
    init = dream("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    head = git(ws, "rev-parse", "HEAD").strip()
    assert len(head) == 40 and f"committed {head[:10]} memory: init" in init.stdout
    assert _check_agreement(ws, git, store) == ["memory: init"]
    assert git(ws, "show", "--format=", "--name-only", "HEAD").split() == [
        ".gitignore",
        "SOUL.md",
        "USER.md",
        "memory/.dream_cursor",
        "memory/MEMORY.md",
    ]

    first = dream_commit(
        ws,
        {
            "memory/MEMORY.md": "# Memory\n- Uses PostgreSQL\n",
            "skills/sql/SKILL.md": "---\nname: sql\n---\nQuery tips.\n",
        },
        "add a decision and a skill",
        (1, 3),
    )
    second = dream_commit(ws, {"USER.md": "# User\n- Prefers dark mode\n"}, "user preference", (4, 5))
    assert git(ws, "rev-parse", "HEAD").strip() == second
    _check_agreement(ws, git, store)

    restored = dream("restore", first[:7], "--workspace", str(ws))
    assert restored.returncode == 0, restored.stderr
    assert not (ws / "skills/sql").exists() and "Uses PostgreSQL" not in (ws / "memory/MEMORY.md").read_text()
    assert (ws / "USER.md").read_text() == "# User\n- Prefers dark mode\n"
    subjects = _check_agreement(ws, git, store)
    assert subjects[0] == f"dream: revert {first[:10]} (dream: add a decision and a skill)"

    (ws / "USER.md").write_text("# User\n- Prefers dark mode, hand-written\n", encoding="utf-8")
    refused = dream("restore", second, "--workspace", str(ws))
    assert refused.returncode == 1 and "USER.md" in refused.stderr
    forced = dream("restore", second, "--force", "--workspace", str(ws))
    assert forced.returncode == 0, forced.stderr
    subjects = _check_agreement(ws, git, store)
    assert subjects[:2] == [f"dream: revert {second[:10]} (dream: user preference)", "memory: manual edits"]
    assert "dark mode, hand-written" in git(ws, "show", "HEAD~1:USER.md")
    assert len(subjects) == 6
