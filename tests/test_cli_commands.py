"""The ``dream`` group loads each command's module only when that command runs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from dream_memory.entrypoints.cli import COMMAND_MODULES, cli


def test_every_command_is_listed_under_its_module() -> None:
    """A command defined in a module but missing from COMMAND_MODULES (or listed under the wrong
    module) would vanish from `dream`: the table and the modules agree."""
    modules = set(COMMAND_MODULES.values())
    defined = {
        command.name: module
        for module in modules
        for command in importlib.import_module(f"dream_memory.entrypoints.cli.{module}").COMMANDS
    }
    assert defined == COMMAND_MODULES


def test_help_lists_every_command() -> None:
    from click.testing import CliRunner

    out = CliRunner().invoke(cli, ["--help"], terminal_width=200).output
    for name in COMMAND_MODULES:
        assert f"\n  {name} " in out


def test_a_read_command_does_not_import_the_others(tmp_path: Path) -> None:
    """`dream search` starts without importing consolidation, eval, Dream or the MCP SDK."""
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from dream_memory.entrypoints.cli import cli\n"
        f"result = CliRunner().invoke(cli, ['search', 'x', '--store', {str(tmp_path)!r}])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert "dream_memory.entrypoints.cli.read_cmds" in loaded
    for heavy in ("consolidate_cmd", "eval_cmd", "dream_cmds", "agent_cmds"):
        assert f"dream_memory.entrypoints.cli.{heavy}" not in loaded
    assert not {"mcp", "litellm", "dulwich", "pydantic"} & loaded
