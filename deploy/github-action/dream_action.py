"""The run step of the dream-memory GitHub Action (action.yml at the repository root).

Reads the action's inputs from ``DREAM_ACTION_*`` variables (never interpolated into a shell),
runs ``dream-run`` / ``dream-consolidate`` / ``dream-restore`` from the action's venv, saves the
JSON it prints as the report, writes the step outputs (report, summary, changed, commits, status,
exit-code, held, continued, update-pr) and a markdown summary to ``$GITHUB_STEP_SUMMARY``, and
exits with the command's exit code (0 ok, 1 failed, 2 bad usage or config, 75 locked, 130/143
interrupted by SIGINT/SIGTERM).

With ``continue-from`` (the pull-request flow, docs/examples/dream-pr.yml), Dream continues from
the open review branch instead of starting over from the checkout: that branch's commits are
rebased onto the checked-out default branch first, so Dream reads the branch's cursor and state
(no batch is dreamt, or paid for, twice; a held batch stays held) and the new commits land on top.
A branch that is merged (or has nothing left once rebased) is simply not continued; a rebase that
conflicts falls back to rebuilding from the default branch, but only when that loses nothing but
Dream's own commits: a branch holding anyone else's commit (a reviewer's fixup, a `dream review`
accept) that the default branch lacks is never replaced. The step then exits 2 before Dream runs,
naming the branch and those commits, with ``update-pr`` false (deploy/kubernetes/dream-git-sync.sh
keeps the same rule for its review branch). The summary then describes the whole
review branch (its commits and every held change waiting in memory/.dream_held/), so the pull
request body stays true even after a run that had nothing new.

Standard library only: it also runs under ``act`` and in tests without the package imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

COMMANDS = {"run": "dream-run", "consolidate": "dream-consolidate", "restore": "dream-restore"}
# A command that printed no report (killed, or stopped before its report): its status from the code.
STATUS_BY_EXIT = {0: "ok", 1: "failed", 2: "usage_error", 75: "locked", 130: "interrupted", 143: "interrupted"}
MAX_FILES_LISTED = 50
MAX_COMMITS_LISTED = 50
HELD_DIR = "memory/.dream_held"
# Who rebases the review branch's commits (their authors stay Dream's).
NOTES_REF = "refs/notes/dream"  # where Dream keeps each commit's provenance
COMMITTER = {"GIT_COMMITTER_NAME": "dream-memory", "GIT_COMMITTER_EMAIL": "dream-memory@localhost"}


class ActionInputError(Exception):
    """An input the action cannot use; reported as exit 2 like the CLI's usage errors."""


class ForeignCommitsError(ActionInputError):
    """The review branch cannot be continued and rebuilding it would drop commits Dream did not make."""


def build_argv(command: str, workspace: str, model: str, args: str, bindir: str | os.PathLike[str]) -> list[str]:
    if command not in COMMANDS:
        raise ActionInputError(f"input 'command' must be one of {', '.join(COMMANDS)} (got {command!r})")
    try:
        extra = shlex.split(args)
    except ValueError as exc:
        raise ActionInputError(f"input 'args' cannot be split into words: {exc}") from None
    argv = [str(Path(bindir) / COMMANDS[command]), "--workspace", os.path.abspath(workspace or ".")]
    if model:
        if command == "restore":
            print("dream-action: input 'model' is ignored by restore", file=sys.stderr)
        else:
            argv += ["--model", model]
    return argv + extra


class Branch:
    """Where the run started, for a summary of what the review branch holds (``continue-from``)."""

    def __init__(self, repo: Path, name: str, base: str, continued: bool, note: str, fell_back: bool) -> None:
        self.repo, self.name, self.base = repo, name, base
        self.continued, self.note, self.fell_back = continued, note, fell_back


