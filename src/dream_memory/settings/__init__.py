"""Settings: what a command needs from its surroundings, resolved once.

- ``settings.defaults``: every default a user can change (a leaf; the one owner of each value)
- ``settings.schema``: the config file's shape and every default, as plain dataclasses
- ``settings.loading``: reading and validating a config file (pydantic, loaded only when one exists)
- ``settings.precedence``: which of the flag, the variable and the file wins (the only env reader)
- ``settings.model``: which model, endpoint and key a command uses

Importing this package loads no pydantic, and neither does ``load_settings`` when there is no
config file (the defaults are ``schema.Config()``): most commands start without it.
Error messages name the file and the field, never the value (a value may be a secret).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.errors import ConfigError
from dream_memory.settings import defaults
from dream_memory.settings.model import PROVIDER_KEY_ENV, ResolvedModel, resolve_model
from dream_memory.settings.precedence import (
    default_workspace,
    environment,
    excludes,
    parse_excludes,
    resolve_config_path,
    resolve_store,
    resolve_workspace,
    search_cache_dir,
)

if TYPE_CHECKING:
    from dream_memory.core.scopes import ScopeRules
    from dream_memory.settings.schema import Config, ConsolidateSettings, ContextSettings, DreamSettings

OFFLINE_MODEL = defaults.OFFLINE_MODEL
DEFAULT_GIT_AUTHOR = defaults.GIT_AUTHOR

__all__ = [
    "DEFAULT_GIT_AUTHOR",
    "OFFLINE_MODEL",
    "PROVIDER_KEY_ENV",
    "ReadSettings",
    "ResolvedModel",
    "Settings",
    "default_workspace",
    "defaults",
    "load_read_settings",
    "load_settings",
    "parse_excludes",
    "resolve_config_path",
    "resolve_model",
    "resolve_workspace",
    "search_cache_dir",
]


@dataclass(frozen=True)
class ReadSettings:
    """What the read side needs: no config file, no pydantic (keeps `dream search` start-up fast)."""

    workspace: Path
    store: Path
    excludes: frozenset[str]
    env: Mapping[str, str] = field(repr=False)


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
    def context(self) -> ContextSettings:
        return self.config.agents.defaults.context

    @property
    def consolidate(self) -> ConsolidateSettings:
        return self.config.agents.defaults.consolidate

    @property
    def scope_rules(self) -> ScopeRules:
        from dream_memory.core.scopes import ScopeRules

        return ScopeRules.parse(self.config.agents.defaults.scopes)

    @property
    def store(self) -> Path:
        """Read-side store root: DREAM_MEMORY_STORE > the workspace (``--store`` is applied by the CLI)."""
        return resolve_store(None, self.workspace, self.env)

    @property
    def excludes(self) -> frozenset[str]:
        return excludes(self.env)

    def model(self, cli_model: str | None = None) -> ResolvedModel | None:
        return resolve_model(self.config, cli_model, self.env)

    def read_settings(self, store: str | os.PathLike[str] | None = None) -> ReadSettings:
        """The read side's settings from these (the MCP server and the API reuse what was loaded)."""
        return ReadSettings(
            workspace=self.workspace,
            store=resolve_store(store, self.workspace, self.env),
            excludes=self.excludes,
            env=self.env,
        )


def load_settings(
    workspace: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    environ = environment(env)
    ws = resolve_workspace(workspace, environ)
    path, explicit = resolve_config_path(config, ws, environ)
    if path is None:
        from dream_memory.settings.schema import Config

        cfg = Config()
    elif not path.is_file() and explicit:
        raise ConfigError(f"config file {path} does not exist")
    else:
        from dream_memory.settings.loading import load_config_file

        cfg = load_config_file(path)
    return Settings(workspace=ws, config=cfg, config_path=path, env=environ)


def load_read_settings(
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ReadSettings:
    """Store root: ``--store`` > ``DREAM_MEMORY_STORE`` > the workspace (docs/reference/read-side.md)."""
    environ = environment(env)
    ws = resolve_workspace(workspace, environ)
    return ReadSettings(workspace=ws, store=resolve_store(store, ws, environ), excludes=excludes(environ), env=environ)
