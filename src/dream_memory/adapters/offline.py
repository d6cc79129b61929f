"""The built-in ``offline`` model as the wiring gets it: the rule engine of ``core.offline``
behind the ChatModel port. The names below stay importable from here (``OfflineModel``,
``classify``, ``skill_text``) for code written against the old module."""

from __future__ import annotations

from dream_memory.core.offline.engine import NAME, OfflineModel
from dream_memory.core.offline.rules import Classified, classify
from dream_memory.core.placement import skill_text
from dream_memory.core.ports import ChatModel

__all__ = ["NAME", "Classified", "OfflineModel", "build_offline_model", "classify", "skill_text"]


def build_offline_model() -> ChatModel:
    """The offline model: deterministic, no network, no key."""
    return OfflineModel()
