"""`dream demo` on a disk that cannot take the sample ends with the one table's exit code and
message, and leaves no half-copied sample behind.

Before, copytree's gathered ``shutil.Error`` reached the user as "cannot use the workspace:
[('/…/sample/memory/.cursor', '/tmp/dream-demo-…/workspace/memory/.cursor', "[Errno 28] …")]":
a list of tuples, exit 1 whatever the cause (a read-only temporary folder, which running again
does not fix, too), and the partial copy stayed in the temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.testing import clean_env

# `dream demo` as a real process whose first file copy fails with argv[1]'s errno.
FAILING_COPY = r"""
import errno, os, shutil, sys
code = getattr(errno, sys.argv[1])
def copyfile(src, dst, **kwargs):
    raise OSError(code, os.strerror(code), str(dst))
shutil.copyfile = copyfile
from dream_memory.entrypoints.cli import main
sys.argv = ["dream", "demo"]
main()
"""


@pytest.mark.parametrize(
    ("errno_name", "exit_code", "said"),
    [("ENOSPC", 1, "no space left on the device"), ("EROFS", 2, "the filesystem is read-only")],
)
def test_demo_whose_copy_fails_names_the_cause_and_leaves_nothing(
    tmp_path: Path, errno_name: str, exit_code: int, said: str
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = clean_env(tmp_path / "home", TMPDIR=str(scratch))
    done = subprocess.run(
        [sys.executable, "-c", FAILING_COPY, errno_name], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == exit_code, done.stderr
    assert "dream: error: cannot copy the sample workspace to " in done.stderr
    assert f"/workspace: {said}" in done.stderr
    assert "[Errno" not in done.stderr and "Traceback" not in done.stderr
    assert list(scratch.iterdir()) == []  # the half-copied sample went with the failure


RUN_DEMO = """
import sys
from dream_memory.entrypoints.cli import main
sys.argv = ["dream", "demo", *sys.argv[1:]]
main()
"""


def test_demo_no_keep_leaves_nothing_when_the_run_is_refused(tmp_path: Path) -> None:
    """`dream demo --no-keep --model nosuch`: exit 2 naming the model, and the sample copied
    before the refusal is gone too (it stayed in the temporary folder)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = clean_env(tmp_path / "home", TMPDIR=str(scratch))
    done = subprocess.run(
        [sys.executable, "-c", RUN_DEMO, "--no-keep", "--model", "nosuch", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "nosuch" in done.stderr, done.stderr
    assert list(scratch.iterdir()) == []
