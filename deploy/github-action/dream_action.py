"""The run step of the dream-memory GitHub Action (action.yml at the repository root).

Reads the action's inputs from ``DREAM_ACTION_*`` variables (never interpolated into a shell),
runs ``dream-run`` / ``dream-consolidate`` / ``dream-restore`` from the action's venv, saves the
JSON it prints as the report, writes the step outputs (report, summary, changed, commits, status,
exit-code) and a markdown summary to ``$GITHUB_STEP_SUMMARY``, and exits with the command's exit
code (0 ok, 1 failed, 2 bad usage or config, 75 locked).

Standard library only: it also runs under ``act`` and in tests without the package imported.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

COMMANDS = {"run": "dream-run", "consolidate": "dream-consolidate", "restore": "dream-restore"}
STATUS_BY_EXIT = {0: "ok", 1: "failed", 2: "usage_error", 75: "locked"}
MAX_FILES_LISTED = 50


class ActionInputError(Exception):
    """An input the action cannot use; reported as exit 2 like the CLI's usage errors."""


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


def _facts(batch: Mapping[str, Any]) -> int:
    facts = batch.get("facts")
    if isinstance(facts, bool):
        return int(facts)
    if isinstance(facts, int):
        return facts
    if isinstance(facts, list):
        return len(facts)
    return 0


def outputs_for(report: Mapping[str, Any] | None, exit_code: int) -> dict[str, str]:
    report = report or {}
    status = report.get("status")
    if not isinstance(status, str) or not status:
        status = STATUS_BY_EXIT.get(exit_code, "failed")
    commits = [c for c in report.get("commits") or [] if isinstance(c, str)]
    return {
        "changed": "true" if report.get("changed") is True else "false",
        "commits": json.dumps(commits),
        "status": status,
        "exit-code": str(exit_code),
    }


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
) -> str:
    """The markdown the job summary (and a pull request body) shows for one command."""
    outs = outputs_for(report, exit_code)
    lines = [f"### dream {command}: {outs['status']} (exit {exit_code})", ""]
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
    for key, title in (("held", "Held for review"), ("set_aside", "Set aside")):
        items = [i for i in report.get(key) or [] if isinstance(i, Mapping)]
        if items:
            lines += [f"**{title}**", ""]
            for item in items:
                ident = f"`{item['id']}` " if item.get("id") else ""
                span = f"{item.get('cursor_from')}..{item.get('cursor_to')}"
                lines.append(f"- {ident}cursors {span}: {_cell(item.get('reason', ''))}")
            lines.append("")
    redactions = report.get("redactions") or {}
    if redactions:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(redactions.items()))
        lines += [f"**Redacted secrets** (kinds only): {kinds}", ""]
    errors = [e for e in report.get("errors") or [] if isinstance(e, str)]
    if errors:
        lines += ["**Errors**", ""] + [f"- {_cell(e)}" for e in errors] + [""]
    return "\n".join(lines)


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


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

    print("dream-action: " + " ".join(shlex.quote(a) for a in argv), file=sys.stderr, flush=True)
    # stderr (progress) streams to the log as it comes; stdout is the report.
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
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
    summary = render_summary(
        command,
        report,
        proc.returncode,
        raw_output=stdout,
        server_url=env.get("DREAM_ACTION_SERVER_URL", ""),
        repository=env.get("DREAM_ACTION_REPOSITORY", ""),
    )
    summary_path = report_path[: -len(".json")] + ".md"
    Path(summary_path).write_text(summary, encoding="utf-8")
    outs = {"report": report_path, "summary": summary_path, **outputs_for(report, proc.returncode)}
    _append(env.get("GITHUB_OUTPUT"), "".join(f"{k}={v}\n" for k, v in outs.items()))
    _append(env.get("GITHUB_STEP_SUMMARY"), summary)
    print(
        f"dream-action: status={outs['status']} changed={outs['changed']} exit={proc.returncode}",
        file=sys.stderr,
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
