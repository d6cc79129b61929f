"""deploy/kubernetes/dream-git-sync.sh, simulated locally against a bare repository.

The Kubernetes git variant: `clone` (init container), then `run` (Dream, then push back). When the
remote moved meanwhile, the push is rejected and the script fetches, resets to the new head and
runs Dream again, a bounded number of times. Real `dream-run` with the offline engine throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from deploy_helpers import BIN, REPO, agent_append, checkout, fact_counts, git, make_remote

pytestmark = pytest.mark.slow  # real processes end to end (scripts/test --fast leaves it out)

SCRIPT = REPO / "deploy/kubernetes/dream-git-sync.sh"


def sync(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env={**env, **extra}, capture_output=True, text=True, timeout=240, check=False
    )


@pytest.fixture
def sync_env(tmp_path: Path, run_env: dict[str, str]) -> dict[str, str]:
    remote = make_remote(tmp_path, run_env, range(1, 4))
    return {
        **run_env,
        "DREAM_GIT_URL": str(remote),
        "DREAM_GIT_DIR": str(tmp_path / "pod" / "repo"),
        "DREAM_MODEL": "offline",
        "GIT_AUTHOR_NAME": "x",
        "GIT_AUTHOR_EMAIL": "x@localhost",
        "GIT_COMMITTER_NAME": "x",
        "GIT_COMMITTER_EMAIL": "x@localhost",
    }


def remote_of(env: dict[str, str]) -> Path:
    return Path(env["DREAM_GIT_URL"])


def test_clone_run_push(tmp_path: Path, sync_env: dict[str, str]) -> None:
    """The plain path: clone main, Dream commits, the commits reach the remote's main."""
    assert sync(sync_env, "clone").returncode == 0
    proc = sync(sync_env, "run")
    assert proc.returncode == 0, proc.stderr
    assert "pushed" in proc.stderr
    tree = checkout(tmp_path, remote_of(sync_env), "main", "check")
    assert (tree / "memory/.dream_cursor").read_text().strip() == "3"
    assert fact_counts(tree, range(1, 4)) == {1: 1, 2: 1, 3: 1}
    assert git(tree, "log", "-1", "--format=%s").startswith("dream: ")
    # A second run has nothing new: no commit, nothing pushed, exit 0.
    again = sync(sync_env, "run")
    assert again.returncode == 0, again.stderr
    assert git(tree, "ls-remote", str(remote_of(sync_env)), "refs/heads/main").split()[0] == git(
        tree, "rev-parse", "HEAD"
    )


