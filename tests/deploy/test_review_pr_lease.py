"""dream-pr.yml never overwrites a commit pushed to dream/memory while Dream runs.

peter-evans/create-pull-request (v7.0.8, the pinned SHA) fetches the branch itself just before
pushing (src/create-or-update-branch.ts, ``tryFetch``: ``git fetch --force <branch>:refs/remotes/
origin/<branch>``), resets it to the checkout when they differ, and pushes with a plain
``--force-with-lease`` (src/create-pull-request.ts), so its lease is against that fresh fetch, not
against the tip the job started from; it deletes a branch with no diff with ``--force``. The
workflow therefore pushes (or deletes) dream/memory itself first, leased against the tip its
checkout saw, and runs create-pull-request only after that push succeeded, when the branch already
equals the checkout (create-pull-request then reports ``not-updated`` and pushes nothing).

Each test plays the part of the shipped workflow from the Dream step to the create-pull-request
step of dream/memory, as shipped: every step's ``if:`` is evaluated, ``run:`` steps are run with
bash from the example's own text, and create-pull-request is the stand-in act uses
(ci/docker/act/stand-ins/create-pull-request/cpr.py: fetch, then push with a lease against that
fetch, as the real action does), against a bare repository playing GitHub. With the workflow
before the leased step, the reviewer's commit is lost.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from deploy_helpers import REPO, git

FLOW = REPO / "docs/examples/dream-pr.yml"
CPR = REPO / "ci/docker/act/stand-ins/create-pull-request/cpr.py"
BRANCH = "dream/memory"
TOKEN = "token-for-the-test"
# What `${{ }}` expressions in the steps' env and inputs stand for in these runs.
EXPRESSIONS = {"github.token": TOKEN, "env.DEFAULT_BRANCH": "main"}


def job_steps() -> list[dict[str, Any]]:
    return yaml.safe_load(FLOW.read_text(encoding="utf-8"))["jobs"]["dream"]["steps"]


def branch_part(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps after Dream's, up to the create-pull-request step of dream/memory (included)."""
    start = next(i for i, s in enumerate(steps) if s.get("id") == "dream") + 1
    end = next(
        i for i, s in enumerate(steps) if "create-pull-request" in s.get("uses", "") and s["with"]["branch"] == BRANCH
    )
    return steps[start : end + 1]


def condition(expr: str | None, outcomes: dict[str, str], outputs: dict[str, dict[str, str]]) -> bool:
    """A step's `if:`, for the forms the example uses (anything else fails the test)."""
    if expr is None:  # success(): every step so far succeeded
        return all(o in ("success", "skipped") for o in outcomes.values())
    body = re.fullmatch(r"\$\{\{\s*(.*?)\s*\}\}", expr.strip())
    assert body is not None, expr
    for term in (t.strip() for t in body.group(1).split("&&")):
        if term == "!cancelled()":
            continue
        out = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+) == '([^']*)'", term)
        outcome = re.fullmatch(r"steps\.([\w-]+)\.outcome == '(\w+)'", term)
        if out:
            ok = outputs.get(out.group(1), {}).get(out.group(2), "") == out.group(3)
        elif outcome:
            ok = outcomes.get(outcome.group(1), "skipped") == outcome.group(2)
        else:
            raise AssertionError(f"condition not understood by this test: {term!r}")
        if not ok:
            return False
    return True


def value(text: Any) -> str:
    """A step's env or input value as the runner passes it, its `${{ }}` expressions filled in."""
    if isinstance(text, bool):
        return str(text).lower()

    def fill(match: re.Match[str]) -> str:
        assert match.group(1) in EXPRESSIONS, f"expression not known to this test: {match.group(0)}"
        return EXPRESSIONS[match.group(1)]

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", fill, str(text))


