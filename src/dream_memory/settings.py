"""Configuration: the pydantic models, where a config file is found, and model resolution.

This is the only module that reads the environment. Everything else receives a ``Settings``.
The pydantic models live in ``dream_memory.config`` and load only when a command needs the
configuration, so read-only commands start fast (``load_read_settings``).
Precedence rules (CONTRACT sections 2 and 4) live here and nowhere else:

- workspace: ``--workspace`` > ``DREAM_WORKSPACE`` > ``~/.nanoinfra/workspaces/default``
- config file: ``--config`` > ``DREAM_CONFIG`` > ``<workspace>/dream.json`` > ``~/.nanoinfra/config.json``
- model: ``--model`` > ``DREAM_MODEL`` > ``dream.modelOverride`` > ``agents.defaults.model``

Error messages name the file and the field, never the value (a value may be a secret).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.errors import ConfigError

if TYPE_CHECKING:
    from dream_memory.config import Config, DreamSettings

OFFLINE_MODEL = "offline"
DEFAULT_GIT_AUTHOR = "dream-memory <dream-memory@localhost>"


def default_workspace(env: Mapping[str, str]) -> Path:
    home = Path(env.get("HOME") or Path.home())
    return home / ".nanoinfra" / "workspaces" / "default"


def resolve_workspace(option: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    raw = option if option is not None else env.get("DREAM_WORKSPACE") or None
    path = Path(raw).expanduser() if raw else default_workspace(env)
    return Path(os.path.abspath(path))


def resolve_config_path(
    option: str | os.PathLike[str] | None, workspace: Path, env: Mapping[str, str]
) -> tuple[Path | None, bool]:
    """The config file to read and whether it was asked for explicitly (then it must exist)."""
    if option is not None:
        return Path(option).expanduser(), True
    if env.get("DREAM_CONFIG"):
        return Path(env["DREAM_CONFIG"]).expanduser(), True
    local = workspace / "dream.json"
    if local.is_file():
        return local, False
    home = Path(env.get("HOME") or Path.home())
    shared = home / ".nanoinfra" / "config.json"
    if shared.is_file():
        return shared, False
    return None, False


# Where litellm looks for a provider's key when no preset names one. Used only to fail early with
# the variable's name instead of a provider error after the lock is taken.
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "xai": "XAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
}


@dataclass(frozen=True)
class ResolvedModel:
    """The model a command will use, with the secret already looked up (never printed)."""

    name: str  # "offline", or a litellm model id
    source: str  # which setting chose it, for messages: "--model", "DREAM_MODEL", ...
    preset: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    max_tokens: int = 4096
    timeout: float = 120.0
    context_window: int | None = None
    max_retries: int = 3
    retry_base_seconds: float = 1.0
    edit_protocol: str = "tools"  # how phase 2 edits: tools | text | auto | facts

    @property
    def is_offline(self) -> bool:
        return self.name == OFFLINE_MODEL


def resolve_model(config: Config, cli_model: str | None, env: Mapping[str, str]) -> ResolvedModel | None:
    """Apply the model precedence; None when nothing is configured.

    Raises ConfigError for a modelOverride that is not a preset, and for a missing API key
    variable (naming the variable), so that happens before any lock is taken.
    """
    dream = config.agents.defaults.dream
    choice: tuple[str, str] | None = None
    if cli_model:
        choice = (cli_model, "--model")
    elif env.get("DREAM_MODEL"):
        choice = (env["DREAM_MODEL"], "DREAM_MODEL")
    elif dream.model_override:
        nanobot_default = dream.model_override == "default" and _is_nanobot_config(config)
        if dream.model_override not in (OFFLINE_MODEL, *config.model_presets) and not nanobot_default:
            raise ConfigError(
                f"agents.defaults.dream.modelOverride names no preset in modelPresets "
                f"(known presets: {', '.join(sorted(config.model_presets)) or 'none'})",
                hint="modelOverride accepts preset names only; define the model under modelPresets",
            )
        choice = (dream.model_override, "agents.defaults.dream.modelOverride")
    elif config.agents.defaults.model_preset:
        choice = (config.agents.defaults.model_preset, "agents.defaults.modelPreset")
    elif config.agents.defaults.model:
        choice = (config.agents.defaults.model, "agents.defaults.model")
    if choice is None:
        return None
    name, source = choice
    if name == OFFLINE_MODEL:
        return ResolvedModel(name=OFFLINE_MODEL, source=source)
    nanobot = _nanobot_model(config, name, source, env)
    if nanobot is not None:
        return nanobot

    preset = config.model_presets.get(name)
    api_base = env.get("DREAM_API_BASE") or (preset.api_base if preset else None)
    api_key = env.get("DREAM_API_KEY") or None
    if preset is not None:
        model_id = preset.model
        if api_key is None and preset.api_key_env:
            api_key = env.get(preset.api_key_env) or None
            if api_key is None:
                raise ConfigError(
                    f"model preset {name!r} reads its API key from {preset.api_key_env}, which is not set",
                    hint=f"export {preset.api_key_env}=... (or DREAM_API_KEY), or choose --model offline",
                )
    else:
        model_id = name
    if model_id == OFFLINE_MODEL:
        return ResolvedModel(name=OFFLINE_MODEL, source=source, preset=name if preset else None)
    if api_key is None and api_base is None and not (preset and preset.api_key_env):
        provider = model_id.split("/", 1)[0] if "/" in model_id else "openai"
        var = PROVIDER_KEY_ENV.get(provider)
        if var is not None:
            api_key = env.get(var) or None
            if api_key is None:
                raise ConfigError(
                    f"model {model_id} needs an API key in {var} (or DREAM_API_KEY), which is not set",
                    hint=f"export {var}=..., set DREAM_API_BASE for a local server, or use --model offline",
                )
    return ResolvedModel(
        name=model_id,
        source=source,
        preset=name if preset else None,
        api_base=api_base,
        api_key=api_key,
        temperature=preset.temperature if preset else 0.0,
        max_tokens=preset.max_tokens if preset else 4096,
        timeout=preset.timeout if preset else 120.0,
        context_window=preset.context_window if preset else None,
        max_retries=preset.max_retries if preset else 3,
        retry_base_seconds=preset.retry_base_seconds if preset else 1.0,
        edit_protocol=preset.edit_protocol if preset else "tools",
    )


# nanobot's provider names (its config.json's `providers` keys, compared without case, "_" or
# "-") and the litellm provider each one is. "custom" and any other entry with an apiBase is an
# OpenAI-compatible endpoint.
NANOBOT_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "openrouter": "openrouter",
    "deepseek": "deepseek",
    "groq": "groq",
    "gemini": "gemini",
    "mistral": "mistral",
    "ollama": "ollama",
    "vllm": "hosted_vllm",
    "lmstudio": "lm_studio",
    "dashscope": "dashscope",
    "moonshot": "moonshot",
    "huggingface": "huggingface",
    "nvidia": "nvidia_nim",
    "custom": "openai",
}
# Sign-in (OAuth) or cloud-credential providers: nothing in config.json a batch job can use.
NANOBOT_UNSUPPORTED = ("openaicodex", "githubcopilot", "xaigrok", "azureopenai", "bedrock")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _is_nanobot_config(config: Config) -> bool:
    defaults = config.agents.defaults
    return bool(
        config.providers
        or defaults.provider
        or defaults.model_preset
        or any(p.provider for p in config.model_presets.values())
    )


def _nanobot_model(config: Config, name: str, source: str, env: Mapping[str, str]) -> ResolvedModel | None:
    """The model a nanobot config.json names (None when the config is not nanobot's, or the name
    is one of our own presets with its own key settings).

    As nanobot reads it: a preset (or, named "default" or a model id, the implicit preset of
    ``agents.defaults``: model, provider, maxTokens, contextWindowTokens, temperature) whose
    ``provider`` ("auto": the model's prefix, else the one provider with a key) names an entry
    of ``providers`` holding ``apiKey`` (``${VAR}`` taken from the environment) and ``apiBase``.
    """
    if not _is_nanobot_config(config):
        return None
    defaults = config.agents.defaults
    preset = config.model_presets.get(name)
    if preset is not None and (preset.api_key_env or preset.api_base):
        return None  # a dream-memory preset: resolved the usual way
    if preset is not None:
        model, provider, where = preset.model, preset.provider, f"modelPresets.{name}"
        max_tokens, temperature = preset.max_tokens, preset.temperature
        window = preset.context_window_tokens or preset.context_window
    else:
        if name == "default" and not defaults.model:
            raise ConfigError("the nanobot config names the default preset, but agents.defaults.model is not set")
        model = defaults.model if name == "default" and defaults.model else name
        provider = defaults.provider
        max_tokens = defaults.max_tokens or 4096
        window = defaults.context_window_tokens
        temperature = defaults.temperature if defaults.temperature is not None else 0.0
        where = "agents.defaults"
    entry_name = _nanobot_provider(config, model, provider, where)
    entry = config.providers.get(entry_name) if entry_name else None
    key_name = _norm(entry_name or "")
    field_prefix = f"providers.{entry_name}"
    api_key = env.get("DREAM_API_KEY") or _expand(entry.api_key if entry else None, f"{field_prefix}.apiKey", env)
    api_base = env.get("DREAM_API_BASE") or _expand(entry.api_base if entry else None, f"{field_prefix}.apiBase", env)
    prefix = NANOBOT_PROVIDERS.get(key_name)
    if prefix is None:
        if not api_base:
            raise ConfigError(
                f"{where} uses provider {entry_name!r}, which dream-memory does not know and which has no apiBase",
                hint="set providers.<name>.apiBase to its OpenAI-compatible endpoint, or define a dream-memory "
                "preset (modelPresets with apiBase and apiKeyEnv; see docs/nanobot.md)",
            )
        prefix = "openai"
    model_id = model if model.startswith(prefix + "/") else f"{prefix}/{model}"
    if api_key is None and prefix not in ("ollama", "hosted_vllm", "lm_studio") and not api_base:
        raise ConfigError(
            f"{where} uses provider {entry_name!r}, but providers.{entry_name}.apiKey is empty",
            hint="set it in the nanobot config (or export DREAM_API_KEY), or choose --model offline",
        )
    return ResolvedModel(
        name=model_id,
        source=source,
        preset=name if preset is not None else None,
        api_base=api_base,
        api_key=api_key,
        temperature=temperature,
        max_tokens=max_tokens,
        context_window=window,
    )


def _nanobot_provider(config: Config, model: str, provider: str | None, where: str) -> str:
    """The ``providers`` entry a nanobot model uses (its name as written in the config)."""
    entries = {_norm(k): k for k, v in config.providers.items() if v is not None}
    if provider and provider != "auto":
        wanted = _norm(provider)
    else:
        head = _norm(model.split("/", 1)[0]) if "/" in model else ""
        if head in entries:
            wanted = head
        else:
            usable = [k for k, v in config.providers.items() if v is not None and (v.api_key or v.api_base)]
            if len(usable) != 1:
                raise ConfigError(
                    f"{where}: cannot tell which provider serves {model!r} (provider is auto and "
                    f"{len(usable)} providers have a key)",
                    hint=f"set {where}.provider to one of: {', '.join(sorted(entries)) or 'none configured'}",
                )
            return usable[0]
    if wanted in NANOBOT_UNSUPPORTED:
        raise ConfigError(
            f"{where} uses provider {provider!r}, which signs in interactively or uses cloud credentials: "
            "dream-memory cannot use it from a nanobot config",
            hint="define a dream-memory preset for a provider with an API key (docs/nanobot.md)",
        )
    if wanted not in entries:
        raise ConfigError(
            f"{where} uses provider {provider or wanted!r}, which has no entry under providers",
            hint=f"add providers.{provider or wanted} with its apiKey (and apiBase), or choose --model offline",
        )
    return entries[wanted]


def _expand(value: str | None, field_name: str, env: Mapping[str, str]) -> str | None:
    """A config value with nanobot's ``${VAR}`` references taken from the environment."""
    if not value:
        return None
    missing = [m for m in _ENV_REF.findall(value) if m not in env]
    if missing:
        raise ConfigError(
            f"{field_name} refers to ${{{missing[0]}}}, which is not set", hint=f"export {missing[0]}=..."
        )
    return _ENV_REF.sub(lambda m: env[m.group(1)], value) or None


def search_cache_dir(env: Mapping[str, str]) -> Path | None:
    """Where search may keep its index: $XDG_CACHE_HOME/dream-memory, else ~/.cache/dream-memory
    (None when neither is an absolute path)."""
    base = env.get("XDG_CACHE_HOME") or (str(Path(env["HOME"]) / ".cache") if env.get("HOME") else "")
    return Path(base) / "dream-memory" if base and Path(base).is_absolute() else None


def parse_excludes(raw: str | None) -> frozenset[str]:
    """DREAM_MEMORY_EXCLUDE: comma-separated entity names, compared case-insensitively."""
    if not raw:
        return frozenset()
    return frozenset(part.strip().casefold() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class Settings:
    """Everything a command needs from its surroundings, resolved once."""

    workspace: Path
    config: Config
    config_path: Path | None
    env: Mapping[str, str] = field(repr=False)

    @property
    def dream(self) -> DreamSettings:
        return self.config.agents.defaults.dream

    @property
    def store(self) -> Path:
        """Read-side store root: DREAM_MEMORY_STORE > the workspace (``--store`` is applied by the CLI)."""
        raw = self.env.get("DREAM_MEMORY_STORE")
        return Path(os.path.abspath(Path(raw).expanduser())) if raw else self.workspace

    @property
    def excludes(self) -> frozenset[str]:
        return parse_excludes(self.env.get("DREAM_MEMORY_EXCLUDE"))

    def model(self, cli_model: str | None = None) -> ResolvedModel | None:
        return resolve_model(self.config, cli_model, self.env)


def load_settings(
    workspace: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    from dream_memory.config import Config, load_config_file

    environ = dict(os.environ if env is None else env)
    ws = resolve_workspace(workspace, environ)
    path, explicit = resolve_config_path(config, ws, environ)
    if path is None:
        cfg = Config()
    elif not path.is_file() and explicit:
        raise ConfigError(f"config file {path} does not exist")
    else:
        cfg = load_config_file(path)
    return Settings(workspace=ws, config=cfg, config_path=path, env=environ)


@dataclass(frozen=True)
class ReadSettings:
    """What the read side needs: no config file, no pydantic (keeps `dream search` start-up fast)."""

    workspace: Path
    store: Path
    excludes: frozenset[str]
    env: Mapping[str, str] = field(repr=False)


def load_read_settings(
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ReadSettings:
    """Store root: ``--store`` > ``DREAM_MEMORY_STORE`` > the workspace (CONTRACT section 7)."""
    environ = dict(os.environ if env is None else env)
    ws = resolve_workspace(workspace, environ)
    if store is not None:
        root = Path(os.path.abspath(Path(store).expanduser()))
    elif environ.get("DREAM_MEMORY_STORE"):
        root = Path(os.path.abspath(Path(environ["DREAM_MEMORY_STORE"]).expanduser()))
    else:
        root = ws
    return ReadSettings(
        workspace=ws, store=root, excludes=parse_excludes(environ.get("DREAM_MEMORY_EXCLUDE")), env=environ
    )
