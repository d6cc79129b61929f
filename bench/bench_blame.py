"""Blame (line origins) of a memory file in a repository with a long history (5,000 commits; 500
with --quick), every commit rewriting that file: the worst case for a walk that ends at the
oldest surviving line (the template's, in `memory: init`).

- ``adapters.git.blame.blame`` in-process, beside ``git blame --porcelain`` on the same file (a
  process, its start included): their ratio is the gated figure, measured side by side.
- ``dream blame USER.md --json`` as a user runs it (a process, interpreter start included), when
  the command exists in this checkout.

Run: ``.venv/bin/python bench/bench_blame.py [--quick] [--json]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, best_of, main

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.git.blame import blame
from dream_memory.app.versioning import ensure_versioned
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock, build_workspace

DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]
KEEP = 150  # facts USER.md holds at once: each batch adds one and, past this, drops the oldest


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@localhost",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@localhost",
    }


def _history(ws: Path, commits: int, env: dict[str, str], every: int = 1) -> None:
    """``commits`` Dream batches on top of `memory: init`, one in ``every`` adding a fact to
    USER.md (and rewriting one now and then), the others to memory/MEMORY.md, through git
    fast-import."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, env=env, capture_output=True, text=True, check=True)
    template = (ws / "USER.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n## Facts\n\n"
    facts: list[str] = []
    chunks: list[bytes] = []
    for i in range(commits):
        if i % every:
            memory = f"# Memory\n- project fact {i}\n".encode()
            message = f"dream: {i * 3 + 1}..{i * 3 + 3}: memory/MEMORY.md +1 -1\n".encode()
            chunks.append(b"commit refs/heads/main\n")
            chunks.append(f"committer dream-memory <dream-memory@localhost> {1_700_000_000 + i * 60} +0000\n".encode())
            chunks.append(b"data %d\n%s\n" % (len(message), message))
            if i == 0:
                chunks.append(f"from {head.stdout.strip()}\n".encode())
            chunks.append(b"M 100644 inline memory/MEMORY.md\ndata %d\n%s\n" % (len(memory), memory))
            continue
        facts.append(f"- fact {i}: the user mentioned item {i}\n")
        if i % 7 == 3 and len(facts) > 2:
            facts[-3] = f"- fact {i - 2}: corrected in batch {i}\n"
        del facts[:-KEEP]
        user = (template + "".join(facts)).encode()
        message = f"dream: {i * 3 + 1}..{i * 3 + 3}: USER.md +1 -0\n\nDream-Range: {i * 3 + 1}..{i * 3 + 3}\n".encode()
        cursor = f"{i * 3 + 3}\n".encode()
        chunks.append(b"commit refs/heads/main\n")
        chunks.append(f"committer dream-memory <dream-memory@localhost> {1_700_000_000 + i * 60} +0000\n".encode())
        chunks.append(b"data %d\n%s\n" % (len(message), message))
        if i == 0:
            chunks.append(f"from {head.stdout.strip()}\n".encode())
        chunks.append(b"M 100644 inline USER.md\ndata %d\n%s\n" % (len(user), user))
        chunks.append(b"M 100644 inline memory/.dream_cursor\ndata %d\n%s\n" % (len(cursor), cursor))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=ws, input=b"".join(chunks), env=env, check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=ws, env=env, check=True)


def _quiet(argv: list[str], ws: Path, env: dict[str, str]) -> None:
    subprocess.run(argv, cwd=ws, env=env, capture_output=True, check=False)


def _dream_has_blame(ws: Path, env: dict[str, str]) -> bool:
    proc = subprocess.run([*DREAM, "blame", "--help"], cwd=ws, env=env, capture_output=True, text=True, check=False)
    return proc.returncode == 0


def _measure(commits: int, every: int, quick: bool) -> Section:
    with tempfile.TemporaryDirectory(prefix="dream-bench-blame-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        env = _env(home)
        ws = build_workspace(root / "ws")
        with GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=1)) as store:
            ensure_versioned(store)
        start = time.perf_counter()
        _history(ws, commits, env, every)
        built = time.perf_counter() - start
        subprocess.run(["git", "gc", "-q"], cwd=ws, env=env, check=True)  # a long-lived repository is packed

        with GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock()) as store:
            origins = blame(store, "USER.md")
            ours = best_of(lambda: blame(store, "USER.md"), 3)
        theirs = best_of(lambda: _quiet(["git", "blame", "--porcelain", "USER.md"], ws, env), 3)
        rows: list[list[object]] = [
            ["adapters.git.blame.blame (in-process, repository open)", ours * 1000, ours / theirs],
            ["git blame --porcelain USER.md (a process)", theirs * 1000, 1.0],
        ]
        ratios = {"blame_over_git_blame": ours / theirs}
        if _dream_has_blame(ws, env):
            cli = best_of(lambda: _quiet([*DREAM, "blame", "USER.md", "--json", "--workspace", str(ws)], ws, env), 3)
            python_start = best_of(lambda: _quiet([sys.executable, "-c", "pass"], ws, env), 3)
            rows += [
                ["dream blame USER.md --json (a process)", cli * 1000, cli / theirs],
                ["python -c pass (interpreter start)", python_start * 1000, python_start / theirs],
            ]
            ratios["dream_blame_cli_over_git_blame"] = cli / theirs
        kinds = sorted({o.kind for o in origins})
        changed = "every commit rewrites USER.md" if every == 1 else f"one commit in {every} changes USER.md"
        return Section(
            key="git.blame" if every == 1 else f"git.blame.every{every}",
            title=f"Line origins of USER.md ({len(origins)} lines), {commits:,} commits, {changed}",
            columns=["how", "best of 3 (ms)", "ratio to git blame"],
            rows=rows,
            command="python bench/bench_blame.py" + (" --quick" if quick else ""),
            notes=[
                f"History built with git fast-import in {built:.1f} s, then `git gc`; USER.md's template lines date "
                f"from `memory: init`, so the walk goes through all {commits:,} commits and diffs each version of "
                f"the file (line kinds found: {', '.join(kinds)})."
            ],
            deterministic={"commits": float(commits), "lines": float(len(origins))},
            # git blame takes 4-15 ms here (a process): a busy machine doubles that alone, and a
            # Python walk beside a C process is not the same work. Reported, never gated.
            reported=ratios,
        )


def run(quick: bool) -> list[Section]:
    commits = 500 if quick else 5000
    return [_measure(commits, 1, quick), _measure(commits, 10, quick)]


if __name__ == "__main__":
    main(run)
