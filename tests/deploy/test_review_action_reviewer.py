"""The GitHub Action's review branch (``continue-from: dream/memory``) never loses a reviewer's commit.

Real git against a bare repository as the remote, deploy/github-action/dream_action.py run as a real
process the way action.yml runs it, the real ``dream-run`` (offline engine), and the
create-pull-request stand-in (ci/docker/act/stand-ins/create-pull-request/cpr.py), which runs only
when the action says ``update-pr=true``, as in docs/examples/dream-pr.yml. A reviewer's fixup on the
branch is kept when the branch rebases (Dream builds on top of it); when it no longer rebases, the
action refuses to rebuild the branch (exit 2, naming the branch and the commit) instead of letting
create-pull-request force-push a rebuilt branch over it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from deploy_helpers import BIN, REPO, agent_append, checkout, dream_cmd, fact, fact_counts, git

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

ACTION = REPO / "deploy/github-action/dream_action.py"
CPR = REPO / "ci/docker/act/stand-ins/create-pull-request/cpr.py"
BRANCH = "dream/memory"
FIXUP = "- Reviewer's correction: the user is called Sam."


@pytest.fixture
def env(run_env: dict[str, str]) -> dict[str, str]:
    return {**run_env, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@localhost"}


def make_remote(tmp: Path, env: dict[str, str]) -> Path:
    """A bare repository whose main holds a workspace with one history entry (one batch)."""
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(remote), str(seed))
    assert dream_cmd(env, "init", "--workspace", str(seed)).returncode == 0
    (seed / "dream.json").write_text(json.dumps({"agents": {"defaults": {"dream": {"maxBatchSize": 1}}}}))
    assert dream_cmd(env, "append", "--workspace", str(seed), fact(1)).returncode == 0
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "agent: workspace and history")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    return remote


def scheduled_run(tmp: Path, remote: Path, env: dict[str, str], name: str) -> tuple[int, dict[str, str], str]:
    """dream-pr.yml's checkout (every branch), the action's run step, then create-pull-request when
    (and only when) the action allows it: (exit code, step outputs, stderr)."""
    tree = tmp / name
    git(tmp, "clone", "-q", "--no-single-branch", str(remote), str(tree))  # fetch-depth: 0
    runner = tmp / f"{name}-runner"
    runner.mkdir()
    step_env = {
        **env,
        "DREAM_MODEL": "offline",
        "DREAM_ACTION_VENV": str(BIN.parent),
        "DREAM_ACTION_WORKSPACE": str(tree),
        "DREAM_ACTION_CONTINUE_FROM": BRANCH,
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(runner / "output"),
        "GITHUB_STEP_SUMMARY": str(runner / "summary.md"),
    }
    proc = subprocess.run(
        [sys.executable, str(ACTION)], env=step_env, cwd=tree, capture_output=True, text=True, timeout=180, check=False
    )
    outputs = dict(line.split("=", 1) for line in (runner / "output").read_text().splitlines())
    if outputs.get("update-pr") == "true":  # the workflow's `if:` on create-pull-request
        cpr_env = {
            **env,
            "INPUT_BRANCH": BRANCH,
            "INPUT_BASE": "main",
            "INPUT_BODY_PATH": outputs["summary"],
            "INPUT_DELETE_BRANCH": "true",
            "FAKE_GITHUB_PULLS": str(tmp / "pulls.json"),
        }
        cpr = subprocess.run([sys.executable, str(CPR)], env=cpr_env, cwd=tree, capture_output=True, text=True)
        assert cpr.returncode == 0, cpr.stderr
    return proc.returncode, outputs, proc.stderr


def reviewer_pushes_fixup(tmp: Path, remote: Path) -> str:
    """A reviewer checks out the review branch, corrects USER.md by hand and pushes: its sha."""
    reviewer = checkout(tmp, remote, f"origin/{BRANCH}", "reviewer")
    with (reviewer / "USER.md").open("a", encoding="utf-8") as handle:
        handle.write(FIXUP + "\n")
    git(reviewer, "commit", "-q", "-am", "review: fix the user's name")
    git(reviewer, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    return git(reviewer, "rev-parse", "HEAD")


def main_edits_user_md(tmp: Path, remote: Path) -> None:
    """Someone rewrites USER.md on main, so the branch's commits no longer rebase onto it."""
    editor = checkout(tmp, remote, "main", "editor")
    (editor / "USER.md").write_text("# User\n\nEdited by hand on main.\n", encoding="utf-8")
    git(editor, "commit", "-q", "-am", "hand edit")
    git(editor, "push", "-q", "origin", "HEAD:refs/heads/main")


