"""Reading a config file: JSON (lenient about comments), validated against ``settings.schema``.

Errors name the file and the field, never the value (a value may be a secret). Unknown keys in
the sections dream-memory owns are warned about; the rest of a nanoinfra config.json belongs to
the agent and is ignored. pydantic loads with this module, so ``settings`` imports it lazily.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dream_memory.core import jsontext
from dream_memory.errors import ConfigError
from dream_memory.settings.schema import Config, DreamSettings

__all__ = ["Config", "load_config_file", "parse_config"]


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
        if isinstance(node, DreamSettings):  # a mistyped "pin" must not pass unnoticed
            found += _unknown_policy_keys(node.write_policy, f"{dotted}.writePolicy")
    for name, preset in config.model_presets.items():
        found += [f"modelPresets.{name}.{key}" for key in (preset.model_extra or {})]
    return found


def _unknown_policy_keys(policy: Any, where: str) -> list[str]:
    found = [f"{where}.{key}" for key in (policy.model_extra or {})]
    for pattern, rule in policy.files.items():
        found += [f"{where}.files.{pattern}.{key}" for key in (rule.model_extra or {})]
        for title, section in rule.sections.items():
            found += [f"{where}.files.{pattern}.sections.{title}.{key}" for key in (section.model_extra or {})]
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
