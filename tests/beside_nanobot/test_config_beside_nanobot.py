"""`--config` pointing at nanobot's own config.json: the model, key and context window it names
are the ones used; what cannot be used is a clear exit 2."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing.llm_server import ScriptedLLMServer, from_chat_model

pytestmark = pytest.mark.nanobot

Dream = Callable[..., subprocess.CompletedProcess[str]]

# nanobot's own Config, saved by its own save_config (camelCase, as `nanobot onboard` writes it):
# a preset on the "custom" (OpenAI-compatible) provider and Dream's modelOverride naming it.
WRITE_CONFIG = """
import json, sys
from pathlib import Path
from nanobot.config.loader import save_config
from nanobot.config.schema import Config
base, path, provider = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
config = Config.model_validate({
    "agents": {"defaults": {"model": "some/other-model", "provider": "auto",
                            "dream": {"enabled": False, "modelOverride": "night"}}},
    "providers": {provider: {"apiKey": "${NIGHT_KEY}", "apiBase": base}},
    "modelPresets": {"night": {"model": "qwen-small", "provider": provider,
                               "contextWindowTokens": 32768, "maxTokens": 2048}},
})
save_config(config, path)
print(json.dumps(json.loads(path.read_text())["modelPresets"]))
"""


def test_nanobots_config_json_names_the_model_key_and_window(nanobot: Nanobot, dream: Dream, tmp_path: Path) -> None:
    """A config.json nanobot itself wrote: dream.modelOverride names preset "night" (model
    qwen-small on providers.custom, key "${NIGHT_KEY}", contextWindowTokens 32768). `dream run`
    sends that model with that key to that endpoint; `dream consolidate` sizes its budget from
    that window; nanobot's `enabled: false` for its own Dream is accepted."""
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        config = tmp_path / "nanobot" / "config.json"
        presets = nanobot.run(WRITE_CONFIG, server.base_url, str(config), "custom")
        assert presets["night"]["contextWindowTokens"] == 32768
        ws = tmp_path / "ws"
        assert dream("init", "--workspace", str(ws)).returncode == 0
        assert dream("append", "- User prefers green tea", "--workspace", str(ws)).returncode == 0
        env = {"NIGHT_KEY": "night-test-key"}
        run = dream("run", "--config", str(config), "--workspace", str(ws), env=env)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["model"] == "openai/qwen-small"
        request = server.completion_requests()[0]
        assert request.body["model"] == "qwen-small"
        assert request.headers["authorization"] == "Bearer night-test-key"
        plan = dream("consolidate", "--all", "--dry-run", "--config", str(config), "--workspace", str(ws), env=env)
        assert plan.returncode == 0, plan.stderr
        assert json.loads(plan.stdout)["budget_tokens"] == 32768 - 2048 - 1024


@pytest.mark.parametrize(
    ("provider", "env", "message"),
    [
        ("githubCopilot", {"NIGHT_KEY": "k"}, "signs in interactively"),
        ("custom", {}, "${NIGHT_KEY}, which is not set"),
    ],
)
def test_what_a_nanobot_config_cannot_give_is_a_clear_exit_2(
    nanobot: Nanobot, dream: Dream, tmp_path: Path, provider: str, env: dict[str, str], message: str
) -> None:
    """An OAuth provider, or a key reference to an unset variable: exit 2 before anything is
    locked, one line naming the field, never a traceback and never the key."""
    config = tmp_path / "config.json"
    nanobot.run(WRITE_CONFIG, "http://127.0.0.1:9/v1", str(config), provider)
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = dream("run", "--config", str(config), "--workspace", str(ws), env=env)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
