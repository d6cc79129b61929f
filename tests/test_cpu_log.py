"""``pytest --cpu-log PATH`` (tests/conftest.py): where the suite's CPU goes, test by test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
IN_PROCESS = "tests/llm/test_token_counter.py::test_the_heuristic_never_says_zero_for_text"
WITH_A_CHILD = "tests/llm/test_token_counter.py::test_the_real_tokenizer_works_with_no_network"


@pytest.mark.slow
def test_each_test_gets_a_line_with_its_own_cpu_and_its_childrens(tmp_path: Path) -> None:
    """One line per test: the node id, then the CPU of the test process and of the child
    processes it ran; a test that starts a Python process shows that process's CPU."""
    log = tmp_path / "cpu.tsv"
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    done = subprocess.run(
        [*pytest, "--cpu-log", str(log), IN_PROCESS, WITH_A_CHILD],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        node: (float(own), float(children))
        for node, own, children in (line.split("\t") for line in log.read_text().splitlines())
    }
    assert set(rows) == {IN_PROCESS, WITH_A_CHILD}
    assert rows[IN_PROCESS][1] == 0
    assert rows[WITH_A_CHILD][1] > 0.05  # a fresh interpreter that loads the tokenizer
