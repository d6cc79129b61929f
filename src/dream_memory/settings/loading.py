"""Reading a config file: JSON (lenient about comments), checked against ``settings.schema``.

A plainly valid file is read by ``settings.quick`` without pydantic; any other goes to
``settings.validation`` (pydantic), whose verdict and messages are final. Either way the result is
the schema's dataclasses. Errors name the file and the field, never the value (a value may be a
secret). Unknown keys in the sections dream-memory owns are warned about; the rest of a nanoinfra
config.json belongs to the agent and is ignored.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dream_memory.core import jsontext
from dream_memory.core.surrogates import has_lone_surrogate
from dream_memory.errors import ConfigError
from dream_memory.settings.schema import Config

__all__ = ["Config", "load_config_file", "parse_config"]


# Sections whose unknown keys are ours to warn about. The rest of a nanoinfra config.json belongs
# to the agent (providers, channels, tools, ...) and is ignored silently.
_OWNED_SECTIONS = ("agents.defaults.dream", "agents.defaults.consolidate", "agents.defaults.context")


def _sections(config: Config) -> list[tuple[str, Any]]:
    """Every section whose unknown keys are ours to warn about, with its dotted key."""
    found: list[tuple[str, Any]] = []
    for dotted in _OWNED_SECTIONS:
        node: Any = config
        for part in dotted.split("."):
            node = getattr(node, part)
        found.append((dotted, node))
        if dotted == "agents.defaults.dream":
            found.append((f"{dotted}.deletionGuard", node.deletion_guard))
            # a mistyped "pin" must not pass unnoticed
            policy, where = node.write_policy, f"{dotted}.writePolicy"
            found.append((where, policy))
            for pattern, rule in policy.files.items():
                found.append((f"{where}.files.{pattern}", rule))
                found += [(f"{where}.files.{pattern}.sections.{title}", sec) for title, sec in rule.sections.items()]
    found += [(f"modelPresets.{name}", preset) for name, preset in config.model_presets.items()]
    return found


def _unknown_keys(config: Config, extras: Mapping[int, list[str]]) -> list[str]:
    """Every unknown key the file holds in an owned section; ``extras`` has each section read
    from the file (by ``id``) with its keys left over, in the file's order. A field's snake_case
    name is left over only when its camelCase key was given too (``_given_twice``), so it is not
    unknown."""
    return [
        f"{dotted}.{key}"
        for dotted, node in _sections(config)
        for key in extras.get(id(node), [])
        if key not in {f.name for f in dataclasses.fields(node)}
    ]


def _given_twice(config: Config, extras: Mapping[int, list[str]]) -> list[tuple[str, str]]:
    """Each field given under both its keys (``max_batch_size`` and ``maxBatchSize``): the
    section's dotted key with the snake_case key, and the camelCase key whose value is used."""
    from dream_memory.settings.quick import camel

    return [
        (f"{dotted}.{key}", camel(key))
        for dotted, node in _sections(config)
        for key in extras.get(id(node), [])
        if key in {f.name for f in dataclasses.fields(node)}
    ]


def config_warnings(config: Config, extras: Mapping[int, list[str]], source: str) -> list[str]:
    """What a person is told about a valid file: the keys it ignores, and why."""
    unknown = [f"{source}: unknown setting {key} is ignored" for key in _unknown_keys(config, extras)]
    twice = [
        f"{source}: {key.rsplit('.', 1)[0]}.{wins} is given twice, as {key.rsplit('.', 1)[1]} and {wins}: "
        f"{wins} wins, {key.rsplit('.', 1)[1]} is ignored"
        for key, wins in _given_twice(config, extras)
    ]
    return unknown + twice


def parse_config(data: Mapping[str, Any], source: str) -> Config:
    """Validate a config mapping; errors name ``source`` and the field, never the value."""
    from dream_memory.settings.quick import Unsure, check_config

    try:
        config, extras = check_config(data)
    except Unsure:
        from dream_memory.settings.validation import validate

        config, extras = validate(data, source)
    for message in config_warnings(config, extras, source):
        warnings.warn(message, UserWarning, stacklevel=2)
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
    where = _lone_surrogate_at(data)
    if where is not None:
        # A "\ud83d" escape is valid JSON but half a character: as a git author, a path or a
        # header it failed later, at the first write, as an internal error or a "damaged" repository.
        raise ConfigError(
            f"config file {path}: {where} holds half of a character (a lone UTF-16 surrogate escape)",
            hint="write the whole character (both halves of a \\uD83D\\uDE80 pair, or the character itself)",
        )
    return parse_config(data, str(path))


def _lone_surrogate_at(value: Any, where: str = "") -> str | None:
    """The dotted key of the first string (value or key) holding a lone surrogate, or None."""
    if isinstance(value, str):
        return (where or "the top level") if has_lone_surrogate(value) else None
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            at = f"{where}.{key}" if where else key
            if has_lone_surrogate(key):
                return at
            items.append((at, item))
    elif isinstance(value, list):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    for at, item in items:
        found = _lone_surrogate_at(item, at)
        if found is not None:
            return found
    return None
