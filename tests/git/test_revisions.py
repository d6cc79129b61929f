"""Revisions a person types wrong are exit 2 at once, naming the revision: `HEAD~N` past the
first commit however large N is (a huge N used to spin for ever, with `dream restore` holding the
Dream lock, so every run and review meanwhile was exit 75), and digits that are not ASCII
(`HEAD~²` was reported as a damaged repository, `HEAD~١` read as HEAD~1)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.parametrize(
    ("rev", "said"),
    [
        ("HEAD~99999999999999999999", "goes past the first commit"),
        ("HEAD~" + "9" * 40, "goes past the first commit"),
        ("HEAD~²", "HEAD~N takes a number of steps"),
        ("HEAD~١", "HEAD~N takes a number of steps"),
    ],
)
@pytest.mark.parametrize("command", ["restore", "log"])
def test_a_bad_head_n_is_exit_2_at_once(tmp_path: Path, dream: Dream, command: str, rev: str, said: str) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User likes green tea"])
    assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    result = dream(command, "-w", str(ws), rev)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
    assert "damaged" not in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--limit", "5", "HEAD"), "--limit sets how many versions"),
        (("--apply-held", "1-1.1", "--replay"), "--replay moves the cursor back"),
    ],
)
def test_a_restore_option_that_would_be_ignored_is_exit_2(
    tmp_path: Path, dream: Dream, args: tuple[str, ...], said: str
) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User likes green tea"])
    assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    result = dream("restore", "-w", str(ws), *args)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
