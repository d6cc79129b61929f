"""The config file's shape: every field, its default (from ``settings.defaults``) and its range.

Plain frozen dataclasses, so that a command with no config file gets its defaults without loading
pydantic (``Config()`` is the whole of it). ``settings.loading`` turns these classes into pydantic
models when there is a file to validate: ``Range`` becomes pydantic's bounds, ``Check`` a field
validator, and the models' errors and unknown keys are what the file is judged by.

camelCase and snake_case keys are both accepted. Unknown keys in the sections dream-memory owns
are warned about; the rest of a nanoinfra config.json belongs to the agent and is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from dream_memory.settings import defaults as D

__all__ = [
    "Action",
    "AgentDefaults",
    "Agents",
    "Check",
    "Config",
    "ConsolidateSettings",
    "ContextSettings",
    "DeletionGuard",
    "DreamSettings",
    "FilePolicy",
    "ModelPreset",
    "NanobotProvider",
    "Range",
    "SectionPolicy",
    "WritePolicy",
]


@dataclass(frozen=True)
class Range:
    """A number field's bounds (pydantic's ``ge``/``gt``/``le``; docs/reference/config.md lists them)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None

    def describe(self) -> str:
        """The bounds as a person reads them: "1..20", "at least 100", "more than 0", ..."""
        low = f"{self.ge:g}" if self.ge is not None else None
        if low is not None and self.le is not None:
            return f"{low}..{self.le:g}"
        parts = [f"at least {low}" if low is not None else "", f"more than {self.gt:g}" if self.gt is not None else ""]
        parts.append(f"at most {self.le:g}" if self.le is not None else "")
        return " and ".join(p for p in parts if p) or "any number"


@dataclass(frozen=True)
class Check:
    """A field's own rule: ``check`` returns the value or raises ValueError naming what is wrong.
    ``before`` runs it on the raw value, ahead of the type check."""

    check: Callable[[Any], Any]
    before: bool = False


def _regexes_compile(value: list[str]) -> list[str]:
    for i, pattern in enumerate(value):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"entry {i} is not a valid regular expression ({exc.msg})") from exc
    return value


def _author_shape(value: str) -> str:
    if not re.fullmatch(r"[^<>\n]+ <[^<>\n]*>", value):
        raise ValueError('must look like "Name <email>"')
    return value


def _scope_rules_parse(value: dict[str, str]) -> dict[str, str]:
    from dream_memory.core.scopes import ScopeRules

    ScopeRules.parse(value)  # ValueError names the rule; loading turns it into a ConfigError
    return value


def _only_provider_entries(value: Any) -> Any:
    # nanobot's `providers` holds provider objects; anything else there is not ours to judge.
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(v, dict)}
    return value


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: Annotated[float, Range(ge=0, le=D.MODEL_TEMPERATURE_MAX)] = D.MODEL_TEMPERATURE
    max_tokens: Annotated[int, Range(ge=1)] = D.MODEL_MAX_TOKENS
    timeout: Annotated[float, Range(gt=0, le=D.MODEL_TIMEOUT_MAX_S)] = D.MODEL_TIMEOUT_S
    context_window: Annotated[int | None, Range(ge=1)] = None
    max_retries: Annotated[int, Range(ge=0, le=D.MODEL_MAX_RETRIES_MAX)] = D.MODEL_MAX_RETRIES
    retry_base_seconds: Annotated[float, Range(ge=0)] = D.MODEL_RETRY_BASE_S
    edit_protocol: Literal["tools", "text", "auto", "facts"] = D.MODEL_EDIT_PROTOCOL
    # nanobot's preset fields (its config.json): the provider entry under `providers` holding the
    # key and base, and its name for the context window. reasoningEffort is nanobot's alone.
    provider: str | None = None
    context_window_tokens: Annotated[int | None, Range(ge=1)] = None
    reasoning_effort: str | None = None


@dataclass(frozen=True, kw_only=True)
class NanobotProvider:
    """One entry of a nanobot config.json's ``providers``: where its key and endpoint are."""

    api_key: str | None = None
    api_base: str | None = None


@dataclass(frozen=True, kw_only=True)
class DeletionGuard:
    max_share: Annotated[float, Range(ge=0, le=1)] = D.DELETION_GUARD_MAX_SHARE
    min_lines: Annotated[int, Range(ge=0)] = D.DELETION_GUARD_MIN_LINES
    window_batches: Annotated[int, Range(ge=0, le=D.DELETION_GUARD_WINDOW_BATCHES_MAX)] = (
        D.DELETION_GUARD_WINDOW_BATCHES
    )


Action = Literal["apply", "hold"]


