"""Configuration: the pydantic models, where a config file is found, and model resolution.

This is the only module that reads the environment. Everything else receives a ``Settings``.
Precedence rules (CONTRACT sections 2 and 4) live here and nowhere else:

- workspace: ``--workspace`` > ``DREAM_WORKSPACE`` > ``~/.nanoinfra/workspaces/default``
- config file: ``--config`` > ``DREAM_CONFIG`` > ``<workspace>/dream.json`` > ``~/.nanoinfra/config.json``
- model: ``--model`` > ``DREAM_MODEL`` > ``dream.modelOverride`` > ``agents.defaults.model``

Error messages name the file and the field, never the value (a value may be a secret).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from dream_memory.errors import ConfigError

OFFLINE_MODEL = "offline"
DEFAULT_GIT_AUTHOR = "dream-memory <dream-memory@localhost>"


class _Model(BaseModel):
    """camelCase and snake_case keys both accepted; unknown keys kept so they can be warned about."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=to_camel),
        populate_by_name=True,
        extra="allow",
        frozen=True,
    )


class ModelPreset(_Model):
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = Field(4096, ge=1)
    timeout: float = Field(120.0, gt=0)
    context_window: int | None = Field(None, ge=1)
    max_retries: int = Field(3, ge=0, le=10)
    retry_base_seconds: float = Field(1.0, ge=0)


class DeletionGuard(_Model):
    max_share: float = Field(0.3, ge=0, le=1)
    min_lines: int = Field(10, ge=0)


class DreamSettings(_Model):
    interval_h: float = Field(2, gt=0)
    cron: str | None = None
    model_override: str | None = None
    max_batch_size: int = Field(20, ge=1, le=20)
    max_iterations: int = Field(10, ge=1, le=200)
    max_tokens_per_run: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, ge=0)
    max_wall_seconds: float | None = Field(None, gt=0)
    deletion_guard: DeletionGuard = DeletionGuard()
    hold_soul_changes: bool = False
    secret_allowlist: list[str] = []
    file_context_tokens: int = Field(6000, ge=200)
    batch_tokens: int = Field(12000, ge=500)
    max_history_entries: int = Field(1000, ge=10)
    git_author: str = DEFAULT_GIT_AUTHOR

    @field_validator("secret_allowlist")
    @classmethod
    def _regexes_compile(cls, value: list[str]) -> list[str]:
        for i, pattern in enumerate(value):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"entry {i} is not a valid regular expression ({exc.msg})") from exc
        return value

    @field_validator("git_author")
    @classmethod
    def _author_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[^<>\n]+ <[^<>\n]*>", value):
            raise ValueError('must look like "Name <email>"')
        return value


class ConsolidateSettings(_Model):
    budget_tokens: int | None = Field(None, ge=100)


class ContextSettings(_Model):
    budget_tokens: int = Field(8000, ge=200)


class AgentDefaults(_Model):
    model: str | None = None
    dream: DreamSettings = DreamSettings()
    consolidate: ConsolidateSettings = ConsolidateSettings()
    context: ContextSettings = ContextSettings()


class Agents(_Model):
    defaults: AgentDefaults = AgentDefaults()


class Config(_Model):
    agents: Agents = Agents()
    model_presets: dict[str, ModelPreset] = {}

    @property
    def dream(self) -> DreamSettings:
        return self.agents.defaults.dream


# Sections whose unknown keys are ours to warn about. The rest of a nanoinfra config.json belongs
# to the agent (providers, channels, tools, ...) and is ignored silently.
_OWNED_SECTIONS = ("agents.defaults.dream", "agents.defaults.consolidate", "agents.defaults.context")


def _unknown_keys(config: Config) -> list[str]:
    found: list[str] = []
    for dotted in _OWNED_SECTIONS:
        node: Any = config
        for part in dotted.split("."):
            node = getattr(node, part)
        found += [f"{dotted}.{key}" for key in (node.model_extra or {})]
        if isinstance(node, DreamSettings) and node.deletion_guard.model_extra:
            found += [f"{dotted}.deletionGuard.{k}" for k in node.deletion_guard.model_extra]
    for name, preset in config.model_presets.items():
        found += [f"modelPresets.{name}.{key}" for key in (preset.model_extra or {})]
    return found


def parse_config(data: Mapping[str, Any], source: str) -> Config:
    """Validate a config mapping; errors name ``source`` and the field, never the value."""
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            problems.append(f"{where}: {err['msg']}")
        raise ConfigError(
            f"invalid configuration in {source}: " + "; ".join(problems),
            hint="see docs/configuration.md for every setting and its type",
        ) from None
    for key in _unknown_keys(config):
        warnings.warn(f"{source}: unknown setting {key} is ignored", UserWarning, stacklevel=2)
    return config


def load_config_file(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object at the top level")
    return parse_config(data, str(path))


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
        if dream.model_override != OFFLINE_MODEL and dream.model_override not in config.model_presets:
            raise ConfigError(
                f"agents.defaults.dream.modelOverride names no preset in modelPresets "
                f"(known presets: {', '.join(sorted(config.model_presets)) or 'none'})",
                hint="modelOverride accepts preset names only; define the model under modelPresets",
            )
        choice = (dream.model_override, "agents.defaults.dream.modelOverride")
    elif config.agents.defaults.model:
        choice = (config.agents.defaults.model, "agents.defaults.model")
    if choice is None:
        return None
    name, source = choice
    if name == OFFLINE_MODEL:
        return ResolvedModel(name=OFFLINE_MODEL, source=source)

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
    )


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