def _git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def continue_from(workspace: str, branch: str) -> Branch:
    """Put the open review branch's commits on top of the checkout (see the module docstring)."""
    # A name no branch can have would read as "no branch yet", and the push step would then
    # replace the real review branch with one rebuilt from the checkout.
    named = _git(Path(workspace), "check-ref-format", "--branch", branch)
    if named.returncode != 0 or named.stdout.strip() != branch:
        raise ActionInputError(
            f"input 'continue-from' {branch!r} is not a branch name (`git check-ref-format --branch` refuses it); "
            "give the review branch as the workflow pushes it, e.g. dream/memory"
        )
    top = _git(Path(workspace), "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise ActionInputError(f"input 'continue-from' needs the workspace in a git checkout ({top.stderr.strip()})")
    repo = Path(top.stdout.strip())
    base = _git(repo, "rev-parse", "HEAD").stdout.strip()
    remote_ref = f"refs/remotes/origin/{branch}"
    tip = _git(repo, "rev-parse", "--verify", "--quiet", remote_ref).stdout.strip()
    if not tip:
        note = (
            f"no branch {branch!r} on the remote (the checkout has no origin/{branch}): Dream starts from the "
            f"checkout and the workflow creates {branch}. If it exists, check the spelling of continue-from "
            "and that the checkout fetched every branch (actions/checkout with fetch-depth: 0)"
        )
        return Branch(repo, branch, base, False, note, False)
    if _git(repo, "merge-base", "--is-ancestor", tip, base).returncode == 0:
        note = f"{branch} is merged into the checkout: Dream starts from the checkout"
        return Branch(repo, branch, base, False, note, False)
    current = _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD").stdout.strip()
    temp = "dream-action/continue"
    # notes.rewriteRef: each rebased commit gets its provenance note (docs/provenance.md).
    steps = [("checkout", "-q", "-B", temp, tip), ("rebase", "-q", base)]
    for step in steps:
        done = _git(repo, "-c", f"notes.rewriteRef={NOTES_REF}", *step, env=COMMITTER)
        if done.returncode != 0:
            _git(repo, "rebase", "--abort")
            _git(repo, "checkout", "-q", current or base)
            _git(repo, "branch", "-q", "-D", temp)
            detail = (done.stdout + done.stderr).strip().splitlines()
            why = f"{detail[-1] if detail else 'git ' + step[0]} failed"
            foreign = foreign_commits(repo, base, tip)
            if foreign:
                raise ForeignCommitsError(refusal(branch, why, foreign))
            note = (
                f"{branch} does not rebase onto the checkout ({why}): "
                "Dream rebuilds the branch from the checkout instead"
            )
            return Branch(repo, branch, base, False, note, True)
    rebased = _git(repo, "rev-parse", "HEAD").stdout.strip()
    if current:
        _git(repo, "checkout", "-q", current)
        _git(repo, "reset", "-q", "--hard", rebased)
    else:
        _git(repo, "checkout", "-q", "--detach", rebased)
    _git(repo, "branch", "-q", "-D", temp)
    if rebased == base:
        note = f"{branch} has nothing the checkout lacks (merged): Dream starts from the checkout"
        return Branch(repo, branch, base, False, note, False)
    ahead = _git(repo, "rev-list", "--count", f"{base}..{rebased}").stdout.strip()
    note = f"continuing from {branch} ({ahead} commit(s) on top of the checkout): Dream starts at its cursor"
    return Branch(repo, branch, base, True, note, False)


# `dream review` and `dream revert` commits: made by a person's command, so not Dream's to replace.
PERSON_SUBJECTS = ("dream: apply held ", "dream: discard held ", "dream: reject held ", "dream: revert ")


def is_dreams_own(parents: str, subject: str, trailer: str) -> bool:
    """A commit dream-run makes, which a rebuild redoes: one parent and a `dream: ...` subject with a
    Dream-Range trailer, `dream: compact history (...)` or `memory: init` (dream-git-sync.sh's rule)."""
    if len(parents.split()) != 1 or subject.startswith(PERSON_SUBJECTS):
        return False
    if subject.startswith("dream: compact history (") or subject == "memory: init":
        return True
    return subject.startswith("dream: ") and bool(trailer.strip())


def foreign_commits(repo: Path, base: str, tip: str) -> list[str]:
    """The commits of the review branch (``tip``) that a rebuild from ``base`` would lose besides
    Dream's own, one "<short sha> <subject>" each, oldest first; none when the branch's changes are
    all in ``base`` already (merged in another shape: a squash or rebase merge)."""
    fmt = "%H%x1f%P%x1f%(trailers:key=Dream-Range,valueonly,separator=%x2C)%x1f%s%x1e"
    log = _git(repo, "log", "--reverse", f"--format={fmt}", f"{base}..{tip}")
    if log.returncode != 0:
        return [f"{tip[:7]} (its commits cannot be listed: {log.stderr.strip()})"]
    foreign = []
    for record in log.stdout.split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) != 4:
            continue
        sha, parents, trailer, subject = fields
        if not is_dreams_own(parents, subject, trailer):
            foreign.append(f"{sha[:7]} {subject}")
    if foreign:
        # Merging the branch into the base would change nothing: its changes are all there.
        merged = _git(repo, "merge-tree", "--write-tree", base, tip)
        base_tree = _git(repo, "rev-parse", f"{base}^{{tree}}").stdout.strip()
        if merged.returncode == 0 and merged.stdout.split("\n", 1)[0].strip() == base_tree:
            return []
    return foreign


