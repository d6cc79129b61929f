"""The ``dream`` command group and its alias scripts (docs/reference/commands.md).

Each command lives in a small module by topic; this file only assembles them. A command's module
is imported when that command runs (``dream search`` does not pay for the consolidation or eval
commands' imports: start-up is part of every read's latency).
"""

from __future__ import annotations

import copy
import importlib

import click

from dream_memory import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# command name -> the module (in this package) that defines it, in its COMMANDS list
COMMAND_MODULES: dict[str, str] = {
    "init": "history_cmds",
    "append": "history_cmds",
    "status": "history_cmds",
    "run": "dream_cmds",
    "prompt": "dream_cmds",
    "demo": "dream_cmds",
    "log": "version_cmds",
    "restore": "version_cmds",
    "forget": "forget_cmd",
    "review": "review_cmds",
    "why": "why_cmds",
    "blame": "why_cmds",
    "consolidate": "consolidate_cmd",
    "resolve": "read_cmds",
    "entity": "read_cmds",
    "section": "read_cmds",
    "search": "read_cmds",
    "mcp": "read_cmds",
    "context": "agent_cmds",
    "eval": "eval_cmd",
    "schedule": "deploy_cmds",
    "doctor": "doctor_cmd",
}


def load_command(name: str) -> click.Command:
    module = importlib.import_module(f"{__name__}.{COMMAND_MODULES[name]}")
    for command in module.COMMANDS:
        if command.name == name:
            return command  # type: ignore[no-any-return]
    raise LookupError(f"{module.__name__} does not define the {name!r} command")


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            self.add_command(load_command(cmd_name))
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="dream-memory")
def cli() -> None:
    """dream-memory: long-term memory for AI agents, kept as versioned markdown.

    history.jsonl is drained by Dream into SOUL.md, USER.md, memory/MEMORY.md and skills/, one git
    commit per batch; every change can be inspected (dream log) and undone (dream restore).

    Exit codes: 0 ok or nothing to do, 1 the work failed, 2 bad usage/config/input,
    75 the workspace is locked by another Dream run (or its repository was repacked while
    read): nothing was done, run again later.
    """


def main() -> None:
    cli(prog_name="dream")


def alias(name: str) -> click.Command:
    """The command ``name`` as its own console script: the same command, plus ``--version``
    (the container's entry point is ``dream-run``: it must be able to say what it is)."""
    command = copy.copy(load_command(name))
    command.params = [*command.params]
    click.version_option(__version__, prog_name="dream-memory")(command)
    return command


def run_main() -> None:
    alias("run").main(prog_name="dream-run")


def consolidate_main() -> None:
    alias("consolidate").main(prog_name="dream-consolidate")


def restore_main() -> None:
    alias("restore").main(prog_name="dream-restore")


def mcp_main() -> None:
    alias("mcp").main(prog_name="dream-mcp")
