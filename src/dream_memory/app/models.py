"""Which model a use case runs with: the one rule, for every face.

A ``ChatModel`` object passes through (the API, tests, the fault suite's faulty models); a name
goes through the settings' precedence (``settings.model``); nothing configured is a ConfigError
with the hint below, or the offline engine where the use case falls back to it (demo, eval).

A model built from a name belongs to the use case that chose it, which closes it when it ends
(``chosen_model``); a ChatModel object or ModelChoice passed in belongs to whoever passed it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dream_memory.errors import ConfigError
from dream_memory.settings import OFFLINE_MODEL, ResolvedModel, defaults

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime
    from dream_memory.core.ports import ChatModel


def no_model_hint(option: str = "--model") -> str:
    """What to do when no model is configured, ``option`` being how the face takes the model."""
    return (
        f"choose one with {option} (a preset name, a litellm id such as openai/gpt-4o-mini, or 'offline' "
        "for the built-in deterministic engine), DREAM_MODEL, or agents.defaults.model in the config; "
        "see docs/configuration.md"
    )


@dataclass(frozen=True)
class ModelChoice:
    chat: ChatModel
    resolved: ResolvedModel | None  # None: a ChatModel object was given

    @property
    def name(self) -> str:
        return self.chat.name

    @property
    def context_window(self) -> int | None:
        return self.resolved.context_window if self.resolved else None

    @property
    def max_tokens(self) -> int:
        return self.resolved.max_tokens if self.resolved else defaults.MODEL_MAX_TOKENS


def resolve(
    rt: Runtime, choice: str | ChatModel | None, *, fallback_offline: bool = False, what: str = ""
) -> ResolvedModel | ChatModel:
    """The resolved model (its key already looked up: a missing variable fails here, before any
    lock), or the ChatModel object given."""
    if choice is not None and not isinstance(choice, str):
        return choice
    resolved = rt.settings.model(choice)
    if resolved is None:
        if fallback_offline:
            return ResolvedModel(name=OFFLINE_MODEL, source=f"{what or 'the'} default")
        message = f"no model is configured{' for ' + what if what else ''}"
        raise ConfigError.naming(lambda o: (message, no_model_hint(o("--model") or "the model option")))
    return resolved


def choose_model(
    rt: Runtime, choice: str | ChatModel | ModelChoice | None, *, fallback_offline: bool = False, what: str = ""
) -> ModelChoice:
    """The model a use case runs with. A ModelChoice passes through with its preset's limits (eval
    chooses once for every scenario)."""
    if isinstance(choice, ModelChoice):
        return choice
    found = resolve(rt, choice, fallback_offline=fallback_offline, what=what)
    if isinstance(found, ResolvedModel):
        return ModelChoice(rt.chat_model(found), found)
    return ModelChoice(found, None)


@contextlib.contextmanager
def chosen_model(
    rt: Runtime, choice: str | ChatModel | ModelChoice | None, *, fallback_offline: bool = False, what: str = ""
) -> Iterator[ModelChoice]:
    """``choose_model`` for the block: a model built here is closed when the block ends, however it
    ends (a run that fails half way included); one passed in is left open for its owner to reuse."""
    chosen = choose_model(rt, choice, fallback_offline=fallback_offline, what=what)
    # A ModelChoice passed in (eval's, for all its runs) is its chooser's; an object, the caller's.
    built = not isinstance(choice, ModelChoice) and chosen.resolved is not None
    try:
        yield chosen
    finally:
        if built:
            close_model(chosen.chat)


def close_model(model: ChatModel) -> None:
    """Close a model this process built (its HTTP client's sockets). ``close`` is not part of the
    ChatModel protocol, which is what a caller's own model must implement: those (and the offline
    engine) need not have one."""
    close = getattr(model, "close", None)
    if callable(close):
        close()