def refusal(branch: str, why: str, foreign: list[str]) -> str:
    listed = "".join(f"\n    {line}" for line in foreign)
    return (
        f"{branch} does not rebase onto the checkout ({why}), and rebuilding it would drop "
        f"{len(foreign)} commit(s) on it that Dream did not make and the checkout lacks (a reviewer's?):"
        f"{listed}\n"
        f"Not replacing {branch}: Dream did not run and nothing is pushed (update-pr is false). Merge the "
        f"pull request from {branch} (resolving the conflict), or rebase {branch} onto the default branch "
        f"yourself, or delete the branch to drop them (git push origin --delete {branch}); the next run "
        "then continues or rebuilds it."
    )


def pending_holds(workspace: str) -> list[dict[str, Any]]:
    """Everything waiting for review in the workspace: each held change
    (memory/.dream_held/<id>/change.json) and each whole batch an earlier version held (held.json)."""
    holds = []
    records = [*Path(workspace, HELD_DIR).glob("*/change.json"), *Path(workspace, HELD_DIR).glob("*/held.json")]
    for record in sorted(records):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data.setdefault("id", record.parent.name)
        holds.append(data)
    return holds


def _facts(batch: Mapping[str, Any]) -> int:
    facts = batch.get("facts")
    if isinstance(facts, bool):
        return int(facts)
    if isinstance(facts, int):
        return facts
    if isinstance(facts, list):
        return len(facts)
    return 0


def outputs_for(
    report: Mapping[str, Any] | None, exit_code: int, *, holds: int = 0, branch: Branch | None = None
) -> dict[str, str]:
    report = report or {}
    status = report.get("status")
    if not isinstance(status, str) or not status:
        status = STATUS_BY_EXIT.get(exit_code, "failed")
    commits = [c for c in report.get("commits") or [] if isinstance(c, str)]
    outs = {
        "changed": "true" if report.get("changed") is True else "false",
        "commits": json.dumps(commits),
        "status": status,
        "exit-code": str(exit_code),
        "held": str(holds),
    }
    if branch is not None:
        outs["continued"] = "true" if branch.continued else "false"
        # The review branch may be replaced by this checkout when the checkout holds everything the
        # branch held: continued from it, or it had nothing of its own, or (after a rebase
        # conflict) Dream redid all of it successfully.
        outs["update-pr"] = "true" if not branch.fell_back or exit_code == 0 else "false"
    return outs


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _commit_link(sha: str, server_url: str, repository: str) -> str:
    if server_url and repository:
        return f"[`{sha[:10]}`]({server_url}/{repository}/commit/{sha})"
    return f"`{sha[:10]}`"


