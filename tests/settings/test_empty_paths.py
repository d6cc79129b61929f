"""An empty path (`-w "$WS"` with WS unset) is refused, exit 2, on every face: it used to mean
"not given", so `dream append` wrote to the default workspace even with DREAM_WORKSPACE set,
`dream init` created it, and `--config ""` read as the folder ".". Real workspaces."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory import Workspace
from dream_memory.errors import ConfigError

Dream = Callable[..., subprocess.CompletedProcess[str]]


def test_an_empty_workspace_is_refused_not_the_default(dream: Dream, clean_env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "-w", str(ws)).returncode == 0
    default = Path(clean_env["HOME"]) / ".nanoinfra"
    for args in (["append", "-w", "", "hello"], ["init", "-w", ""], ["status", "--workspace", ""]):
        done = dream(*args, env={"DREAM_WORKSPACE": str(ws)})
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "the workspace path is empty" in done.stderr and "$DREAM_WORKSPACE" in done.stderr, done.stderr
    assert not default.exists()
    assert not (ws / "memory" / "history.jsonl").exists()  # nothing appended anywhere


def test_an_empty_config_or_store_is_refused(dream: Dream, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert dream("init", "-w", str(ws)).returncode == 0
    done = dream("status", "-w", str(ws), "--config", "")
    assert done.returncode == 2 and "the config file path is empty" in done.stderr, done.stderr
    assert "config file . does not exist" not in done.stderr
    done = dream("search", "--store", "", "anything", env={"DREAM_WORKSPACE": str(ws)})
    assert done.returncode == 2 and "the store path is empty" in done.stderr, done.stderr


@pytest.mark.parametrize("kwargs", [{"path": ""}, {"path": None, "config": ""}])
def test_the_api_refuses_an_empty_path(tmp_path: Path, kwargs: dict[str, str | None]) -> None:
    env = {"HOME": str(tmp_path / "home"), "DREAM_WORKSPACE": str(tmp_path / "ws")}
    with pytest.raises(ConfigError, match="path is empty") as raised:
        Workspace(kwargs.pop("path"), env=env, **kwargs)  # type: ignore[arg-type]
    assert raised.value.exit_code == 2
    assert not (tmp_path / "home" / ".nanoinfra").exists()
