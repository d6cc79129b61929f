"""A local stand-in for peter-evans/create-pull-request, for act and the tests (never on GitHub).

act cannot clone remote actions here, and there is no GitHub to open pull requests on, so the
proofs replace the pinned create-pull-request with this script (act --local-repository). It does
what the real action does with the inputs docs/examples/dream-pr.yml gives it (its
create-or-update-branch logic, for a checkout whose branch is the base):
- the branch becomes the checkout's HEAD (the base plus the commits the job made), pushed with
  --force-with-lease when it differs from the remote branch; uncommitted changes are committed
  first, as the real action does;
- a branch ahead of the base has one open pull request, created or updated (title, body);
- a branch with no diff to the base is deleted on the remote when delete-branch is true, which
  closes its pull request.
Pull requests live in a JSON file, $FAKE_GITHUB_PULLS ({"pulls": [...]}), which the proofs read
as a reviewer would read GitHub. Outputs: pull-request-number, pull-request-operation.
Standard library and the git CLI only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def git(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise SystemExit(f"create-pull-request (stand-in): git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def ahead(left: str, right: str) -> int:
    return int(git("rev-list", "--right-only", "--count", f"{left}...{right}").stdout.strip())


def main() -> int:
    branch = os.environ["INPUT_BRANCH"]
    base = os.environ.get("INPUT_BASE") or git("symbolic-ref", "--short", "HEAD").stdout.strip()
    delete_branch = os.environ.get("INPUT_DELETE_BRANCH", "false") == "true"
    body_path = os.environ.get("INPUT_BODY_PATH", "")
    title = os.environ.get("INPUT_TITLE", "Changes by create-pull-request action")
    store = Path(os.environ["FAKE_GITHUB_PULLS"])
    ident = ["-c", "user.name=github-actions[bot]", "-c", "user.email=github-actions[bot]@localhost"]

    if git("status", "--porcelain").stdout.strip():
        git("add", "-A")
        git(*ident, "commit", "-q", "-m", "[create-pull-request] automated change")
    head = git("rev-parse", "HEAD").stdout.strip()
    git("fetch", "-q", "--force", "origin", f"+refs/heads/{base}:refs/remotes/origin/{base}")
    exists = git("fetch", "-q", "--force", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", check=False)
    has_diff = ahead(f"origin/{base}", head) > 0
    operation = "none"
    if exists.returncode != 0:
        if has_diff:
            git("push", "-q", "origin", f"{head}:refs/heads/{branch}")
            operation = "created"
    else:
        remote_tip = git("rev-parse", f"refs/remotes/origin/{branch}").stdout.strip()
        if has_diff and remote_tip != head:
            lease = f"--force-with-lease=refs/heads/{branch}:{remote_tip}"
            git("push", "-q", lease, "origin", f"{head}:refs/heads/{branch}")
            operation = "updated"
        elif has_diff:
            operation = "not-updated"

    pulls = json.loads(store.read_text(encoding="utf-8")) if store.exists() else {"pulls": []}
    open_pr = next((p for p in pulls["pulls"] if p["head"] == branch and p["state"] == "open"), None)
    body = Path(body_path).read_text(encoding="utf-8") if body_path else ""
    if has_diff:
        if open_pr is None:
            open_pr = {"number": len(pulls["pulls"]) + 1, "head": branch, "base": base, "state": "open"}
            pulls["pulls"].append(open_pr)
            operation = "created"
        open_pr.update(title=title, body=body, head_sha=head)
    elif exists.returncode == 0 and delete_branch:
        git("push", "-q", "origin", "--delete", branch)
        print(f"create-pull-request (stand-in): {branch} has no diff with {base}; deleted it")
        if open_pr is not None:
            open_pr["state"] = "closed"
        operation = "closed" if open_pr is not None else "branch-deleted"
    store.write_text(json.dumps(pulls, indent=2) + "\n", encoding="utf-8")
    number = str(open_pr["number"]) if open_pr is not None else ""
    print(f"create-pull-request (stand-in): {operation} pull request {number or '-'} from {branch} into {base}")
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
            out.write(f"pull-request-number={number}\npull-request-operation={operation}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