def render_summary(
    command: str,
    report: Mapping[str, Any] | None,
    exit_code: int,
    *,
    raw_output: str = "",
    server_url: str = "",
    repository: str = "",
    holds: list[dict[str, Any]] | None = None,
    branch: Branch | None = None,
) -> str:
    """The markdown the job summary (and a pull request body) shows for one command."""
    holds = holds or []
    outs = outputs_for(report, exit_code, holds=len(all_holds(report, holds)), branch=branch)
    lines = [f"### dream {command}: {outs['status']} (exit {exit_code})", ""]
    if branch is not None:
        lines += [f"_{branch.note}._", ""]
    if report is None:
        lines.append("The command printed no JSON report.")
        if raw_output.strip():
            lines += ["", "```", raw_output.strip()[:4000], "```"]
        return "\n".join(lines) + "\n"
    if command != "run":
        lines += ["```json", json.dumps(report, indent=2, ensure_ascii=False)[:6000], "```"]
        return "\n".join(lines) + "\n"

    usage = report.get("usage") or {}
    batches = [b for b in report.get("batches") or [] if isinstance(b, Mapping)]
    files = [f for f in report.get("files_changed") or [] if isinstance(f, Mapping)]
    cost = usage.get("cost_usd")
    lines += [
        "| | |",
        "|---|---|",
        f"| workspace | `{_cell(report.get('workspace', '?'))}` |",
        f"| model | `{_cell(report.get('model', '?'))}` |",
        f"| entries processed | {report.get('entries_processed', 0)} "
        f"(cursor {report.get('cursor_before', '?')} → {report.get('cursor_after', '?')}) |",
        f"| facts | {sum(_facts(b) for b in batches)} |",
        f"| files changed | {len(files)} |",
        f"| content changed | {outs['changed']} |",
        f"| held for review | {outs['held']} ({len(report.get('held') or [])} held by this run) |",
        f"| tokens | {usage.get('total_tokens', 0)} total: {usage.get('prompt_tokens', 0)} prompt, "
        f"{usage.get('completion_tokens', 0)} completion, {usage.get('llm_calls', 0)} LLM calls |",
        f"| cost | {'unknown' if cost is None else f'${float(cost):.4f}'} |",
        f"| duration | {float(report.get('duration_s') or 0):.1f} s |",
        "",
    ]
    commits = [c for c in report.get("commits") or [] if isinstance(c, str)]
    if commits:
        by_commit = {b.get("commit"): b for b in batches}
        lines += ["**Commits**", ""]
        for sha in commits:
            batch = by_commit.get(sha) or {}
            where = ""
            if batch:
                where = f" cursors {batch.get('cursor_from')}..{batch.get('cursor_to')}, {_facts(batch)} facts"
            lines.append(f"- {_commit_link(sha, server_url, repository)}{where}")
        lines.append("")
    if files:
        lines += ["**Files changed**", "", "| file | + | − |", "|---|---:|---:|"]
        for item in files[:MAX_FILES_LISTED]:
            lines.append(f"| `{_cell(item.get('path'))}` | {item.get('added', 0)} | {item.get('removed', 0)} |")
        if len(files) > MAX_FILES_LISTED:
            lines.append(f"| … and {len(files) - MAX_FILES_LISTED} more | | |")
        lines.append("")
    lines += _sources_section(batches)
    lines += _held_section(report, holds)
    items = [i for i in report.get("set_aside") or [] if isinstance(i, Mapping)]
    if items:
        lines += ["**Set aside**", ""]
        for item in items:
            span = f"{item.get('cursor_from')}..{item.get('cursor_to')}"
            lines.append(f"- cursors {span}: {_cell(item.get('reason', ''))}")
        lines.append("")
    if branch is not None:
        lines += _branch_section(branch, server_url, repository)
    redactions = report.get("redactions") or {}
    if redactions:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(redactions.items()))
        lines += [f"**Redacted secrets** (kinds only): {kinds}", ""]
    errors = [e for e in report.get("errors") or [] if isinstance(e, str)]
    if errors:
        lines += ["**Errors**", ""] + [f"- {_cell(e)}" for e in errors] + [""]
    return "\n".join(lines)


def _evidence(entries: Mapping[Any, Mapping[str, Any]], cursors: Any) -> str:
    shown = []
    for cursor in cursors or []:
        entry = entries.get(cursor) or {}
        text = " ".join(str(entry.get("content", "")).split())[:160]
        session = f", {entry.get('session_key')}" if entry.get("session_key") else ""
        shown.append(f"entry {cursor} ({entry.get('timestamp', '?')}{session}): {text}")
    return _cell("; ".join(shown) or "source unknown")


