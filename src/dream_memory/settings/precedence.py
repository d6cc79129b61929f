"""Where each setting comes from when several places give it: the precedence rules, here and
nowhere else, and the only module that reads ``os.environ`` (``environment``).

- workspace: ``--workspace`` > ``DREAM_WORKSPACE`` > ``~/.nanoinfra/workspaces/default``
- config file: ``--config`` > ``DREAM_CONFIG`` > ``<workspace>/dream.json`` > ``~/.nanoinfra/config.json``
- model: ``--model`` > ``DREAM_MODEL`` > ``dream.modelOverride`` > ``agents.defaults.modelPreset``
  > ``agents.defaults.model`` (``settings.model``)
- API key: ``DREAM_API_KEY`` > the preset's ``apiKeyEnv`` > the provider's own variable
- read-side store: ``--store`` > ``DREAM_MEMORY_STORE`` > the workspace
- search cache: ``$XDG_CACHE_HOME/dream-memory`` > ``~/.cache/dream-memory``
- excluded entities: ``DREAM_MEMORY_EXCLUDE`` (comma-separated names)

The rules are part of the interface: docs/reference/config.md lists them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dream_memory.errors import ConfigError


def environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables settings are resolved from: ``env`` when given (the API, tests), else this
    process's environment, copied once so a run sees one consistent set."""
    return dict(os.environ if env is None else env)


def default_workspace(env: Mapping[str, str]) -> Path:
    home = Path(env.get("HOME") or Path.home())
    return home / ".nanoinfra" / "workspaces" / "default"


def _not_empty(option: str | os.PathLike[str] | None, what: str, fallback: str) -> None:
    """An empty path given on purpose is refused, not read as "not given": `-w "$WS"` with WS
    unset would otherwise write to the default workspace, or ``--config ""`` name ".", quietly."""
    if option is not None and not os.fspath(option):
        raise ConfigError(
            f"the {what} path is empty",
            hint=f'name the {what} (an unset variable, as in "$WS", expands to an empty path), '
            f"or leave the option out for {fallback}",
        )


def resolve_workspace(option: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    _not_empty(option, "workspace", "$DREAM_WORKSPACE, else ~/.nanoinfra/workspaces/default")
    raw = option if option is not None else env.get("DREAM_WORKSPACE") or None
    path = Path(raw).expanduser() if raw else default_workspace(env)
    return Path(os.path.abspath(path))


def resolve_config_path(
    option: str | os.PathLike[str] | None, workspace: Path, env: Mapping[str, str]
) -> tuple[Path | None, bool]:
    """The config file to read and whether it was asked for explicitly (then it must exist)."""
    _not_empty(option, "config file", "$DREAM_CONFIG, <workspace>/dream.json, ~/.nanoinfra/config.json")
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


def resolve_store(option: str | os.PathLike[str] | None, workspace: Path, env: Mapping[str, str]) -> Path:
    """The read side's store root: ``--store`` > ``DREAM_MEMORY_STORE`` > the workspace."""
    _not_empty(option, "store", "$DREAM_MEMORY_STORE, else the workspace")
    raw = option if option is not None else env.get("DREAM_MEMORY_STORE") or None
    return Path(os.path.abspath(Path(raw).expanduser())) if raw else workspace


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


def excludes(env: Mapping[str, str]) -> frozenset[str]:
    return parse_excludes(env.get("DREAM_MEMORY_EXCLUDE"))
