"""Configuration models (pydantic): the JSON config file's shape, defaults and validation.

camelCase and snake_case keys are both accepted. Unknown keys in the sections dream-memory owns
are warned about; the rest of a nanoinfra config.json belongs to the agent and is ignored.
Errors name the file and the field, never the value (a value may be a secret). Only
``dream_memory.settings`` loads this module, and only when a command needs the configuration.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from dream_memory.core import jsontext
from dream_memory.errors import ConfigError
from dream_memory.settings import DEFAULT_GIT_AUTHOR


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
    edit_protocol: Literal["tools", "text", "auto", "facts"] = "tools"
    # nanobot's preset fields (its config.json): the provider entry under `providers` holding the
    # key and base, and its name for the context window. reasoningEffort is nanobot's alone.
    provider: str | None = None
    context_window_tokens: int | None = Field(None, ge=1)
    reasoning_effort: str | None = None


class NanobotProvider(_Model):
    """One entry of a nanobot config.json's ``providers``: where its key and endpoint are."""

    api_key: str | None = None
    api_base: str | None = None


class DeletionGuard(_Model):
    max_share: float = Field(0.3, ge=0, le=1)
    min_lines: int = Field(10, ge=0)
    window_batches: int = Field(10, ge=0, le=1000)


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
    enabled: bool | None = None  # nanobot's switch for its own Dream; dream-memory ignores it
    # A .dream_cursor moved ahead outside a Dream commit (a nanobot gateway start) is followed.
    follow_external_cursor: bool = False

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
    # nanobot's own defaults (its config.json): the active preset and the implicit "default"
    # preset's fields.
    model_preset: str | None = None
    provider: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    context_window_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    dream: DreamSettings = DreamSettings()
    consolidate: ConsolidateSettings = ConsolidateSettings()
    context: ContextSettings = ContextSettings()


class Agents(_Model):
    defaults: AgentDefaults = AgentDefaults()


class Config(_Model):
    agents: Agents = Agents()
    model_presets: dict[str, ModelPreset] = {}
    providers: dict[str, NanobotProvider | None] = {}

    @field_validator("providers", mode="before")
    @classmethod
    def _only_provider_entries(cls, value: Any) -> Any:
        # nanobot's `providers` holds provider objects; anything else there is not ours to judge.
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if isinstance(v, dict)}
        return value

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
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    try:
        data = jsontext.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object at the top level")
    return parse_config(data, str(path))