class Run:
    """One job after its checkout and Dream step: the steps of `branch_part`, as shipped."""

    def __init__(self, tmp: Path, tree: Path) -> None:
        self.tmp, self.tree = tmp, tree
        self.outcomes: dict[str, str] = {"dream": "success"}
        self.outputs: dict[str, dict[str, str]] = {}
        self.summary = tmp / "step-summary.md"
        self.summary.write_text("", encoding="utf-8")
        self.logs: dict[str, subprocess.CompletedProcess[str]] = {}
        self.cpr: subprocess.CompletedProcess[str] | None = None  # create-pull-request, when it ran
        body = tmp / "dream-summary.md"
        body.write_text("### dream run: ok (exit 0)\n", encoding="utf-8")
        self.outputs["dream"] = {"update-pr": "true", "summary": str(body)}

    def base_env(self) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.tmp),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "DEFAULT_BRANCH": "main",
            "GITHUB_STEP_SUMMARY": str(self.summary),
        }

    def step(self, index: int, step: dict[str, Any]) -> None:
        key = step.get("id") or f"step{index}"
        if not condition(step.get("if"), self.outcomes, self.outputs):
            self.outcomes[key] = "skipped"
            return
        output = self.tmp / f"output-{key}"
        output.write_text("", encoding="utf-8")
        env = {**self.base_env(), "GITHUB_OUTPUT": str(output)}
        if "run" in step:
            env |= {name: value(v) for name, v in (step.get("env") or {}).items()}
            argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
        else:
            assert "create-pull-request" in step["uses"], f"a step this test cannot play: {step['uses']}"
            assert step["with"]["body-path"] == "${{ steps.dream.outputs.summary }}"
            inputs = {name: value(v) for name, v in step["with"].items() if name != "body-path"}
            env |= {
                "INPUT_BRANCH": inputs["branch"],
                "INPUT_BASE": inputs["base"],
                "INPUT_TITLE": inputs["title"],
                "INPUT_BODY_PATH": self.outputs["dream"]["summary"],
                "INPUT_DELETE_BRANCH": inputs.get("delete-branch", "false"),
                "FAKE_GITHUB_PULLS": str(self.tmp / "pulls.json"),
            }
            argv = [sys.executable, str(CPR)]
        proc = subprocess.run(argv, env=env, cwd=self.tree, capture_output=True, text=True, check=False)
        self.logs[key] = proc
        if "uses" in step:
            self.cpr = proc
        self.outcomes[key] = "success" if proc.returncode == 0 else "failure"
        lines = output.read_text(encoding="utf-8").splitlines()
        self.outputs[key] = dict(line.split("=", 1) for line in lines if "=" in line)

    def play(self) -> Run:
        for index, step in enumerate(branch_part(job_steps())):
            self.step(index, step)
        return self

    @property
    def lease_step(self) -> str:
        """The id of the step that pushes dream/memory with a lease (the test fails without one)."""
        ids = [
            s.get("id", "")
            for s in branch_part(job_steps())
            if "--force-with-lease=refs/heads/$BRANCH:$start" in s.get("run", "")
        ]
        assert ids, "no step pushes dream/memory with a lease against the tip the checkout saw"
        return ids[0]


def tip(remote: Path, ref: str = BRANCH) -> str:
    return git(remote, "rev-parse", "-q", "--verify", f"refs/heads/{ref}", check=False)


def updates(remote: Path) -> int:
    """How often dream/memory was written on the remote since it was created (its reflog)."""
    log = remote / "logs/refs/heads" / BRANCH
    return len(log.read_text().splitlines()) if log.exists() else 0


def commit(tree: Path, name: str, text: str, subject: str) -> str:
    (tree / name).write_text(text, encoding="utf-8")
    git(tree, "add", name)
    git(tree, "commit", "-q", "-m", subject)
    return git(tree, "rev-parse", "HEAD")


