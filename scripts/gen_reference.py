#!/usr/bin/env python3
"""Write docs/commands.md from the CLI's own --help texts, so the reference cannot drift.

.venv/bin/python scripts/gen_commands_doc.py          # rewrite docs/commands.md
.venv/bin/python scripts/gen_commands_doc.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

from dream_memory.entrypoints.cli import cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "commands.md"

INTRO = """\
# Commands

Every command is part of the `dream` group; four are also installed as their own scripts:
`dream-run` (= `dream run`), `dream-consolidate`, `dream-restore` and `dream-mcp`. Every command
takes `--workspace` (default `$DREAM_WORKSPACE`, else `~/.nanoinfra/workspaces/default`) and
`--config`; those with structured output take `--json`. Results go to stdout, progress and logs
to stderr.

| exit code | meaning |
|---|---|
| 0 | success, or nothing to do (also a Dream run whose batches were held, set aside or stopped by a budget) |
| 1 | the work failed (a batch failed, a restore conflict, an unknown entity on the read side) |
| 2 | bad usage, bad configuration or bad input (including a missing API key variable) |
| 75 | the workspace is locked by another Dream run (nothing was done) |

Topics: [Dream](dream.md) (`run`, `prompt`, `demo`), [history](memory-model.md) (`init`,
`append`, `status`), [consolidation](consolidation.md) (`consolidate`),
[versioning](versioning.md) (`log`, `restore`), [read side](read-side.md) (`resolve`, `entity`,
`section`, `search`, `mcp`), [integration](integration.md) (`context`),
[benchmarks](benchmarks.md) (`eval`), deployment (`schedule`:
[Docker](deploy-docker.md), [GitHub Actions](deploy-github-actions.md),
[Kubernetes](deploy-kubernetes.md)).

This page is generated from the commands' own help (`scripts/gen_commands_doc.py`).
"""


def render() -> str:
    runner = CliRunner()
    top = runner.invoke(cli, ["--help"], terminal_width=100, prog_name="dream").output.rstrip()
    parts = [INTRO, "## dream\n", "```text", top, "```\n"]
    group = cli
    assert isinstance(group, click.Group)
    for name in group.list_commands(click.Context(group)):
        result = runner.invoke(cli, [name, "--help"], terminal_width=100, prog_name="dream")
        parts += [f"## dream {name}\n", "```text", result.output.rstrip(), "```\n"]
    return "\n".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if DOC.read_text(encoding="utf-8") != text:
            print("docs/commands.md is out of date: run scripts/gen_commands_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
