"""Dream as pull requests: each scheduled run continues from the open review branch.

Simulated against a bare repository, as docs/examples/dream-pr.yml runs on GitHub: a fresh checkout
of main with every branch fetched (fetch-depth: 0), the action's run step
(deploy/github-action/dream_action.py with ``continue-from: dream/memory``) over the real
``dream-run`` (offline engine), then the create-pull-request stand-in that act uses too
(ci/docker/act/stand-ins/create-pull-request/cpr.py: the branch becomes the checkout's HEAD; no
diff with main deletes it). ci/steps/70-action.sh runs the same flow under act with the scripted
server counting model requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from deploy_helpers import BIN, REPO, agent_append, checkout, dream_cmd, fact, fact_counts, git

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

ACTION = REPO / "deploy/github-action/dream_action.py"
CPR = REPO / "ci/docker/act/stand-ins/create-pull-request/cpr.py"
SOUL_ENTRY = "- [soul] Speak in a calm and concise voice."
CONFIG = {"agents": {"defaults": {"dream": {"holdSoulChanges": True, "maxBatchSize": 1}}}}


def make_remote(tmp: Path, env: dict[str, str], entries: list[str]) -> Path:
    """A bare repository whose main holds a workspace that holds SOUL.md changes for review."""
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(remote), str(seed))
    assert dream_cmd(env, "init", "--workspace", str(seed)).returncode == 0
    (seed / "dream.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    for text in entries:
        assert dream_cmd(env, "append", "--workspace", str(seed), text).returncode == 0
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "agent: workspace and history")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    return remote


def workflow_step(tree: Path, env: dict[str, str], name: str, flow: str = "dream-pr.yml") -> str:
    """A named `run` step of the shipped example, as shipped, in the run's checkout."""
    workflow = yaml.safe_load((REPO / "docs/examples" / flow).read_text(encoding="utf-8"))
    step = next(s for s in workflow["jobs"]["dream"]["steps"] if s.get("name") == name)
    step_env = {**env, "GITHUB_TOKEN": "token-for-the-test", "DEFAULT_BRANCH": "main"}
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], env=step_env, cwd=tree, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def scheduled_run(tmp: Path, remote: Path, env: dict[str, str], name: str) -> tuple[dict, dict[str, str], str]:
    """One run of dream-pr.yml: checkout (all branches), fetching the provenance notes, the Dream
    step, pushing dream/memory with a lease, create-pull-request (only after that push), pushing
    the provenance notes. A pull request whose branch the lease step deleted is closed, as GitHub
    closes it."""
    tree = tmp / name
    git(tmp, "clone", "-q", "--no-single-branch", str(remote), str(tree))  # fetch-depth: 0
    workflow_step(tree, env, "Fetch the provenance notes")
    runner = tmp / f"{name}-runner"
    runner.mkdir()
    step_env = {
        **env,
        "DREAM_MODEL": "offline",
        "DREAM_ACTION_VENV": str(BIN.parent),
        "DREAM_ACTION_WORKSPACE": str(tree),
        "DREAM_ACTION_CONTINUE_FROM": "dream/memory",
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(runner / "output"),
    }
    proc = subprocess.run(
        [sys.executable, str(ACTION)], env=step_env, cwd=tree, capture_output=True, text=True, timeout=180, check=False
    )
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in (runner / "output").read_text().splitlines())
    assert outputs["update-pr"] == "true"
    lease_output = runner / "lease-output"
    lease_output.touch()
    lease_env = {"BRANCH": "dream/memory", "GITHUB_OUTPUT": str(lease_output)}
    workflow_step(
        tree, {**env, **lease_env, "GITHUB_STEP_SUMMARY": str(runner / "summary.md")}, "Push dream/memory with a lease"
    )
    if "pushed=true" in lease_output.read_text().splitlines():  # the workflow's `if:` on create-pull-request
        cpr = subprocess.run(
            [sys.executable, str(CPR)],
            env={
                **env,
                "INPUT_BRANCH": "dream/memory",
                "INPUT_BASE": "main",
                "INPUT_TITLE": "dream: memory updates",
                "INPUT_BODY_PATH": outputs["summary"],
                "INPUT_DELETE_BRANCH": "true",
                "FAKE_GITHUB_PULLS": str(tmp / "pulls.json"),
            },
            cwd=tree,
            capture_output=True,
            text=True,
            check=False,
        )
        assert cpr.returncode == 0, cpr.stderr
    elif "dream/memory" not in remote_branches(remote) and (tmp / "pulls.json").exists():
        store = json.loads((tmp / "pulls.json").read_text())
        for pull in store["pulls"]:
            if pull["head"] == "dream/memory" and pull["state"] == "open":
                pull["state"] = "closed"
        (tmp / "pulls.json").write_text(json.dumps(store))
    workflow_step(tree, env, "Push the provenance notes")
    return json.loads(proc.stdout), outputs, proc.stderr