@dataclass(frozen=True, kw_only=True)
class SectionPolicy:
    """A section's rule (its subsections included): an action per kind of change, or ``pin``."""

    add: Action | None = None
    manual: Action | None = None
    dream: Action | None = None
    dream_old: Action | None = None
    pin: bool = False


@dataclass(frozen=True, kw_only=True)
class FilePolicy(SectionPolicy):
    """A file's rule (the key is a glob such as "USER.md" or "entities/*.md"), and its sections'."""

    sections: dict[str, SectionPolicy] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WritePolicy:
    """Which changes Dream lands and which wait for `dream review` (docs/dream.md, "Review")."""

    add: Action = D.WRITE_POLICY_ADD
    manual: Action = D.WRITE_POLICY_MANUAL
    dream: Action = D.WRITE_POLICY_DREAM
    dream_old: Action = D.WRITE_POLICY_DREAM_OLD
    dream_age_days: Annotated[int, Range(ge=0)] = D.WRITE_POLICY_DREAM_AGE_DAYS
    files: dict[str, FilePolicy] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class DreamSettings:
    interval_h: Annotated[float, Range(gt=0)] = D.INTERVAL_H
    cron: str | None = None
    model_override: str | None = None
    max_batch_size: Annotated[int, Range(ge=1, le=D.BATCH_SIZE_MAX)] = D.BATCH_SIZE
    max_iterations: Annotated[int, Range(ge=1, le=D.MAX_ITERATIONS_MAX)] = D.MAX_ITERATIONS
    max_tokens_per_run: Annotated[int | None, Range(ge=1)] = None
    max_cost_usd: Annotated[float | None, Range(ge=0)] = None
    max_wall_seconds: Annotated[float | None, Range(gt=0)] = None
    deletion_guard: DeletionGuard = field(default_factory=DeletionGuard)
    hold_soul_changes: bool = False
    write_policy: WritePolicy = field(default_factory=WritePolicy)
    secret_allowlist: Annotated[list[str], Check(_regexes_compile)] = field(default_factory=list)
    file_context_tokens: Annotated[int, Range(ge=D.FILE_CONTEXT_TOKENS_MIN)] = D.FILE_CONTEXT_TOKENS
    batch_tokens: Annotated[int, Range(ge=D.BATCH_TOKENS_MIN)] = D.BATCH_TOKENS
    max_history_entries: Annotated[int, Range(ge=D.MAX_HISTORY_ENTRIES_MIN)] = D.MAX_HISTORY_ENTRIES
    git_author: Annotated[str, Check(_author_shape)] = D.GIT_AUTHOR
    enabled: bool | None = None  # nanobot's switch for its own Dream; dream-memory ignores it
    # A .dream_cursor moved ahead outside a Dream commit (a nanobot gateway start) is followed.
    follow_external_cursor: bool = False
    # A fact replacing a value keeps "(was X until 2026-04-03)" on its line (docs/dream.md, "Dated facts").
    dated_trail: bool = False


@dataclass(frozen=True, kw_only=True)
class ConsolidateSettings:
    budget_tokens: Annotated[int | None, Range(ge=D.CONSOLIDATE_BUDGET_MIN)] = None


@dataclass(frozen=True, kw_only=True)
class ContextSettings:
    budget_tokens: Annotated[int, Range(ge=D.CONTEXT_BUDGET_MIN, le=D.CONTEXT_BUDGET_MAX)] = D.CONTEXT_BUDGET


@dataclass(frozen=True, kw_only=True)
class AgentDefaults:
    model: str | None = None
    # nanobot's own defaults (its config.json): the active preset and the implicit "default"
    # preset's fields.
    model_preset: str | None = None
    provider: str | None = None
    max_tokens: Annotated[int | None, Range(ge=1)] = None
    context_window_tokens: Annotated[int | None, Range(ge=1)] = None
    temperature: Annotated[float | None, Range(ge=0, le=D.MODEL_TEMPERATURE_MAX)] = None
    dream: DreamSettings = field(default_factory=DreamSettings)
    consolidate: ConsolidateSettings = field(default_factory=ConsolidateSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    # Session-key pattern -> scope, first match wins (core.scopes, docs/scopes.md). A JSON object
    # keeps its order, which is the rules' order.
    scopes: Annotated[dict[str, str], Check(_scope_rules_parse)] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Agents:
    defaults: AgentDefaults = field(default_factory=AgentDefaults)


@dataclass(frozen=True, kw_only=True)
class Config:
    agents: Agents = field(default_factory=Agents)
    model_presets: dict[str, ModelPreset] = field(default_factory=dict)
    providers: Annotated[dict[str, NanobotProvider | None], Check(_only_provider_entries, before=True)] = field(
        default_factory=dict
    )

    @property
    def dream(self) -> DreamSettings:
        return self.agents.defaults.dream
