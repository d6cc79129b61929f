"""The shipped deployment files agree with the contract, with each other and with the docs.

The validators themselves (hadolint, check-jsonschema, actionlint, zizmor, kubernetes-validate,
yamllint) run in ci/steps/50-validators.sh; these tests check the meaning they cannot.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_helpers import REPO

from dream_memory.app.outcome import EXIT_FOR_STATUS, SIGTERM, Status, exit_for_signal
from dream_memory.errors import EXIT_USAGE

SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
ACTION_INPUTS = {"command", "workspace", "model", "args", "continue-from", "python-version"}
ACTION_OUTPUTS = {
    "report",
    "summary",
    "changed",
    "commits",
    "status",
    "exit-code",
    "held",
    "continued",
    "update-pr",
    "bin-dir",
}
# Registry hosts must never be written in the repository's deployment files.
REGISTRY_HOSTS = re.compile(
    r"(registry-1\.docker\.io|index\.docker\.io|hub\.docker\.com|docker\.io/|ghcr\.io|quay\.io|gcr\.io|"
    r"pypi\.org|files\.pythonhosted\.org|deb\.debian\.org|registry\.npmjs\.org|mcr\.microsoft\.com)"
)


def _ours(path: Path) -> bool:
    """A file of the project, not bytecode Python left beside it."""
    return path.is_file() and "__pycache__" not in path.parts


OWNED = [
    "Dockerfile",
    ".dockerignore",
    "action.yml",
    "docs/deploy-docker.md",
    "docs/deploy-github-actions.md",
    "docs/deploy-kubernetes.md",
    "docs/examples/dream-pr.yml",
    "docs/examples/dream-direct.yml",
    *(str(p.relative_to(REPO)) for p in sorted((REPO / "deploy").rglob("*")) if _ours(p)),
    *(str(p.relative_to(REPO)) for p in sorted((REPO / "ci/docker").rglob("*")) if _ours(p)),
    "ci/steps/50-validators.sh",
    "ci/steps/60-container.sh",
    "ci/steps/70-action.sh",
]


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def read(rel: str) -> str:
    return (REPO / rel).read_text(encoding="utf-8")


# ---- Dockerfile ---------------------------------------------------------------------------------


def stages(dockerfile: str) -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile)
    out: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_dockerfile_final_stage_is_the_contract() -> None:
    """Default target: non-root numeric user, dream-run under tini as PID 1 (so SIGTERM stops it),
    /workspace, offline cost map; the git target's script runs under tini too."""
    text = read("Dockerfile")
    final = stages(text)[-1]
    assert final[0].startswith("FROM runtime-base AS runtime")
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "dream-run"]' in final
    git_stage = next(s for s in stages(text) if s[0].endswith("AS git"))
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "dream-git-sync"]' in git_stage
    assert any("install -y --no-install-recommends tini" in line for line in stages(text)[1])
    assert "USER 10001:10001" in final
    common = " ".join(stages(text)[1])
    assert "DREAM_WORKSPACE=/workspace" in common
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in common
    assert "WORKDIR /workspace" in common
    assert len(stages(text)) >= 3  # multi-stage: builder, runtime(s)


def test_dockerfile_has_no_secret_or_registry() -> None:
    text = read("Dockerfile")
    for line in text.splitlines():
        if line.startswith(("ENV", "ARG", "    ")):
            assert not re.search(r"(API_KEY|TOKEN|SECRET|PASSWORD)\s*=", line), line
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert base is not None
    assert "." not in base.group(1).split("/")[0]  # a local name, no registry host
    assert all(
        line.startswith("FROM ${BASE_IMAGE}") or " AS " in line for line in text.splitlines() if line.startswith("FROM")
    )


