"""A config value holding half of a character (a JSON "\\ud83d" escape: valid JSON, not text)
is a config error naming the key, exit 2, before anything is written. Before, a git author
holding one got through validation and every command failed at its first commit: `dream init`
with a traceback, `dream run` with an internal error, both exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.testing import clean_env


def dream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (
            '{"agents": {"defaults": {"dream": {"gitAuthor": "Zo\\ud83d <z@example.invalid>"}}}}',
            "agents.defaults.dream.gitAuthor",
        ),
        ('{"modelPresets": {"m\\udcff": {"model": "openai/x"}}}', "modelPresets.m\\udcff"),
    ],
)
@pytest.mark.parametrize("command", [("init",), ("run", "--model", "offline")])
def test_half_a_character_in_the_config_is_a_config_error_naming_the_key(
    tmp_path: Path, config: str, key: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "dream.json"
    path.write_text(config, encoding="utf-8")
    env = clean_env(tmp_path / "home", DREAM_CONFIG=str(path), DREAM_WORKSPACE=str(tmp_path / "ws"))

    done = dream(env, *command)

    assert done.returncode == 2, done.stderr
    assert f"{key} holds half of a character" in done.stderr.encode("utf-8", "backslashreplace").decode(), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert not (tmp_path / "ws" / ".git").exists()
