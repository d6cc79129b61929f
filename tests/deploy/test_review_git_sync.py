"""deploy/kubernetes/dream-git-sync.sh: what it must never do to a review branch, and a SIGTERM
that arrives while it pushes.

Real git against a bare repository as the remote, the real `dream-run` (offline engine) and the
script as a real process; no mocks. A reviewer's commit on `dream/memory` (pushed between two runs
or during one) must survive: the run exits 2 naming the branch instead of force-pushing over it.
A SIGTERM during a push lets that push finish and starts no further chunk.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deploy_helpers import BIN, REPO, agent_append, git, make_remote

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

SCRIPT = REPO / "deploy/kubernetes/dream-git-sync.sh"
REVIEW = "dream/memory"


def sync(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env={**env, **extra}, capture_output=True, text=True, timeout=120, check=False
    )


def base_env(tmp_path: Path, run_env: dict[str, str], remote: Path, pod: str) -> dict[str, str]:
    return {
        **run_env,
        "DREAM_GIT_URL": str(remote),
        "DREAM_GIT_DIR": str(tmp_path / pod / "repo"),
        "DREAM_MODEL": "offline",
        "GIT_AUTHOR_NAME": "x",
        "GIT_AUTHOR_EMAIL": "x@localhost",
        "GIT_COMMITTER_NAME": "x",
        "GIT_COMMITTER_EMAIL": "x@localhost",
    }


def remote_sha(remote: Path, ref: str) -> str:
    return git(remote, "--git-dir", str(remote), "rev-parse", ref)


REVIEWER_SH = """\
set -e
export GIT_AUTHOR_NAME=reviewer GIT_AUTHOR_EMAIL=reviewer@localhost
export GIT_COMMITTER_NAME=reviewer GIT_COMMITTER_EMAIL=reviewer@localhost GIT_CONFIG_NOSYSTEM=1
rm -rf "$2"
git clone -q -b dream/memory "$1" "$2"
echo "- Reviewer's correction: the user is called Sam." >> "$2/USER.md"
git -C "$2" commit -q -am "review: fix the user's name"
git -C "$2" push -q origin HEAD:refs/heads/dream/memory
"""


def reviewer_script(tmp_path: Path) -> Path:
    path = tmp_path / "reviewer.sh"
    path.write_text(REVIEWER_SH, encoding="utf-8")
    return path


def first_review_run(tmp_path: Path, run_env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """Run 1: main has entries 1-3; the job pushes main + Dream's commit to dream/memory."""
    remote = make_remote(tmp_path, run_env, range(1, 4))
    env = {**base_env(tmp_path, run_env, remote, "pod1"), "DREAM_PUSH_BRANCH": REVIEW}
    assert sync(env, "clone").returncode == 0
    first = sync(env, "run")
    assert first.returncode == 0, first.stderr
    return remote, env