def _sources_section(batches: list[Mapping[str, Any]]) -> list[str]:
    """Each line a committed batch added or removed, with the history entries it comes from, so a
    reviewer judges a fact by its evidence (docs/provenance.md)."""
    out: list[str] = []
    for batch in batches:
        provenance = batch.get("provenance")
        if batch.get("outcome") != "committed" or not isinstance(provenance, Mapping):
            continue
        entries = {e.get("cursor"): e for e in provenance.get("entries") or [] if isinstance(e, Mapping)}
        for fact in provenance.get("facts") or []:
            for line in fact.get("lines") or []:
                if str(line.get("text", "")).strip():
                    where, text = _cell(line.get("path")), _cell(line.get("text"))
                    out.append(f"- `{where}` + `{text}` ← {_evidence(entries, fact.get('sources'))}")
        by_id = {f.get("id"): f for f in provenance.get("facts") or []}
        for item in provenance.get("removed") or []:
            cursors = [c for n in item.get("facts") or [] for c in (by_id.get(n) or {}).get("sources") or []]
            where, text, reason = _cell(item.get("path")), _cell(item.get("text")), _cell(item.get("reason", ""))
            out.append(f"- `{where}` − `{text}` ({reason}) ← {_evidence(entries, cursors)}")
    return ["**Lines and their sources**", "", *out, ""] if out else []