def wrapper(tmp_path: Path, body: str) -> str:
    """A DREAM_RUN stand-in: runs BODY (bash) and then the real dream-run."""
    path = tmp_path / "dream-run-wrapper"
    path.write_text(f'#!/usr/bin/env bash\nset -e\n{body}\nexec "{BIN / "dream-run"}" "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def test_moved_remote_is_fetched_and_redone(tmp_path: Path, sync_env: dict[str, str], run_env: dict[str, str]) -> None:
    """The agent pushes new history while Dream runs: the first push is rejected; the second attempt
    runs on the new head, so entry 4 is dreamt too (no history missed, no fact twice)."""
    assert sync(sync_env, "clone").returncode == 0
    marker = tmp_path / "moved-once"
    helper = tmp_path / "agent.py"
    helper.write_text(
        "import sys, pathlib\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from deploy_helpers import agent_append\n"
        f"agent_append(pathlib.Path({str(tmp_path)!r}), pathlib.Path(sys.argv[1]), "
        f"__import__('json').loads(sys.argv[2]), range(int(sys.argv[3]), int(sys.argv[3]) + 1))\n",
        encoding="utf-8",
    )
    body = (
        f'if [ ! -e "{marker}" ]; then touch "{marker}"; '
        f"{BIN / 'python'} {helper} {remote_of(sync_env)} '{json.dumps(run_env)}' 4; fi"
    )
    proc = sync(sync_env, "run", DREAM_RUN=wrapper(tmp_path, body))
    assert proc.returncode == 0, proc.stderr
    assert "push rejected" in proc.stderr
    assert "attempt 2/3" in proc.stderr
    tree = checkout(tmp_path, remote_of(sync_env), "main", "check")
    assert (tree / "memory/.dream_cursor").read_text().strip() == "4"
    assert fact_counts(tree, range(1, 5)) == {1: 1, 2: 1, 3: 1, 4: 1}
    subjects = git(tree, "log", "--format=%s").splitlines()
    assert subjects[1].startswith("agent: history 4..4")  # Dream's commit sits on the agent's
    assert git(tree, "status", "--porcelain", "--untracked-files=no") == ""


def test_gives_up_after_the_bounded_attempts(tmp_path: Path, sync_env: dict[str, str], run_env: dict[str, str]) -> None:
    """A remote that moves on every attempt: exit 1 after DREAM_GIT_ATTEMPTS, nothing of Dream pushed."""
    assert sync(sync_env, "clone").returncode == 0
    counter = tmp_path / "n"
    counter.write_text("10")
    body = (
        f'n=$(cat "{counter}"); echo $((n + 1)) > "{counter}"; '
        f"{BIN / 'python'} -c \"import sys, pathlib, json; sys.path.insert(0, '{Path(__file__).parent}'); "
        f"from deploy_helpers import agent_append; "
        f"agent_append(pathlib.Path('{tmp_path}'), pathlib.Path('{remote_of(sync_env)}'), "
        f"json.loads(sys.argv[1]), range($n, $n + 1))\" '{json.dumps(run_env)}'"
    )
    proc = sync(sync_env, "run", DREAM_RUN=wrapper(tmp_path, body), DREAM_GIT_ATTEMPTS="2")
    assert proc.returncode == 1
    assert "giving up after 2 attempts" in proc.stderr
    tree = checkout(tmp_path, remote_of(sync_env), "main", "check")
    assert not any(s.startswith("dream: ") for s in git(tree, "log", "--format=%s").splitlines())


def test_review_branch_is_rebuilt_from_main(tmp_path: Path, sync_env: dict[str, str], run_env: dict[str, str]) -> None:
    """DREAM_PUSH_BRANCH=dream/memory: main is untouched; the review branch is main + this run's
    commits, rebuilt on every run, so a second run before merge doubles nothing and misses nothing."""
    env = {**sync_env, "DREAM_PUSH_BRANCH": "dream/memory"}
    remote = remote_of(sync_env)
    main_before = git(tmp_path, "--git-dir", str(remote), "rev-parse", "main")
    assert sync(env, "clone").returncode == 0
    first = sync(env, "run")
    assert first.returncode == 0, first.stderr
    assert git(tmp_path, "--git-dir", str(remote), "rev-parse", "main") == main_before
    agent_append(tmp_path, remote, run_env, range(4, 6))
    # A new pod: fresh clone of main.
    env["DREAM_GIT_DIR"] = str(tmp_path / "pod2" / "repo")
    assert sync(env, "clone").returncode == 0
    second = sync(env, "run")
    assert second.returncode == 0, second.stderr
    tree = checkout(tmp_path, remote, "origin/dream/memory", "review")
    main_tip = git(tmp_path, "--git-dir", str(remote), "rev-parse", "main")
    assert git(tree, "merge-base", "--is-ancestor", main_tip, "HEAD", check=False) == ""
    assert (tree / "memory/.dream_cursor").read_text().strip() == "5"
    assert fact_counts(tree, range(1, 6)) == dict.fromkeys(range(1, 6), 1)


def test_lock_held_is_exit_75_and_nothing_pushed(tmp_path: Path, sync_env: dict[str, str]) -> None:
    assert sync(sync_env, "clone").returncode == 0
    lock = Path(sync_env["DREAM_GIT_DIR"]) / "memory/.dream.lock"
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        for _ in range(50):
            if subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode != 0:
                break
            subprocess.run(["sleep", "0.1"], check=False)
        proc = sync(sync_env, "run")
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 75
    assert "nothing is pushed" in proc.stderr


def test_usage() -> None:
    assert subprocess.run(["bash", str(SCRIPT)], capture_output=True, check=False).returncode == 2


@pytest.mark.parametrize("name", ["DREAM_GIT_ATTEMPTS", "DREAM_GIT_PUSH_EVERY"])
@pytest.mark.parametrize("value", ["three", "0", "-1", "2.5"])
def test_a_count_that_is_not_one_or_more_is_exit_2_before_dream_runs(
    tmp_path: Path, sync_env: dict[str, str], name: str, value: str
) -> None:
    """A word where a count belongs once looped without bound on a moving remote; now it is bad
    configuration (exit 2, the Job does not retry it), named, and nothing runs or is pushed."""
    assert sync(sync_env, "clone").returncode == 0
    before = git(tmp_path, "ls-remote", str(remote_of(sync_env)), "refs/heads/main")
    proc = sync(sync_env, "run", **{name: value})
    assert proc.returncode == 2, proc.stderr
    assert f"{name} is {value}: it must be a whole number from 1" in proc.stderr
    assert "integer expression expected" not in proc.stderr
    assert git(tmp_path, "ls-remote", str(remote_of(sync_env)), "refs/heads/main") == before


def test_clone_without_a_url_is_exit_2_naming_the_variable(tmp_path: Path, run_env: dict[str, str]) -> None:
    proc = sync(run_env, "clone", DREAM_GIT_DIR=str(tmp_path / "repo"))
    assert proc.returncode == 2
    assert proc.stderr == (
        "dream-git-sync: DREAM_GIT_URL is not set: set it to the repository to clone (https://... or a path)\n"
    )


def test_run_without_a_clone_is_exit_2_saying_what_to_do(tmp_path: Path, run_env: dict[str, str]) -> None:
    proc = sync(run_env, "run", DREAM_GIT_DIR=str(tmp_path / "repo"))
    assert proc.returncode == 2
    assert f"{tmp_path / 'repo'} holds no clone: run `dream-git-sync clone` before `run`" in proc.stderr
    assert "No such file" not in proc.stderr


def counting_wrapper(tmp_path: Path, hang_from: int) -> tuple[str, Path]:
    """A DREAM_RUN stand-in that runs the real dream-run, except from invocation HANG_FROM on, when
    it hangs like a run waiting on a slow model; touches started-<n> as each invocation starts."""
    marks = tmp_path / "marks"
    marks.mkdir()
    body = (
        f'n=$(ls "{marks}" | wc -l); n=$((n + 1)); touch "{marks}/started-$n"; '
        f'if [ "$n" -ge {hang_from} ]; then exec sleep 300; fi'
    )
    return wrapper(tmp_path, body), marks


def wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 120) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