def pulls(tmp: Path) -> list[dict]:
    return json.loads((tmp / "pulls.json").read_text())["pulls"]


def remote_branches(remote: Path) -> list[str]:
    return git(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


@pytest.fixture
def env(run_env: dict[str, str]) -> dict[str, str]:
    return {**run_env, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@localhost"}


def test_a_held_batch_reaches_the_reviewer_and_is_never_dreamt_again(tmp_path: Path, env: dict[str, str]) -> None:
    """Run 1: batch 1 lands, batch 2 (a SOUL.md change) is held; the pull request carries the hold
    record and the cursor past it, and its body lists the hold. Run 2, nothing new: Dream continues
    from the branch's cursor and calls no model; the body still lists the hold. Run 3, after the
    agent pushed entry 3 to main: only entry 3 is dreamt, on top of the branch."""
    remote = make_remote(tmp_path, env, [fact(1), SOUL_ENTRY])

    first, outs, _ = scheduled_run(tmp_path, remote, env, "run1")
    assert first["status"] == "held"
    assert (first["cursor_before"], first["cursor_after"]) == (0, 2)
    (held,) = first["held"]
    assert outs["held"] == "1"
    review = checkout(tmp_path, remote, "origin/dream/memory", "review1")
    assert (review / "memory/.dream_held" / held["id"] / "change.json").is_file()
    assert (review / "memory/.dream_cursor").read_text().strip() == "2"
    (pr,) = pulls(tmp_path)
    assert pr["state"] == "open"
    assert f"`{held['id']}` (this run)" in pr["body"]
    assert "| held for review | 1 (1 held by this run) |" in pr["body"]

    second, outs, stderr = scheduled_run(tmp_path, remote, env, "run2")
    assert "continuing from dream/memory" in stderr
    assert outs["continued"] == "true"
    assert second["status"] == "nothing_to_do"
    assert second["cursor_before"] == 2
    assert second["usage"]["llm_calls"] == 0
    (pr,) = pulls(tmp_path)
    assert f"`{held['id']}` cursors" in pr["body"]  # still listed, from the record on the branch
    assert "Pending review on `dream/memory`** (2 commit(s)" in pr["body"]

    agent_append(tmp_path, remote, env, range(3, 4))
    third, outs, _ = scheduled_run(tmp_path, remote, env, "run3")
    assert outs["continued"] == "true"
    assert (third["cursor_before"], third["cursor_after"]) == (2, 3)
    assert third["entries_processed"] == 1
    review = checkout(tmp_path, remote, "origin/dream/memory", "review3")
    main_tip = git(remote, "rev-parse", "main")
    assert git(review, "merge-base", "--is-ancestor", main_tip, "HEAD", check=False) == ""
    assert len(git(review, "log", "--format=%H", f"{main_tip}..HEAD").split()) == 3
    assert fact_counts(review, range(1, 4)) == {1: 1, 2: 0, 3: 1}
    assert (review / "memory/.dream_held" / held["id"] / "change.json").is_file()
    assert len(pulls(tmp_path)) == 1  # one pull request, updated, never a second


@pytest.mark.parametrize("merge", ["merge-commit", "squash"])
def test_after_the_merge_a_run_with_nothing_new_deletes_the_branch(
    tmp_path: Path, env: dict[str, str], merge: str
) -> None:
    """The reviewer merges (a merge commit, or a squash); the next run has nothing new: it calls no
    model, and the branch is deleted (its pull request closed) instead of lingering."""
    remote = make_remote(tmp_path, env, [fact(1), fact(2)])
    scheduled_run(tmp_path, remote, env, "run1")
    reviewer = checkout(tmp_path, remote, "main", "reviewer")
    git(reviewer, "fetch", "-q", "origin", "dream/memory")
    if merge == "squash":
        git(reviewer, "merge", "-q", "--squash", "origin/dream/memory")
        git(reviewer, "commit", "-q", "-m", squash_message(reviewer, "dream/memory", "dream: memory updates (#1)"))
    else:
        git(reviewer, "merge", "-q", "--no-ff", "-m", "Merge pull request #1", "origin/dream/memory")
    git(reviewer, "push", "-q", "origin", "HEAD:refs/heads/main")
    assert "dream/memory" in remote_branches(remote)

    after, outs, _ = scheduled_run(tmp_path, remote, env, "run2")
    assert after["status"] == "nothing_to_do"
    assert after["usage"]["llm_calls"] == 0
    assert outs["continued"] == "false"
    assert remote_branches(remote) == ["main"]
    assert pulls(tmp_path)[0]["state"] == "closed"


def test_a_branch_that_no_longer_rebases_is_rebuilt_from_main(tmp_path: Path, env: dict[str, str]) -> None:
    """Someone edits the branch and main in conflicting ways: the continuation falls back to
    rebuilding from main (the old strategy), so the pull request still covers all pending history
    exactly once."""
    remote = make_remote(tmp_path, env, [fact(1)])
    scheduled_run(tmp_path, remote, env, "run1")
    editor = checkout(tmp_path, remote, "main", "editor")
    (editor / "USER.md").write_text("# User\n\nEdited by hand on main.\n", encoding="utf-8")
    git(editor, "add", "-A")
    git(editor, "commit", "-q", "-m", "hand edit")
    git(editor, "push", "-q", "origin", "HEAD:refs/heads/main")
    agent_append(tmp_path, remote, env, range(2, 3))

    report, outs, stderr = scheduled_run(tmp_path, remote, env, "run2")
    assert "does not rebase onto the checkout" in stderr
    assert outs["continued"] == "false"
    assert report["cursor_before"] == 0
    review = checkout(tmp_path, remote, "origin/dream/memory", "review")
    assert fact_counts(review, range(1, 3)) == {1: 1, 2: 1}
    assert "Edited by hand on main." in (review / "USER.md").read_text()


def test_dream_run_branch_flag_rebuilds_for_other_ci_systems(tmp_path: Path, env: dict[str, str]) -> None:
    """Without the action: `dream-run --branch dream/memory` on a fresh checkout of main commits on
    that branch (created from HEAD), for `git push --force` to a review branch."""
    remote = make_remote(tmp_path, env, [fact(1), fact(2)])
    tree = checkout(tmp_path, remote, "main", "t")
    proc = subprocess.run(
        [str(BIN / "dream-run"), "--workspace", str(tree), "--branch", "dream/memory"],
        env={**env, "DREAM_MODEL": "offline"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == "dream/memory"
    assert git(tree, "rev-parse", "main") == git(remote, "rev-parse", "main")
    assert fact_counts(tree, range(1, 3)) == {1: 1, 2: 1}
    assert os.path.exists(tree / "memory/.dream_cursor")


def review_step(tmp: Path, tree: Path, env: dict[str, str], held: str, name: str) -> None:
    """dream-pr.yml's review step as shipped (its `run` script, read from the example) and the
    create-pull-request stand-in for dream/review, in the run's checkout."""
    flow = yaml.safe_load((REPO / "docs/examples/dream-pr.yml").read_text(encoding="utf-8"))
    step = next(s for s in flow["jobs"]["dream"]["steps"] if s.get("id") == "review")
    runner = tmp / f"{name}-review"
    runner.mkdir()
    step_env = {
        **env,
        "DREAM": str(BIN / "dream"),
        "HELD": held,
        "DEFAULT_BRANCH": "main",
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(runner / "output"),
    }
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], env=step_env, cwd=tree, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in (runner / "output").read_text().splitlines())
    cpr_env = {
        **env,
        "INPUT_BRANCH": "dream/review",
        "INPUT_BASE": "main",
        "INPUT_TITLE": "dream: changes held for review",
        "INPUT_BODY_PATH": outputs["body"],
        "INPUT_DELETE_BRANCH": "true",
        "FAKE_GITHUB_PULLS": str(tmp / "pulls.json"),
    }
    cpr = subprocess.run([sys.executable, str(CPR)], env=cpr_env, cwd=tree, capture_output=True, text=True)
    assert cpr.returncode == 0, cpr.stderr


def test_a_squash_cut_to_its_title_is_dreamt_again_and_says_why(tmp_path: Path, env: dict[str, str]) -> None:
    """A squash message without the Dream commits' bodies is a commit not of Dream's moving the
    cursor ahead: the next run names it and dreams those entries again, adding no fact twice."""
    remote = make_remote(tmp_path, env, [fact(1), fact(2)])
    scheduled_run(tmp_path, remote, env, "run1")
    reviewer = checkout(tmp_path, remote, "main", "reviewer")
    git(reviewer, "fetch", "-q", "origin", "dream/memory")
    git(reviewer, "merge", "-q", "--squash", "origin/dream/memory")
    git(reviewer, "commit", "-q", "-m", "dream: memory updates (#1)")
    git(reviewer, "push", "-q", "origin", "HEAD:refs/heads/main")
    squash = git(reviewer, "rev-parse", "--short=10", "HEAD").strip()

    after, _, _ = scheduled_run(tmp_path, remote, env, "run2")
    (note,) = [n for n in after["notes"] if "memory/.dream_cursor was moved" in n]
    assert f"by commit {squash} (dream: memory updates (#1))" in note and "entries 1..2 are still dreamt" in note
    assert after["status"] == "ok" and after["usage"]["llm_calls"] == 2
    assert fact_counts(checkout(tmp_path, remote, "origin/dream/memory", "after"), range(1, 3)) == {1: 1, 2: 1}


def squash_message(reviewer: Path, branch: str, title: str) -> str:
    """GitHub's default squash commit message: one commit's own message, or the pull request's
    title and each commit as "* subject" with its body (Dream's Dream-Range trailers among them)."""
    commits = git(reviewer, "log", "--reverse", "--format=%H", f"HEAD..origin/{branch}").split()
    if len(commits) == 1:
        return git(reviewer, "log", "-1", "--format=%B", commits[0])
    parts = [title, ""]
    for sha in commits:
        subject, body = git(reviewer, "log", "-1", "--format=%s", sha), git(reviewer, "log", "-1", "--format=%b", sha)
        parts += [f"* {subject.strip()}", "", *([body.strip(), ""] if body.strip() else [])]
    return "\n".join(parts).rstrip() + "\n"


def merge(tmp: Path, remote: Path, branch: str, name: str) -> None:
    reviewer = checkout(tmp, remote, "main", name)
    git(reviewer, "fetch", "-q", "origin", branch)
    git(reviewer, "merge", "-q", "--no-ff", "-m", f"Merge pull request ({branch})", f"origin/{branch}")
    git(reviewer, "push", "-q", "origin", "HEAD:refs/heads/main")


def test_held_changes_get_a_review_pull_request_and_additions_merge_on_their_own(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Run 1: the fact lands on dream/memory, the SOUL.md change is held, and a second pull request
    from dream/review holds it accepted. The Dream pull request merges alone: main gets the fact,
    not the SOUL.md change. Run 2 rebuilds dream/review on main (the SOUL.md change only); merging
    it accepts the change. Run 3, nothing held: dream/review is deleted, its pull request closed."""
    remote = make_remote(tmp_path, env, [fact(1), SOUL_ENTRY])
    soul_before = (checkout(tmp_path, remote, "main", "before") / "SOUL.md").read_text(encoding="utf-8")
    first, outs, _ = scheduled_run(tmp_path, remote, env, "run1")
    (held,) = first["held"]
    assert held["path"] == "SOUL.md" and outs["held"] == "1"
    review_step(tmp_path, tmp_path / "run1", env, outs["held"], "run1")
    memory_pr, review_pr = pulls(tmp_path)
    assert (memory_pr["head"], review_pr["head"], review_pr["state"]) == ("dream/memory", "dream/review", "open")
    assert held["id"] in review_pr["body"] and "Merging\nthis pull request accepts every one" in review_pr["body"]
    branch = checkout(tmp_path, remote, "origin/dream/memory", "branch1")
    assert (branch / "SOUL.md").read_text(encoding="utf-8") == soul_before
    reviewing = checkout(tmp_path, remote, "origin/dream/review", "review1")
    assert "calm and concise" in (reviewing / "SOUL.md").read_text(encoding="utf-8")
    assert git(reviewing, "log", "-1", "--format=%s").startswith(f"dream: apply held {held['id']}: SOUL.md")

    merge(tmp_path, remote, "dream/memory", "merge1")
    main = checkout(tmp_path, remote, "main", "main1")
    assert fact_counts(main, range(1, 2)) == {1: 1}
    assert (main / "SOUL.md").read_text(encoding="utf-8") == soul_before

    second, outs, _ = scheduled_run(tmp_path, remote, env, "run2")
    assert second["usage"]["llm_calls"] == 0 and outs["held"] == "1"
    review_step(tmp_path, tmp_path / "run2", env, outs["held"], "run2")
    reviewing = checkout(tmp_path, remote, "origin/dream/review", "review2")
    main_tip = git(remote, "rev-parse", "main")
    assert git(reviewing, "log", "--format=%s", f"{main_tip}..HEAD").splitlines() == [
        git(reviewing, "log", "-1", "--format=%s").strip()
    ]
    merge(tmp_path, remote, "dream/review", "merge2")
    main = checkout(tmp_path, remote, "main", "main2")
    assert "calm and concise" in (main / "SOUL.md").read_text(encoding="utf-8")

    _third, outs, _ = scheduled_run(tmp_path, remote, env, "run3")
    assert outs["held"] == "0"
    review_step(tmp_path, tmp_path / "run3", env, outs["held"], "run3")
    assert "dream/review" not in remote_branches(remote)
    assert [p["state"] for p in pulls(tmp_path) if p["head"] == "dream/review"] == ["closed"]


def remote_notes(remote: Path) -> dict[str, str]:
    """The remote's refs/notes/dream: annotated commit -> note blob."""
    listed = git(remote, "notes", "--ref", "dream", "list", check=False)
    return {commit: blob for blob, commit in (line.split() for line in listed.splitlines())}


def dream_commits(remote: Path, rev_range: str) -> list[str]:
    rows = git(remote, "log", "--format=%H %s", rev_range).splitlines()
    return [sha for sha, _, subject in (r.partition(" ") for r in rows) if subject.startswith("dream: ")]


def test_provenance_notes_travel_with_the_pull_request_and_survive_its_rebase(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The notes reach the remote beside the branch: run 1's batches each have their note there.
    Run 3 rebases dream/memory onto a main the agent moved (new commit ids): every commit of the
    branch still has a note, and another run's note pushed meanwhile is kept, not overwritten. A
    fresh clone that fetches the notes, as the workflow's checkout does, gets `dream why` from the
    note: the fact and its entry, not the commit-body fallback."""
    remote = make_remote(tmp_path, env, [fact(1), fact(2)])
    scheduled_run(tmp_path, remote, env, "run1")
    first = dream_commits(remote, "main..dream/memory")
    assert len(first) == 2
    assert set(first) <= set(remote_notes(remote))

    # Another run (another repository's clone, or an old run) pushed a note of its own meanwhile.
    other = checkout(tmp_path, remote, "main", "other")
    git(other, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    git(other, "notes", "--ref", "dream", "add", "-m", '{"other": true}', "HEAD")
    git(other, "push", "-q", "origin", "refs/notes/dream")
    agent_append(tmp_path, remote, env, range(3, 4))
    scheduled_run(tmp_path, remote, env, "run3")
    branch = dream_commits(remote, "main..dream/memory")
    assert len(branch) == 3 and not set(branch) & set(first)  # rebased: new commit ids
    notes = remote_notes(remote)
    assert set(branch) <= set(notes)
    assert git(remote, "notes", "--ref", "dream", "show", git(other, "rev-parse", "HEAD")) == '{"other": true}'

    reader = checkout(tmp_path, remote, "origin/dream/memory", "reader")
    git(reader, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    line = next(
        n for n, text in enumerate((reader / "USER.md").read_text().splitlines(), 1) if "User fact number 1" in text
    )
    proc = dream_cmd(env, "why", f"USER.md:{line}", "--json", "--workspace", str(reader))
    assert proc.returncode == 0, proc.stderr
    why = json.loads(proc.stdout)
    assert why["note"] is None
    assert [s["cursor"] for s in why["sources"]] == [1]
    assert "User fact number 1" in why["facts"][0]["text"]


def test_the_direct_flow_pushes_the_notes_of_its_rebased_commits(tmp_path: Path, env: dict[str, str]) -> None:
    """dream-direct.yml's steps as shipped: main moved during the run (the agent pushed), so the
    push step rebases Dream's commit onto it and pushes again; the rebased commit on main has its
    provenance note on the remote, and the notes already there are kept."""
    remote = make_remote(tmp_path, env, [fact(1)])
    earlier = checkout(tmp_path, remote, "main", "earlier")
    git(earlier, "notes", "--ref", "dream", "add", "-m", '{"earlier": true}', "HEAD")
    git(earlier, "push", "-q", "origin", "refs/notes/dream")
    tree = checkout(tmp_path, remote, "main", "run")
    workflow_step(tree, env, "Fetch the provenance notes", "dream-direct.yml")
    proc = subprocess.run(
        [str(BIN / "dream-run"), "--workspace", str(tree)],
        env={**env, "DREAM_MODEL": "offline"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (made,) = dream_commits(tree, "origin/main..HEAD")
    agent_append(tmp_path, remote, env, range(2, 3))  # main moves before the push
    out = workflow_step(tree, env, "Push Dream's commits", "dream-direct.yml")
    assert "push rejected (attempt 1)" in out
    (pushed,) = dream_commits(remote, "main~1..main")
    assert pushed != made  # rebased
    notes = remote_notes(remote)
    assert pushed in notes
    assert git(remote, "notes", "--ref", "dream", "show", git(earlier, "rev-parse", "HEAD")) == '{"earlier": true}'
