"""Every module imports on its own, and the read side's start-up stays light.

A module that works only because another one happened to be imported first (an import cycle
resolved by luck, a name another module defines) breaks the first user who imports it alone.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from arch_helpers import SRC, module_names

# One interpreter, each of our modules imported with none of ours loaded before it: third-party
# packages stay loaded between modules (they cannot depend on the order of *our* imports), which
# makes ~90 fresh imports cost seconds instead of a minute of interpreter start-ups.
EACH_ALONE = r"""
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "dream_memory" or m.startswith("dream_memory.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc(limit=3)
print(json.dumps(failed))
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=SRC.parent, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow  # a fresh interpreter for every module of the package
def test_every_module_imports_alone() -> None:
    """Each module of src/dream_memory imports with none of the package loaded before it."""
    failed = json.loads(_run(EACH_ALONE, json.dumps(sorted(module_names()))))
    assert not failed, "\n".join(f"{name}:\n{trace}" for name, trace in failed.items())


LOADED = r"""
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _top_level_after(module: str) -> set[str]:
    return set(json.loads(_run(LOADED, module)))


def test_the_read_side_and_settings_load_no_heavy_dependency() -> None:
    """`dream search` and `dream entity` start fast: the read service and the settings they read
    pull in neither pydantic (the config schema) nor dulwich (git) nor litellm nor the MCP SDK."""
    for module in ("dream_memory.settings", "dream_memory.app.read", "dream_memory.entrypoints.cli.read_cmds"):
        heavy = {"pydantic", "dulwich", "litellm", "mcp"} & _top_level_after(module)
        assert not heavy, f"importing {module} loads {sorted(heavy)}"
