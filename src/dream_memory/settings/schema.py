"""The config file's shape (pydantic): every field, its default (from ``settings.defaults``) and
its range.

camelCase and snake_case keys are both accepted. Unknown keys in the sections dream-memory owns
are kept so ``settings.loading`` can warn about them; the rest of a nanoinfra config.json belongs
to the agent and is ignored. Only ``settings.loading`` imports this module, and only when a
command needs the configuration (read-only commands start without pydantic).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from dream_memory.settings import defaults as D


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
    temperature: float = D.MODEL_TEMPERATURE
    max_tokens: int = Field(D.MODEL_MAX_TOKENS, ge=1)
    timeout: float = Field(D.MODEL_TIMEOUT_S, gt=0)
    context_window: int | None = Field(None, ge=1)
    max_retries: int = Field(D.MODEL_MAX_RETRIES, ge=0, le=D.MODEL_MAX_RETRIES_MAX)
    retry_base_seconds: float = Field(D.MODEL_RETRY_BASE_S, ge=0)
    edit_protocol: Literal["tools", "text", "auto", "facts"] = D.MODEL_EDIT_PROTOCOL
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
    max_share: float = Field(D.DELETION_GUARD_MAX_SHARE, ge=0, le=1)
    min_lines: int = Field(D.DELETION_GUARD_MIN_LINES, ge=0)
    window_batches: int = Field(D.DELETION_GUARD_WINDOW_BATCHES, ge=0, le=D.DELETION_GUARD_WINDOW_BATCHES_MAX)


Action = Literal["apply", "hold"]


class SectionPolicy(_Model):
    """A section's rule (its subsections included): an action per kind of change, or ``pin``."""

    add: Action | None = None
    manual: Action | None = None
    dream: Action | None = None
    dream_old: Action | None = None
    pin: bool = False


class FilePolicy(SectionPolicy):
    """A file's rule (the key is a glob such as "USER.md" or "entities/*.md"), and its sections'."""

    sections: dict[str, SectionPolicy] = {}


class WritePolicy(_Model):
    """Which changes Dream lands and which wait for `dream review` (docs/dream.md, "Review")."""

    add: Action = D.WRITE_POLICY_ADD
    manual: Action = D.WRITE_POLICY_MANUAL
    dream: Action = D.WRITE_POLICY_DREAM
    dream_old: Action = D.WRITE_POLICY_DREAM_OLD
    dream_age_days: int = Field(D.WRITE_POLICY_DREAM_AGE_DAYS, ge=0)
    files: dict[str, FilePolicy] = {}


class DreamSettings(_Model):
    interval_h: float = Field(D.INTERVAL_H, gt=0)
    cron: str | None = None
    model_override: str | None = None
    max_batch_size: int = Field(D.BATCH_SIZE, ge=1, le=D.BATCH_SIZE_MAX)
    max_iterations: int = Field(D.MAX_ITERATIONS, ge=1, le=D.MAX_ITERATIONS_MAX)
    max_tokens_per_run: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, ge=0)
    max_wall_seconds: float | None = Field(None, gt=0)
    deletion_guard: DeletionGuard = DeletionGuard()
    hold_soul_changes: bool = False
    write_policy: WritePolicy = WritePolicy()
    secret_allowlist: list[str] = []
    file_context_tokens: int = Field(D.FILE_CONTEXT_TOKENS, ge=D.FILE_CONTEXT_TOKENS_MIN)
    batch_tokens: int = Field(D.BATCH_TOKENS, ge=D.BATCH_TOKENS_MIN)
    max_history_entries: int = Field(D.MAX_HISTORY_ENTRIES, ge=D.MAX_HISTORY_ENTRIES_MIN)
    git_author: str = D.GIT_AUTHOR
    enabled: bool | None = None  # nanobot's switch for its own Dream; dream-memory ignores it
    # A .dream_cursor moved ahead outside a Dream commit (a nanobot gateway start) is followed.
    follow_external_cursor: bool = False
    # A fact replacing a value keeps "(was X until 2026-04-03)" on its line (docs/dream.md, "Dated facts").
    dated_trail: bool = False

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
    budget_tokens: int | None = Field(None, ge=D.CONSOLIDATE_BUDGET_MIN)


class ContextSettings(_Model):
    budget_tokens: int = Field(D.CONTEXT_BUDGET, ge=D.CONTEXT_BUDGET_MIN, le=D.CONTEXT_BUDGET_MAX)


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
    # Session-key pattern -> scope, first match wins (core.scopes, docs/scopes.md). A JSON object
    # keeps its order, which is the rules' order.
    scopes: dict[str, str] = {}

    @field_validator("scopes")
    @classmethod
    def _scope_rules_parse(cls, value: dict[str, str]) -> dict[str, str]:
        from dream_memory.core.scopes import ScopeRules

        ScopeRules.parse(value)  # ValueError names the rule; loading turns it into a ConfigError
        return value


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