def test_dockerignore_keeps_the_context_to_the_package() -> None:
    lines = [line for line in read(".dockerignore").splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    included = {line[1:] for line in lines if line.startswith("!")}
    assert included == {
        "pyproject.toml",
        "README.md",
        "src/",
        "deploy/kubernetes/dream-git-sync.sh",
        "deploy/docker/slim_venv.py",
    }
    copied = set(re.findall(r"^COPY (?!--from)(\S+)", read("Dockerfile"), re.M))
    assert copied <= {"pyproject.toml", "src", "deploy/kubernetes/dream-git-sync.sh", "deploy/docker/slim_venv.py"}


def test_git_sync_script_is_executable() -> None:
    assert os.access(REPO / "deploy/kubernetes/dream-git-sync.sh", os.X_OK)


# ---- action.yml ---------------------------------------------------------------------------------


def test_action_inputs_outputs_and_composite() -> None:
    action = yaml.safe_load(read("action.yml"))
    assert set(action["inputs"]) == ACTION_INPUTS
    assert set(action["outputs"]) == ACTION_OUTPUTS
    assert action["runs"]["using"] == "composite"
    assert not any(re.search("key|token|secret|password", name, re.I) for name in action["inputs"])
    steps = action["runs"]["steps"]
    assert all("uses" not in step for step in steps)  # nothing fetched from elsewhere at run time
    install = next(step for step in steps if step.get("id") == "install")
    assert 'pip install --quiet --disable-pip-version-check --no-compile "$GITHUB_ACTION_PATH"' in install["run"]
    for step in steps:
        assert "${{" not in step.get("run", ""), "inputs reach shells only through env"
    for name, output in action["outputs"].items():
        step_id = re.match(r"\$\{\{ steps\.(\w+)\.outputs\.([\w-]+) \}\}", output["value"])
        assert step_id is not None, name
        assert step_id.group(2) == name


def test_action_env_matches_the_run_script() -> None:
    action = yaml.safe_load(read("action.yml"))
    run_step = next(step for step in action["runs"]["steps"] if step.get("id") == "dream")
    script = read("deploy/github-action/dream_action.py")
    used = set(re.findall(r'"(DREAM_ACTION_[A-Z_]+)"', script))
    assert used == {k for k in run_step["env"] if k.startswith("DREAM_ACTION_")}
    for key in ("DREAM_ACTION_COMMAND", "DREAM_ACTION_WORKSPACE", "DREAM_ACTION_MODEL", "DREAM_ACTION_ARGS"):
        assert run_step["env"][key].startswith("${{ inputs.")
    body = script.split("def outputs_for", 1)[1].split("def _cell", 1)[0]
    written = set(re.findall(r'"([a-z-]+)": ', body)) | set(re.findall(r'outs\["([a-z-]+)"\] = ', body))
    assert written | {"report", "summary"} == ACTION_OUTPUTS - {"bin-dir"}


def _doc_table_names(doc: str, heading: str) -> set[str]:
    section = doc.split(heading, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([\w-]+)` \|", section, re.M))


def test_action_docs_list_every_input_and_output() -> None:
    doc = read("docs/deploy-github-actions.md")
    assert _doc_table_names(doc, "### Inputs") == ACTION_INPUTS
    assert _doc_table_names(doc, "### Outputs") == ACTION_OUTPUTS


def test_action_status_and_exit_code_outputs_list_every_value() -> None:
    """What a workflow may compare `status` and `exit-code` with: every status a report carries
    (app.outcome's table) plus the step's own usage_error, and every exit code a run ends with."""
    statuses = {status.value for status in Status} | {"usage_error"}
    codes = {str(code) for code in EXIT_FOR_STATUS.values()} | {str(EXIT_USAGE), str(exit_for_signal(SIGTERM))}
    action = yaml.safe_load(read("action.yml"))
    doc = read("docs/deploy-github-actions.md")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w-]+)` \| (.*) \|$", doc, re.M)}
    for text, quoted in ((action["outputs"]["status"]["description"], False), (rows["status"], True)):
        words = re.findall(
            r"`([a-z_]+)`" if quoted else r"\b([a-z]+_[a-z_]+|ok|failed|locked|held|interrupted)\b", text
        )
        assert set(words) == statuses, text
    for text in (action["outputs"]["exit-code"]["description"], rows["exit-code"]):
        assert set(re.findall(r"\b(\d+)\b", text)) == codes, text


# ---- example workflows ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dream-pr.yml", "dream-direct.yml"])
def test_examples_least_privilege_and_pinned(name: str) -> None:
    flow = yaml.safe_load(read(f"docs/examples/{name}"))
    on = flow[True] if True in flow else flow["on"]  # PyYAML reads `on:` as a boolean
    assert set(on) == {"schedule", "workflow_dispatch"}
    assert flow["permissions"] == {}
    job = flow["jobs"]["dream"]
    expected = {"contents": "write"} | ({"pull-requests": "write"} if name == "dream-pr.yml" else {})
    assert job["permissions"] == expected
    assert job["environment"] == "dream"
    for step in job["steps"]:
        uses = step.get("uses")
        if uses and not uses.startswith("dream-memory/"):
            assert SHA_PIN.match(uses), uses
        if "actions/checkout" in (uses or ""):
            assert step["with"]["persist-credentials"] is False
        assert "secrets." not in step.get("run", "")
    dream_step = next(s for s in job["steps"] if s.get("id") == "dream")
    assert "DREAM_API_KEY" in dream_step["env"]
    assert not any("key" in k.lower() for k in dream_step.get("with", {}))


def test_pr_example_opens_one_pr_from_a_fixed_branch() -> None:
    """One PR from dream/memory; Dream continues from that branch (all branches fetched). The
    workflow pushes the branch itself, leased against the tip its checkout saw, whenever the
    checkout may replace it (after a failed Dream step too, never after a rebuild that failed), so
    holds, cursors and committed batches all reach it; create-pull-request, whose own lease is
    against a fetch of its own (tests/deploy/test_review_pr_lease.py), runs only after that push
    succeeded, when the branch already equals the checkout. A rejected push (the branch moved)
    skips every later step but none before."""
    flow = yaml.safe_load(read("docs/examples/dream-pr.yml"))
    steps = flow["jobs"]["dream"]["steps"]
    checkout_step = steps[0]
    assert checkout_step["with"]["fetch-depth"] == 0
    dream = next(s for s in steps if s.get("id") == "dream")
    assert dream["with"]["continue-from"] == "dream/memory"
    listed = [(s.get("id") or s.get("name") or s["uses"].split("@")[0], s.get("if")) for s in steps]
    ran = "${{ !cancelled() && steps.branch.outcome == 'success' }}"
    assert listed == [
        ("actions/checkout", None),
        ("Fetch the provenance notes", None),
        ("dream", None),
        ("branch", "${{ !cancelled() && steps.dream.outputs.update-pr == 'true' }}"),
        (
            "peter-evans/create-pull-request",
            "${{ !cancelled() && steps.branch.outcome == 'success' && steps.branch.outputs.pushed == 'true' }}",
        ),
        ("review", ran),
        ("peter-evans/create-pull-request", "${{ !cancelled() && steps.review.outcome == 'success' }}"),
        ("Push the provenance notes", ran),
    ]
    lease = steps[3]
    assert lease["name"] == "Push dream/memory with a lease"
    assert lease["env"] == {"GITHUB_TOKEN": "${{ github.token }}", "BRANCH": "dream/memory"}
    assert '"--force-with-lease=refs/heads/$BRANCH:$start"' in lease["run"]
    assert 'echo "pushed=true" >> "$GITHUB_OUTPUT"' in lease["run"]
    assert "--force " not in lease["run"] and " -f " not in lease["run"]
    pr = steps[4]
    assert pr["with"]["branch"] == "dream/memory"
    assert pr["with"]["delete-branch"] is True
    assert pr["with"]["body-path"] == "${{ steps.dream.outputs.summary }}"
    assert steps[6]["with"]["branch"] == "dream/review"
    assert flow["concurrency"]["cancel-in-progress"] is False


@pytest.mark.parametrize("name", ["dream-pr.yml", "dream-direct.yml"])
def test_examples_find_the_default_branch_on_every_trigger(name: str) -> None:
    """A schedule payload has no repository.default_branch (the run is on the default branch, so
    github.ref_name is it): every use of the branch goes through the job's DEFAULT_BRANCH, which
    falls back to ref_name, and the checkout is of that branch for dispatches from elsewhere too."""
    text = read(f"docs/examples/{name}")
    flow = yaml.safe_load(text)
    job = flow["jobs"]["dream"]
    assert job["env"]["DEFAULT_BRANCH"] == "${{ github.event.repository.default_branch || github.ref_name }}"
    assert text.count("github.event.repository.default_branch") == 1
    assert job["steps"][0]["with"]["ref"] == "${{ env.DEFAULT_BRANCH }}"
    dream = next(s for s in job["steps"] if s.get("id") == "dream")
    assert dream["timeout-minutes"] < job["timeout-minutes"]


# ---- Kubernetes ---------------------------------------------------------------------------------


def pod_spec(cronjob: dict[str, Any]) -> dict[str, Any]:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("name", ["cronjob-pvc.yaml", "cronjob-git.yaml", "indexed-job.yaml"])
def test_cronjobs_are_locked_down(name: str) -> None:
    docs = load_all(REPO / "deploy/kubernetes" / name)
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    job = spec["jobTemplate"]["spec"]
    assert "backoffLimit" in job or "backoffLimitPerIndex" in job
    pod = pod_spec(cron)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["automountServiceAccountToken"] is False
    tmp_volumes = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    for container in pod.get("initContainers", []) + pod["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert set(container["resources"]) == {"requests", "limits"}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts["/tmp"] in tmp_volumes
    dream = next(c for c in pod["containers"] if c["name"] == "dream")
    key = next(e for e in dream["env"] if e["name"] == "DREAM_API_KEY")
    assert "secretKeyRef" in key["valueFrom"]
    # No secret as a plain value (a *_FILE variable holds the path of a mounted Secret).
    assert not any(
        "value" in e and re.search("key|token", e["name"], re.I) and not e["name"].endswith("_FILE")
        for e in dream["env"]
    )
    # Exit 2 (bad config, a workspace this uid cannot write) ends the Job (or the index) after one
    # pod; SIGTERM gets a grace period.
    rules = job["podFailurePolicy"]["rules"]
    action = "FailIndex" if job.get("completionMode") == "Indexed" else "FailJob"
    assert any(r["action"] == action and 2 in r["onExitCodes"]["values"] for r in rules)
    assert 10 <= pod["terminationGracePeriodSeconds"] <= 60


def test_git_variant_clones_then_runs_and_pushes() -> None:
    (cron,) = load_all(REPO / "deploy/kubernetes/cronjob-git.yaml")
    pod = pod_spec(cron)
    (clone,) = pod["initContainers"]
    (dream,) = pod["containers"]
    assert clone["args"] == ["clone"]
    assert dream["args"] == ["run"]
    assert clone["image"] == dream["image"]
    assert dream["image"].endswith("-git")
    # The git token is a file from a Secret volume, never an environment variable of the pod.
    for container in (clone, dream):
        env = {e["name"]: e for e in container["env"]}
        assert "GIT_TOKEN" not in env
        token_dir = env["DREAM_GIT_TOKEN_FILE"]["value"].rsplit("/", 1)[0]
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == token_dir)
        assert mount.get("readOnly") is True
        assert next(v for v in pod["volumes"] if v["name"] == mount["name"])["secret"]["secretName"] == "dream-git"
    assert {e["name"]: e.get("value") for e in dream["env"]}["DREAM_GIT_PUSH_EVERY"] == "1"
    assert next(v for v in pod["volumes"] if v["name"] == "workspace").get("emptyDir") is not None


def test_indexed_job_picks_a_workspace_per_index() -> None:
    docs = load_all(REPO / "deploy/kubernetes/indexed-job.yaml")
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    cron = next(d for d in docs if d["kind"] == "CronJob")
    job = cron["spec"]["jobTemplate"]["spec"]
    names = config["data"]["workspaces"].split()
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == len(names)
    container = pod_spec(cron)["containers"][0]
    # `command` replaces the image's entrypoint: tini has to be named again to stay PID 1.
    assert container["command"][:2] == ["/usr/bin/tini", "--"]
    script = container["args"][0]
    assert "JOB_COMPLETION_INDEX" in script
    assert 'exec dream-run --workspace "/workspaces/$name"' in script


def test_indexed_job_selection_script(tmp_path: Path) -> None:
    """The container's selection script, run for each index against the ConfigMap's list."""
    import subprocess

    docs = load_all(REPO / "deploy/kubernetes/indexed-job.yaml")
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    cron = next(d for d in docs if d["kind"] == "CronJob")
    script = pod_spec(cron)["containers"][0]["args"][0]
    listing = tmp_path / "workspaces"
    listing.write_text(config["data"]["workspaces"], encoding="utf-8")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dream-run").write_text('#!/bin/sh\necho "ran $*"\n', encoding="utf-8")
    (fake / "dream-run").chmod(0o755)
    script = script.replace("/etc/dream/workspaces", str(listing))
    names = config["data"]["workspaces"].split()
    for index, name in enumerate([*names, None]):
        proc = subprocess.run(
            ["/bin/sh", "-c", script],
            env={"PATH": f"{fake}:/usr/bin:/bin", "JOB_COMPLETION_INDEX": str(index)},
            capture_output=True,
            text=True,
            check=False,
        )
        if name is None:
            assert proc.returncode == 2
            assert "no workspace on line" in proc.stderr
        else:
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == f"ran --workspace /workspaces/{name}\n"


# ---- hygiene --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", OWNED)
def test_no_registry_host_is_written(rel: str) -> None:
    text = read(rel)
    assert not REGISTRY_HOSTS.search(text), f"{rel}: {REGISTRY_HOSTS.search(text)}"


def test_ci_steps_are_executable_scripts() -> None:
    for name in ("50-validators.sh", "60-container.sh", "70-action.sh"):
        path = REPO / "ci/steps" / name
        assert os.access(path, os.X_OK)
        assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env bash\n")
