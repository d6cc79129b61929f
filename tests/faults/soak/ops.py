"""The fault soak's faces onto the package: each use case called through the same service as the
CLI, the API and the MCP server (``dream_memory.app``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime
    from dream_memory.core.ports import ChatModel


@dataclass
class Ops:
    """One workspace's use cases, called through the same services as every other face (a fresh
    runtime per call, as a new process would have), with a frozen clock and an environment of
    our own. ``compact`` and ``migrate`` are steps, not use cases: they call the adapters."""

    root: Path
    env: dict[str, str]
    config: Path | None = None
    log: list[str] = field(default_factory=list)

    def rt(self) -> Runtime:
        from dream_memory.app.runtime import Runtime
        from dream_memory.testing.clock import FrozenClock

        return Runtime.load(self.root, self.config, self.env, clock=FrozenClock(), log=self.log.append)

    def init(self) -> str | None:
        from dream_memory.app.init import init_workspace

        return init_workspace(self.rt()).commit

    def append(self, text: str, session_key: str | None = None) -> int:
        from dream_memory.app.history import AppendRequest, append

        return append(self.rt(), AppendRequest(text, session_key)).entry.cursor

    def dream(self, *, batch_size: int | None = None, model: ChatModel | str = "offline") -> dict[str, Any]:
        from dream_memory.app.runs import RunRequest, dream

        return dream(self.rt(), RunRequest(model=model, batch_size=batch_size)).to_json()

    def consolidate(
        self, *, budget: int | None = None, force: bool = True, model: ChatModel | str = "offline"
    ) -> dict[str, Any]:
        from dream_memory.app.runs import ConsolidateRequest, consolidate

        request = ConsolidateRequest(model=model, all_sessions=True, budget=budget, force=force)
        return consolidate(self.rt(), request).to_json()

    def compact(self, *, dream_cursor: int, max_entries: int) -> int:
        return self.rt().history.compact(dream_cursor=dream_cursor, max_entries=max_entries).archived

    def migrate(self) -> list[str]:
        return self.rt().ensure_workspace()

    def restore(self, rev: str, *, force: bool = False) -> str | None:
        from dream_memory.app.restore import RestoreRequest, restore

        return restore(self.rt(), RestoreRequest(rev, force=force)).commit