def dream_subjects(tmp_path: Path, remote: Path, name: str) -> tuple[list[str], Path]:
    tree = checkout(tmp_path, remote, "main", name)
    return [s for s in git(tree, "log", "--format=%s").splitlines() if s.startswith("dream: ")], tree


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_run_stopped_after_three_batches_leaves_them_on_the_remote(
    tmp_path: Path, run_env: dict[str, str], stop: str
) -> None:
    """Pushing as it goes: a run over 5 batches that is killed (a Job's deadline) while the 4th
    batch waits on the model leaves batches 1-3 on the remote, so the next run starts at cursor 3.
    SIGKILL shows the pushes after each batch; SIGTERM (the kubelet's stop) also ends at once,
    exit 143, having pushed what was committed."""
    import signal

    remote = make_remote(tmp_path, run_env, range(1, 6))
    env = {
        **run_env,
        "DREAM_GIT_URL": str(remote),
        "DREAM_GIT_DIR": str(tmp_path / "pod" / "repo"),
        "DREAM_MODEL": "offline",
    }
    assert sync(env, "clone").returncode == 0
    dream_run, marks = counting_wrapper(tmp_path, hang_from=4)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "run", "--batch-size", "1"],
        env={**env, "DREAM_RUN": dream_run},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(marks / "started-4", proc)
        if stop == "SIGKILL":
            os.killpg(proc.pid, signal.SIGKILL)  # the script and the hanging "model" with it
        else:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    subjects, tree = dream_subjects(tmp_path, remote, "after")
    assert len(subjects) == 3, subjects
    assert (tree / "memory/.dream_cursor").read_text().strip() == "3"
    assert fact_counts(tree, range(1, 4)) == {1: 1, 2: 1, 3: 1}
    if stop == "SIGTERM":
        assert proc.returncode == 143, stderr
        assert "stopped (SIGTERM)" in stderr
    # The next pod continues at cursor 3 and dreams only batches 4 and 5.
    env["DREAM_GIT_DIR"] = str(tmp_path / "pod2" / "repo")
    assert sync(env, "clone").returncode == 0
    again = sync(env, "run", "--batch-size", "1")
    assert again.returncode == 0, again.stderr
    subjects, tree = dream_subjects(tmp_path, remote, "final")
    assert len(subjects) == 5
    assert fact_counts(tree, range(1, 6)) == dict.fromkeys(range(1, 6), 1)