def test_a_reviewers_fixup_is_not_force_pushed_over_when_the_branch_no_longer_rebases(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The branch holds a reviewer's fixup and no longer rebases onto main. Rebuilding it from main
    (and letting create-pull-request force-push that) would drop the fixup with exit 0; instead the
    step exits 2 before Dream runs, names the branch and the commit, says how to settle it, and
    sets update-pr=false, so the remote's branch is left exactly as the reviewer pushed it."""
    remote = make_remote(tmp_path, env)
    code, outs, stderr = scheduled_run(tmp_path, remote, env, "run1")
    assert code == 0, stderr
    fixup = reviewer_pushes_fixup(tmp_path, remote)
    main_edits_user_md(tmp_path, remote)
    agent_append(tmp_path, remote, env, range(2, 3))

    code, outs, stderr = scheduled_run(tmp_path, remote, env, "run2")

    lost = f"exit {code}, update-pr={outs.get('update-pr')}: the reviewer's commit was force-pushed over"
    assert git(remote, "rev-parse", f"refs/heads/{BRANCH}") == fixup, lost  # untouched
    assert code == 2, stderr
    assert outs["update-pr"] == "false" and outs["continued"] == "false" and outs["exit-code"] == "2"
    assert f"{fixup[:7]} review: fix the user's name" in stderr
    assert f"Not replacing {BRANCH}" in stderr
    assert "Merge the pull request" in stderr and f"git push origin --delete {BRANCH}" in stderr
    assert "dream-run" not in stderr.split("error:", 1)[1]  # Dream never started (nothing paid for)
    summary = (tmp_path / "run2-runner" / "summary.md").read_text(encoding="utf-8")
    assert "refused (exit 2)" in summary and fixup[:7] in summary


def test_a_reviewers_fixup_that_rebases_is_kept_and_dreamt_on_top(tmp_path: Path, env: dict[str, str]) -> None:
    """The branch holds a reviewer's fixup and main moved without conflict: the action continues
    from the branch, the fixup is rebased onto main with Dream's commits, the new entry is dreamt
    on top, and the pushed branch still carries the fixup (guard: this worked before too)."""
    remote = make_remote(tmp_path, env)
    code, _, stderr = scheduled_run(tmp_path, remote, env, "run1")
    assert code == 0, stderr
    reviewer_pushes_fixup(tmp_path, remote)
    agent_append(tmp_path, remote, env, range(2, 3))

    code, outs, stderr = scheduled_run(tmp_path, remote, env, "run2")

    assert code == 0, stderr
    assert outs["continued"] == "true" and outs["update-pr"] == "true"
    subjects = git(remote, "log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert "review: fix the user's name" in subjects
    review = checkout(tmp_path, remote, f"origin/{BRANCH}", "after")
    assert FIXUP in (review / "USER.md").read_text(encoding="utf-8")
    assert fact_counts(review, range(1, 3)) == {1: 1, 2: 1}


def test_a_branch_of_dreams_own_commits_is_still_rebuilt_after_a_conflict(tmp_path: Path, env: dict[str, str]) -> None:
    """Only Dream's commits on the branch (nothing a person made is lost): the conflict still falls
    back to rebuilding from main, exit 0, and the pull request is updated."""
    remote = make_remote(tmp_path, env)
    scheduled_run(tmp_path, remote, env, "run1")
    main_edits_user_md(tmp_path, remote)
    agent_append(tmp_path, remote, env, range(2, 3))

    code, outs, stderr = scheduled_run(tmp_path, remote, env, "run2")

    assert code == 0, stderr
    assert "does not rebase onto the checkout" in stderr and "rebuilds the branch" in stderr
    assert outs["update-pr"] == "true"
    review = checkout(tmp_path, remote, f"origin/{BRANCH}", "after")
    assert fact_counts(review, range(1, 3)) == {1: 1, 2: 1}
    assert "Edited by hand on main." in (review / "USER.md").read_text(encoding="utf-8")


def _action_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dream_action_under_test", ACTION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("parents", "subject", "trailer", "own"),
    [
        ("a", "dream: 2 facts from 1..3", "1..3", True),
        ("a", "dream: compact history (12 entries)", "", True),
        ("a", "memory: init", "", True),
        ("a", "dream: something without a range", "", False),
        ("a b", "dream: 2 facts from 1..3", "1..3", False),  # a merge is never Dream's
        ("a", "dream: apply held 2-2.1: SOUL.md", "2..2", False),  # `dream review accept`
        ("a", "dream: reject held 2-2.1", "2..2", False),
        ("a", "dream: revert abc1234", "1..3", False),
        ("a", "review: fix the user's name", "", False),
    ],
)
def test_which_commits_are_dreams_own(parents: str, subject: str, trailer: str, own: bool) -> None:
    """The same rule as deploy/kubernetes/dream-git-sync.sh's review_foreign."""
    assert _action_module().is_dreams_own(parents, subject, trailer) is own
