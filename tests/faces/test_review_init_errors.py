"""A workspace that cannot be created ends with the exit code of the one table (exit-codes.md).

Before, every OSError while creating a workspace's folders and templates was a WorkspaceError,
exit 1 ("running again may work"), for `dream init` and for the commands that create missing
templates on the fly (`dream run`): a read-only filesystem, no permission or a file where a
folder belongs said exit 1 too, which a scheduler retries for ever, and mkdir's bare "File exists"
did not say which file was in the way. Now those are WorkspaceUnusable, exit 2, naming the path
and what to do; a full disk stays exit 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.testing import clean_env

# `dream ARGS...` as a real process whose first template write fails with argv[1]'s errno.
FAILING_TEMPLATE = r"""
import errno, os, sys
from dream_memory.testing.faults import at_write, fault_hook
code = getattr(errno, sys.argv[1])
def fail(path):
    raise OSError(code, os.strerror(code), str(path))
with fault_hook(at_write(fail, "template")):
    from dream_memory.entrypoints.cli import main
    sys.argv = ["dream", *sys.argv[2:]]
    main()
"""


def dream(env: dict[str, str], *args: str, failing: str = "") -> subprocess.CompletedProcess[str]:
    """`dream ARGS...` as a process; ``failing`` names an errno the first template write fails with."""
    code = "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()"
    argv = [sys.executable, "-c", FAILING_TEMPLATE, failing] if failing else [sys.executable, "-c", code]
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("errno_name", "exit_code", "said"),
    [
        ("EROFS", 2, "the filesystem is read-only"),
        ("EACCES", 2, "permission denied"),
        ("ENOSPC", 1, "no space left on the device"),
    ],
)
def test_init_that_cannot_write_a_template_exits_as_the_table_says(
    tmp_path: Path, errno_name: str, exit_code: int, said: str
) -> None:
    ws = tmp_path / "ws"
    done = dream(clean_env(tmp_path / "home"), "init", "--workspace", str(ws), failing=errno_name)
    assert done.returncode == exit_code, done.stderr
    assert f"dream: error: cannot create workspace {ws}: {ws / 'SOUL.md'}: {said}" in done.stderr
    assert "hint:" in done.stderr and "Traceback" not in done.stderr


def test_init_with_a_file_where_a_folder_belongs_exits_2_naming_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "memory").write_text("not a folder\n")
    done = dream(clean_env(tmp_path / "home"), "init", "--workspace", str(ws))
    assert done.returncode == 2, done.stderr
    assert f"{ws / 'memory'}: a file stands where a folder belongs" in done.stderr
    assert f"hint: move away the file that stands where {ws / 'memory'} needs a folder" in done.stderr
    assert (ws / "memory").read_text() == "not a folder\n"  # the user's file is left as it was


@pytest.mark.slow
def test_run_recreating_a_template_on_a_read_only_filesystem_exits_2_with_its_report(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert dream(env, "init").returncode == 0
    (ws / "SOUL.md").unlink()  # `dream run` recreates a missing template before any batch
    done = dream(env, "run", "--model", "offline", failing="EROFS")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "failed"
    assert any("read-only" in e and "mount it read-write" in e for e in report["errors"]), report["errors"]