def test_a_reviewers_commit_pushed_between_runs_is_never_overwritten(tmp_path: Path, run_env: dict[str, str]) -> None:
    """A reviewer pushes a fixup to dream/memory; the agent pushes entry 4 to main; the next run
    refuses to rebuild the branch over the fixup: exit 2, the branch named on stderr, the remote's
    branch untouched (and Dream not even started, so nothing is paid for)."""
    remote, env = first_review_run(tmp_path, run_env)
    subprocess.run(["bash", str(reviewer_script(tmp_path)), str(remote), str(tmp_path / "reviewer")], check=True)
    fixup = remote_sha(remote, REVIEW)
    agent_append(tmp_path, remote, run_env, range(4, 5))
    started = tmp_path / "dream-started"
    wrapper = tmp_path / "dream-run-wrapper"
    wrapper.write_text(f'#!/usr/bin/env bash\ntouch "{started}"\nexec "{BIN / "dream-run"}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    env["DREAM_GIT_DIR"] = str(tmp_path / "pod2" / "repo")
    assert sync(env, "clone").returncode == 0
    second = sync(env, "run", DREAM_RUN=str(wrapper))
    assert remote_sha(remote, REVIEW) == fixup, second.stderr  # still the branch's tip
    assert second.returncode == 2, second.stderr
    assert REVIEW in second.stderr and fixup[:7] in second.stderr, second.stderr
    assert "not made by Dream" in second.stderr, second.stderr
    assert "merge" in second.stderr  # says what to do
    assert not started.exists(), "Dream ran although its result could not be pushed"


def test_a_reviewers_commit_pushed_during_a_run_is_never_overwritten(tmp_path: Path, run_env: dict[str, str]) -> None:
    """The reviewer pushes to dream/memory while the second run's Dream works: the push, with a
    lease on what the run fetched, is rejected; the run exits 2 naming the branch; the fixup stays."""
    remote, env = first_review_run(tmp_path, run_env)
    agent_append(tmp_path, remote, run_env, range(4, 5))
    wrapper = tmp_path / "dream-run-reviewer"
    wrapper.write_text(
        "#!/usr/bin/env bash\nset -e\n"
        f'if [ ! -e "{tmp_path / "reviewer"}" ]; then '  # the first chunk only
        f'bash "{reviewer_script(tmp_path)}" "{remote}" "{tmp_path / "reviewer"}" >/dev/null 2>&1; fi\n'
        f'exec "{BIN / "dream-run"}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    env["DREAM_GIT_DIR"] = str(tmp_path / "pod2" / "repo")
    assert sync(env, "clone").returncode == 0
    second = sync(env, "run", DREAM_RUN=str(wrapper))
    fixup = git(tmp_path / "reviewer", "rev-parse", "HEAD")
    assert remote_sha(remote, REVIEW) == fixup, second.stderr
    assert second.returncode == 2, second.stderr
    assert REVIEW in second.stderr and "not made by Dream" in second.stderr, second.stderr


def test_a_merged_review_branch_is_rebuilt_again(tmp_path: Path, run_env: dict[str, str]) -> None:
    """Once the pull request is squash-merged (reviewer's fixup included), the branch holds nothing
    main lacks: the next run rebuilds it from main as before."""
    remote, env = first_review_run(tmp_path, run_env)
    subprocess.run(["bash", str(reviewer_script(tmp_path)), str(remote), str(tmp_path / "reviewer")], check=True)
    merger = tmp_path / "merger"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(merger))
    git(merger, "merge", "-q", "--squash", f"origin/{REVIEW}")
    git(merger, "commit", "-q", "-m", "Merge the Dream pull request (squash)")
    git(merger, "push", "-q", "origin", "HEAD:refs/heads/main")
    agent_append(tmp_path, remote, run_env, range(4, 5))
    env["DREAM_GIT_DIR"] = str(tmp_path / "pod2" / "repo")
    assert sync(env, "clone").returncode == 0
    second = sync(env, "run")
    assert second.returncode == 0, second.stderr
    main_tip = remote_sha(remote, "main")
    assert git(remote, "--git-dir", str(remote), "merge-base", "--is-ancestor", main_tip, REVIEW, check=False) == ""
    review = git(remote, "--git-dir", str(remote), "show", f"{REVIEW}:memory/.dream_cursor")
    assert review.strip() == "4"


def test_sigterm_during_a_push_starts_no_further_chunk(tmp_path: Path, run_env: dict[str, str]) -> None:
    """Three batches of one entry, one chunk each. SIGTERM arrives while the first chunk's push is
    in the remote's pre-receive hook: the push completes, no second dream-run starts, exit 143."""
    remote = make_remote(tmp_path, run_env, range(1, 4))
    env = base_env(tmp_path, run_env, remote, "pod")
    assert sync(env, "clone").returncode == 0
    in_push, release = tmp_path / "in-push", tmp_path / "release"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        f'#!/bin/sh\ntouch "{in_push}"\n'
        f'i=0; while [ ! -e "{release}" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done\n',
        encoding="utf-8",
    )
    hook.chmod(0o755)
    marks = tmp_path / "marks"
    marks.mkdir()
    wrapper = tmp_path / "dream-run-counting"
    wrapper.write_text(
        "#!/usr/bin/env bash\n"
        f'n=$(ls "{marks}" | wc -l); touch "{marks}/started-$((n + 1))"\n'
        f'exec "{BIN / "dream-run"}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "run", "--batch-size", "1"],
        env={**env, "DREAM_RUN": str(wrapper)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not in_push.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the first push never reached the remote"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # the script only, as tini forwards it
        time.sleep(0.2)
        release.touch()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, stderr
    assert sorted(p.name for p in marks.iterdir()) == ["started-1"], stderr
    assert "stopped (SIGTERM)" in stderr
    # The push that was under way completed: batch 1 is on the remote, nothing more.
    assert git(remote, "--git-dir", str(remote), "show", "main:memory/.dream_cursor").strip() == "1"