def all_holds(report: Mapping[str, Any] | None, holds: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """This run's held batches, then the others waiting in the workspace (once each)."""
    items: list[Mapping[str, Any]] = [i for i in (report or {}).get("held") or [] if isinstance(i, Mapping)]
    new_ids = {i.get("id") for i in items}
    by_id = {h.get("id"): h for h in holds}
    items = [{**by_id.get(i.get("id"), {}), **i} for i in items]
    return items + [h for h in holds if h.get("id") not in new_ids]


def _is_range(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)


def _held_section(report: Mapping[str, Any], holds: list[dict[str, Any]]) -> list[str]:
    """Every held batch waiting in the workspace (this run's first), and how to settle it."""
    new_ids = {i.get("id") for i in report.get("held") or [] if isinstance(i, Mapping)}
    items = all_holds(report, holds)
    if not items:
        return []
    lines = [
        f"**Held for review** ({len(items)}): the write policy or a guard held these changes; they wait "
        f"in `{HELD_DIR}/`, and everything else of their batches is in this pull request",
        "",
    ]
    for item in items:
        ident = item.get("id", "?")
        span = f"{item.get('cursor_from')}..{item.get('cursor_to')}"
        files = [f.get("path") for f in item.get("files") or [] if isinstance(f, Mapping)]
        if isinstance(item.get("path"), str):  # a held change: one file, a line range
            rows = item.get("lines")
            where = f" line {rows[0]}" + (f"-{rows[1]}" if rows[1] != rows[0] else "") if _is_range(rows) else ""
            files = [f"{item['path']}{where}"]
        on = f" ({', '.join(f'`{_cell(f)}`' for f in files)})" if files else ""
        when = " (this run)" if ident in new_ids else ""
        lines.append(f"- `{ident}`{when} cursors {span}{on}: {_cell(item.get('reason', ''))}")
    lines += [
        "",
        "The review pull request (branch `dream/review`) accepts them all; or, on this branch, "
        "`dream review show <id>`, then `dream review accept <id>` (or `reject <id>`), and push. "
        "The cursor has moved past them, so no later run dreams them again.",
        "",
    ]
    return lines


def _branch_section(branch: Branch, server_url: str, repository: str) -> list[str]:
    """The commits the review branch holds beyond the default branch (the whole pull request)."""
    log = _git(branch.repo, "log", "--reverse", "--format=%H %s", f"{branch.base}..HEAD")
    commits = [line.split(" ", 1) for line in log.stdout.splitlines() if line.strip()]
    if not commits:
        return [f"**Pending review on `{branch.name}`**: nothing beyond the default branch.", ""]
    lines = [f"**Pending review on `{branch.name}`** ({len(commits)} commit(s) beyond the default branch)", ""]
    for sha, *subject in commits[-MAX_COMMITS_LISTED:]:
        lines.append(f"- {_commit_link(sha, server_url, repository)} {_cell(subject[0] if subject else '')}")
    if len(commits) > MAX_COMMITS_LISTED:
        lines.append(f"- … and {len(commits) - MAX_COMMITS_LISTED} earlier")
    lines.append("")
    return lines


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def run_forwarding_signals(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """The command with its stdout captured, and the SIGINT / SIGTERM this step gets passed on.

    A cancelled run (or the step's timeout-minutes) signals only the step's entry process (this
    script, exec'd by action.yml), then kills the whole tree 10 s later. Without passing the
    signal on, Dream never hears of the stop and is killed without its `interrupted` report;
    subprocess.run would even SIGKILL it 0.25 s after a Ctrl-C. Dream stops within about 2 s
    of the first signal (docs/operations.md, "Stopping a run"), well inside the 7.5 s before the
    runner's second signal.
    """
    # The handlers go in before Dream starts: a cancel landing while Popen forks (a loaded
    # runner) would otherwise end this script with KeyboardInterrupt and leave Dream running,
    # unsignalled, until the runner kills it. A signal before Dream exists is passed on once it does.
    proc: subprocess.Popen[str] | None = None
    pending: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if proc is None:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        for signum in pending:
            forward(signum, None)
        stdout, _ = proc.communicate()  # a handled signal does not interrupt it (PEP 475)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, None)


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    command = env.get("DREAM_ACTION_COMMAND", "run").strip() or "run"
    venv = env.get("DREAM_ACTION_VENV") or sys.prefix
    temp = env.get("RUNNER_TEMP") or tempfile.gettempdir()
    try:
        argv = build_argv(
            command,
            env.get("DREAM_ACTION_WORKSPACE", "."),
            env.get("DREAM_ACTION_MODEL", "").strip(),
            env.get("DREAM_ACTION_ARGS", ""),
            Path(venv) / "bin",
        )
    except ActionInputError as exc:
        print(f"dream-action: error: {exc}", file=sys.stderr)
        _append(env.get("GITHUB_OUTPUT"), "status=usage_error\nexit-code=2\nchanged=false\ncommits=[]\n")
        return 2

    branch = None
    continue_branch = env.get("DREAM_ACTION_CONTINUE_FROM", "").strip()
    if continue_branch and command == "run":
        try:
            branch = continue_from(env.get("DREAM_ACTION_WORKSPACE", ".") or ".", continue_branch)
        except ActionInputError as exc:
            print(f"dream-action: error: {exc}", file=sys.stderr)
            failed = "status=usage_error\nexit-code=2\nchanged=false\ncommits=[]\n"
            # Whatever went wrong, the review branch is not to be replaced by this checkout.
            _append(env.get("GITHUB_OUTPUT"), failed + "continued=false\nupdate-pr=false\n")
            if isinstance(exc, ForeignCommitsError):
                text = f"### dream {command}: refused (exit 2)\n\n```text\n{exc}\n```\n"
                _append(env.get("GITHUB_STEP_SUMMARY"), text)
            return 2
        print(f"dream-action: {branch.note}", file=sys.stderr, flush=True)
    print("dream-action: " + " ".join(shlex.quote(a) for a in argv), file=sys.stderr, flush=True)
    # stderr (progress) streams to the log as it comes; stdout is the report.
    proc = run_forwarding_signals(argv)
    stdout = proc.stdout or ""
    sys.stdout.write(stdout)
    sys.stdout.flush()
    try:
        parsed = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        parsed = None
    report = parsed if isinstance(parsed, dict) else None

    fd, report_path = tempfile.mkstemp(prefix=f"dream-{command}-", suffix=".json", dir=temp)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(stdout if report is not None else json.dumps({"status": None, "output": stdout}))
    holds = pending_holds(env.get("DREAM_ACTION_WORKSPACE", ".") or ".") if command == "run" else []
    summary = render_summary(
        command,
        report,
        proc.returncode,
        raw_output=stdout,
        server_url=env.get("DREAM_ACTION_SERVER_URL", ""),
        repository=env.get("DREAM_ACTION_REPOSITORY", ""),
        holds=holds,
        branch=branch,
    )
    summary_path = report_path[: -len(".json")] + ".md"
    Path(summary_path).write_text(summary, encoding="utf-8")
    outs = {
        "report": report_path,
        "summary": summary_path,
        **outputs_for(report, proc.returncode, holds=len(all_holds(report, holds)), branch=branch),
    }
    _append(env.get("GITHUB_OUTPUT"), "".join(f"{k}={v}\n" for k, v in outs.items()))
    _append(env.get("GITHUB_STEP_SUMMARY"), summary)
    print(
        f"dream-action: status={outs['status']} changed={outs['changed']} exit={proc.returncode}",
        file=sys.stderr,
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
