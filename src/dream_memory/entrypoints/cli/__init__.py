"""The ``dream`` command group and its alias scripts (CONTRACT sections 1 and 5).

Each command lives in a small module by topic; this file only assembles them.
"""

from __future__ import annotations

import click

from dream_memory import __version__
from dream_memory.entrypoints.cli import (
    agent_cmds,
    consolidate_cmd,
    deploy_cmds,
    dream_cmds,
    eval_cmd,
    history_cmds,
    read_cmds,
    version_cmds,
)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="dream-memory")
def cli() -> None:
    """dream-memory: long-term memory for AI agents, kept as versioned markdown.

    history.jsonl is drained by Dream into SOUL.md, USER.md, memory/MEMORY.md and skills/, one git
    commit per batch; every change can be inspected (dream log) and undone (dream restore).

    Exit codes: 0 ok or nothing to do, 1 the work failed, 2 bad usage/config/input,
    75 the workspace is locked by another Dream run.
    """


for _module in (
    history_cmds,
    dream_cmds,
    version_cmds,
    consolidate_cmd,
    read_cmds,
    agent_cmds,
    eval_cmd,
    deploy_cmds,
):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    cli(prog_name="dream")


def run_main() -> None:
    dream_cmds.run.main(prog_name="dream-run")


def consolidate_main() -> None:
    consolidate_cmd.consolidate.main(prog_name="dream-consolidate")


def restore_main() -> None:
    version_cmds.restore.main(prog_name="dream-restore")


def mcp_main() -> None:
    read_cmds.mcp.main(prog_name="dream-mcp")
