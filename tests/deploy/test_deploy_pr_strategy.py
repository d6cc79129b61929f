"""Dream as pull requests: the review branch is rebuilt from the default branch on every run.

Simulated against a bare repository, as docs/examples/dream-pr.yml runs on GitHub:
- the job checks out the default branch (main) fresh, runs Dream, and the PR branch dream/memory
  becomes main + this run's commits, force-pushed (what create-pull-request does with commits made
  on the checked-out branch; `dream-run --branch dream/memory` + `git push --force` is the same);
- two scheduled runs before the pull request is merged: the second starts again from main's
  cursor, so the branch holds every pending entry's facts exactly once, including history that
  reached main in between; after the merge, the next run starts where the merged branch ended.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from deploy_helpers import BIN, agent_append, checkout, fact_counts, git, make_remote


def dream_run(env: dict[str, str], tree: Path, *args: str) -> dict:
    proc = subprocess.run(
        [str(BIN / "dream-run"), "--workspace", str(tree), *args],
        env={**env, "DREAM_MODEL": "offline"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def scheduled_run(tmp: Path, remote: Path, env: dict[str, str], name: str, *, use_branch_flag: bool) -> dict:
    """One run of the PR workflow: fresh checkout of main, Dream, force-update dream/memory."""
    tree = checkout(tmp, remote, "main", name)
    if use_branch_flag:
        report = dream_run(env, tree, "--branch", "dream/memory")
        assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == "dream/memory"
    else:
        report = dream_run(env, tree)
    if report["changed"]:
        git(tree, "push", "-q", "--force", "origin", "HEAD:refs/heads/dream/memory")
    return report


@pytest.mark.parametrize("use_branch_flag", [False, True], ids=["commits-on-checkout", "dream-run--branch"])
def test_two_runs_before_merge_then_merge(tmp_path: Path, run_env: dict[str, str], use_branch_flag: bool) -> None:
    remote = make_remote(tmp_path, run_env, range(1, 4))

    first = scheduled_run(tmp_path, remote, run_env, "run1", use_branch_flag=use_branch_flag)
    assert (first["cursor_before"], first["cursor_after"]) == (0, 3)

    # History reaches main while the pull request is open.
    agent_append(tmp_path, remote, run_env, range(4, 6))

    second = scheduled_run(tmp_path, remote, run_env, "run2", use_branch_flag=use_branch_flag)
    assert (second["cursor_before"], second["cursor_after"]) == (0, 5)  # rebuilt from main's cursor

    review = checkout(tmp_path, remote, "origin/dream/memory", "review")
    main_tip = git(tmp_path, "--git-dir", str(remote), "rev-parse", "main")
    assert git(review, "merge-base", "--is-ancestor", main_tip, "HEAD", check=False) == ""
    ahead = git(review, "log", "--format=%H", f"{main_tip}..HEAD").split()
    assert ahead == list(reversed(second["commits"]))  # only the second run's commits
    assert (review / "memory/.dream_cursor").read_text().strip() == "5"
    assert fact_counts(review, range(1, 6)) == dict.fromkeys(range(1, 6), 1)

    # The same result as one run over all of main's history: nothing from run 1 lingers.
    reference = checkout(tmp_path, remote, "main", "reference")
    dream_run(run_env, reference)
    for rel in ("USER.md", "memory/MEMORY.md", "SOUL.md", "memory/.dream_cursor"):
        assert (review / rel).read_text() == (reference / rel).read_text(), rel

    # Merge the pull request (fast-forward), new history arrives, the next run continues.
    git(review, "push", "-q", "origin", "HEAD:refs/heads/main")
    agent_append(tmp_path, remote, run_env, range(6, 7))
    third = scheduled_run(tmp_path, remote, run_env, "run3", use_branch_flag=use_branch_flag)
    assert (third["cursor_before"], third["cursor_after"]) == (5, 6)
    after = checkout(tmp_path, remote, "origin/dream/memory", "after")
    assert fact_counts(after, range(1, 7)) == dict.fromkeys(range(1, 7), 1)


def test_nothing_pending_opens_nothing(tmp_path: Path, run_env: dict[str, str]) -> None:
    """A run with no new history reports changed=false: the workflow opens or updates no PR."""
    remote = make_remote(tmp_path, run_env, range(1, 2))
    tree = checkout(tmp_path, remote, "main", "t")
    dream_run(run_env, tree)
    git(tree, "push", "-q", "origin", "HEAD:refs/heads/main")
    again = checkout(tmp_path, remote, "main", "t2")
    report = dream_run(run_env, again)
    assert report["changed"] is False
    assert report["commits"] == []