def test_the_git_token_reaches_git_and_never_dream_run(
    tmp_path: Path, sync_env: dict[str, str], run_env: dict[str, str]
) -> None:
    """GIT_TOKEN (or DREAM_GIT_TOKEN_FILE) is in the environment of the git processes that talk to
    the remote, and not in dream-run's (the process a model drives)."""
    import shutil

    real_git = shutil.which("git")
    assert real_git
    shims = tmp_path / "shims"
    shims.mkdir()
    seen = tmp_path / "git-env.log"
    (shims / "git").write_text(
        "#!/usr/bin/env bash\n"
        # The subcommand, after any -c NAME=VALUE / -C DIR options.
        'a=("$@"); i=0; while [ "${a[$i]}" = -c ] || [ "${a[$i]}" = -C ]; do i=$((i + 2)); done\n'
        f'echo "${{a[$i]}} ${{GIT_TOKEN:-<none>}}" >> "{seen}"\nexec "{real_git}" "$@"\n',
        encoding="utf-8",
    )
    (shims / "git").chmod(0o755)
    dream_env = tmp_path / "dream-run-env.txt"
    dream_run = wrapper(tmp_path, f'env > "{dream_env}"')
    token_file = tmp_path / "token"
    token_file.write_text("file-token-value\n", encoding="utf-8")
    cases = (
        ({"GIT_TOKEN": "env-token-value"}, "env-token-value"),
        ({"DREAM_GIT_TOKEN_FILE": str(token_file)}, "file-token-value"),
    )
    for n, (extra, expected) in enumerate(cases):
        seen.unlink(missing_ok=True)
        if n:
            agent_append(tmp_path, remote_of(sync_env), run_env, range(3 + n, 4 + n))  # new work to push
        env = {
            **sync_env,
            **extra,
            "PATH": f"{shims}:{sync_env['PATH']}",
            "DREAM_GIT_DIR": str(tmp_path / f"pod-{n}" / "repo"),
            "DREAM_RUN": dream_run,
        }
        assert sync(env, "clone").returncode == 0
        proc = sync(env, "run")
        assert proc.returncode == 0, proc.stderr
        assert "pushed" in proc.stderr
        text = dream_env.read_text(encoding="utf-8")
        assert "GIT_TOKEN" not in text and expected not in text
        calls = seen.read_text(encoding="utf-8").splitlines()
        remote_calls = [c for c in calls if c.split()[0] in ("clone", "push", "fetch")]
        assert remote_calls and all(c.endswith(expected) for c in remote_calls), calls
        local_calls = [c for c in calls if c.split()[0] in ("checkout", "rev-parse", "branch", "reset")]
        assert local_calls and all(c.endswith("<none>") for c in local_calls), calls
        assert expected not in proc.stderr