def remote_with(tmp: Path, branch: bool) -> Path:
    """A bare repository playing GitHub: main with a workspace; dream/memory with one Dream commit."""
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    git(remote, "config", "core.logAllRefUpdates", "always")
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(remote), str(seed))
    commit(seed, "USER.md", "# User\n", "agent: workspace")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    if branch:
        commit(seed, "USER.md", "# User\n\n- fact 1\n", "dream: 1..1: USER.md +1 -0\n\nDream-Range: 1..1")
        git(seed, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    return remote


def job(tmp: Path, remote: Path, dream_commits: bool = True) -> Path:
    """The job's checkout (every branch, as fetch-depth: 0) with the action's continuation and
    Dream's commit: main did not move, so continuing from dream/memory is its tip."""
    tree = tmp / "job"
    git(tmp, "clone", "-q", "--no-single-branch", str(remote), str(tree))
    if git(tree, "rev-parse", "-q", "--verify", f"refs/remotes/origin/{BRANCH}", check=False):
        git(tree, "reset", "-q", "--hard", f"origin/{BRANCH}")
    if dream_commits:
        commit(tree, "MEMORY.md", "- fact 2\n", "dream: 2..2: MEMORY.md +1 -0\n\nDream-Range: 2..2")
    return tree


def reviewer_pushes(tmp: Path, remote: Path, start: str = BRANCH) -> str:
    """A reviewer's fixup pushed to dream/memory while the job runs (after its checkout)."""
    tree = tmp / "reviewer"
    git(tmp, "clone", "-q", str(remote), str(tree))
    git(tree, "checkout", "-q", "-B", BRANCH, f"origin/{start}")
    sha = commit(tree, "USER.md", "# User\n\n- fact 1, reworded by the reviewer\n", "USER.md: reword fact 1")
    git(tree, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    return sha


def test_a_reviewer_commit_pushed_while_dream_runs_is_never_overwritten(tmp_path: Path) -> None:
    """(a) The branch moved after the checkout: the leased push is rejected, the job fails with a
    summary naming the branch, create-pull-request does not run, the reviewer's commit stays the
    tip. (The workflow without the leased step lets create-pull-request overwrite it.)"""
    remote = remote_with(tmp_path, branch=True)
    tree = job(tmp_path, remote)
    fixup = reviewer_pushes(tmp_path, remote)
    run = Run(tmp_path, tree).play()
    assert tip(remote) == fixup, (
        f"the reviewer's commit {fixup[:7]} was overwritten: {BRANCH} is at {tip(remote)[:7]} "
        f"(the job's HEAD is {git(tree, 'rev-parse', 'HEAD')[:7]})"
    )
    step = run.lease_step
    assert run.outcomes[step] == "failure"
    assert "stale info" in run.logs[step].stderr
    summary = run.summary.read_text(encoding="utf-8")
    assert f"### {BRANCH} not updated" in summary
    assert f"pushed to {BRANCH}, or deleted it, while Dream ran" in summary
    assert f"the next run continues from {BRANCH} as it is now" in summary
    assert f"::error::{BRANCH} not updated" in run.logs[step].stdout
    assert run.outputs[step] == {}
    assert run.cpr is None
    assert not (tmp_path / "pulls.json").exists()  # no pull request opened or updated


def test_without_interference_the_push_succeeds_and_create_pull_request_pushes_nothing(tmp_path: Path) -> None:
    """(b) The branch is where the checkout saw it: the leased push moves it to the job's HEAD
    (one update on the remote), and create-pull-request finds it equal and only opens the PR."""
    remote = remote_with(tmp_path, branch=True)
    tree = job(tmp_path, remote)
    before = updates(remote)
    run = Run(tmp_path, tree).play()
    step = run.lease_step
    assert run.outcomes[step] == "success", run.logs[step].stderr
    assert run.outputs[step] == {"pushed": "true"}
    assert tip(remote) == git(tree, "rev-parse", "HEAD")
    assert "leased against" in run.logs[step].stdout
    assert run.cpr is not None and run.cpr.returncode == 0
    assert updates(remote) == before + 1  # the leased push alone: create-pull-request pushed nothing
    assert "created pull request 1" in run.cpr.stdout


def test_a_branch_absent_at_the_start_and_still_absent_is_pushed(tmp_path: Path) -> None:
    """(c) No dream/memory when the job started (lease: it must not exist) and none now: pushed."""
    remote = remote_with(tmp_path, branch=False)
    tree = job(tmp_path, remote)
    run = Run(tmp_path, tree).play()
    step = run.lease_step
    assert run.outcomes[step] == "success", run.logs[step].stderr
    assert "leased against its absence" in run.logs[step].stdout
    assert tip(remote) == git(tree, "rev-parse", "HEAD")
    assert updates(remote) == 1
    assert run.cpr is not None and run.cpr.returncode == 0


def test_a_branch_someone_created_during_the_run_is_kept(tmp_path: Path) -> None:
    """No dream/memory at the start, but someone created it while Dream ran: not replaced."""
    remote = remote_with(tmp_path, branch=False)
    tree = job(tmp_path, remote)
    theirs = reviewer_pushes(tmp_path, remote, start="main")
    run = Run(tmp_path, tree).play()
    assert tip(remote) == theirs, f"{BRANCH}, created during the run, was overwritten"
    assert run.outcomes[run.lease_step] == "failure"
    assert "no longer at its absence" in run.summary.read_text(encoding="utf-8")
    assert run.cpr is None


def merged(tmp: Path, remote: Path) -> None:
    """The reviewer merged the pull request (a merge commit; the branch is left)."""
    tree = tmp / "merger"
    git(tmp, "clone", "-q", str(remote), str(tree))
    git(tree, "merge", "-q", "--no-ff", "-m", "Merge pull request #1", f"origin/{BRANCH}")
    git(tree, "push", "-q", "origin", "HEAD:refs/heads/main")


def test_after_the_merge_the_branch_is_deleted_with_a_lease(tmp_path: Path) -> None:
    """Nothing beyond main (merged, nothing new): the step deletes dream/memory, leased against the
    tip the checkout saw, and create-pull-request (whose deletion is a --force push) does not run."""
    remote = remote_with(tmp_path, branch=True)
    merged(tmp_path, remote)
    tree = job(tmp_path, remote, dream_commits=False)
    git(tree, "reset", "-q", "--hard", "origin/main")  # the action does not continue a merged branch
    run = Run(tmp_path, tree).play()
    step = run.lease_step
    assert run.outcomes[step] == "success", run.logs[step].stderr
    assert tip(remote) == ""
    assert f"{BRANCH} deleted" in run.logs[step].stdout
    assert run.outputs[step] == {}
    assert run.cpr is None


def test_after_the_merge_a_fixup_pushed_during_the_run_is_not_deleted(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, branch=True)
    merged(tmp_path, remote)
    tree = job(tmp_path, remote, dream_commits=False)
    git(tree, "reset", "-q", "--hard", "origin/main")
    fixup = reviewer_pushes(tmp_path, remote)
    run = Run(tmp_path, tree).play()
    assert tip(remote) == fixup, f"the reviewer's commit {fixup[:7]} was deleted with {BRANCH}"
    assert run.outcomes[run.lease_step] == "failure"
    assert run.cpr is None


def test_nothing_to_push_and_no_branch_does_nothing(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, branch=False)
    tree = job(tmp_path, remote, dream_commits=False)
    run = Run(tmp_path, tree).play()
    step = run.lease_step
    assert run.outcomes[step] == "success", run.logs[step].stderr
    assert "nothing to push" in run.logs[step].stdout
    assert tip(remote) == "" and updates(remote) == 0
    assert run.cpr is None


def test_the_lease_is_the_tip_the_checkout_saw() -> None:
    """The step reads refs/remotes/origin/dream/memory, which only the checkout wrote: no step
    before it fetches a branch (the notes fetch names refs/notes/* alone)."""
    steps = job_steps()
    lease = next(i for i, s in enumerate(steps) if "--force-with-lease=refs/heads/$BRANCH:$start" in s.get("run", ""))
    assert 'start="$(git rev-parse -q --verify "refs/remotes/origin/$BRANCH" || true)"' in steps[lease]["run"]
    assert steps[lease]["env"]["BRANCH"] == BRANCH
    for step in steps[1:lease]:
        for line in step.get("run", "").splitlines():
            if re.search(r"\bfetch\b", line):
                assert "'refs/notes/*:refs/notes/*'" in line and "refs/heads" not in line, line
    dream = next(s for s in steps if s.get("id") == "dream")
    assert "fetch" not in str(dream.get("with", {}))
