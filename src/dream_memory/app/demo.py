"""``demo``: Dream end to end on the bundled sample workspace, copied to a temporary folder."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters.workspace import remove_sample_workspace, sample_workspace

if TYPE_CHECKING:
    from dream_memory.app.dream import DreamReport
    from dream_memory.app.restore import LogReport


@dataclass(frozen=True)
class DemoRequest:
    model: str | None = None  # None: the configured model, else the offline engine
    config: str | os.PathLike[str] | None = None
    env: Mapping[str, str] | None = None
    keep: bool = True  # False: the temporary workspace is removed afterwards, even when the run fails


@dataclass(frozen=True)
class DemoReport:
    workspace: Path
    dream: DreamReport
    latest: LogReport

    @property
    def status(self) -> str:
        return self.dream.status


def demo(request: DemoRequest, *, log: Callable[[str], None] | None = None) -> DemoReport:
    """``demo``: a fresh copy of the sample workspace in a temporary folder, one Dream run on it
    (the offline engine unless a model is configured or given), then its latest change."""
    from dream_memory.app.restore import LogRequest
    from dream_memory.app.restore import log as latest_change
    from dream_memory.app.runs import RunRequest, dream
    from dream_memory.app.runtime import Runtime
    from dream_memory.settings import OFFLINE_MODEL

    target = sample_workspace("dream-demo-")
    try:
        rt = Runtime.load(target, request.config, request.env, log=log)
        resolved = rt.settings.model(request.model)
        name = resolved.name if resolved is not None else OFFLINE_MODEL
        rt.log(f"demo: sample workspace copied to {target}; model {name}")
        report = dream(rt, RunRequest(model=request.model if resolved is not None else OFFLINE_MODEL))
        return DemoReport(target, report, latest_change(rt, LogRequest()))
    finally:
        if not request.keep:  # an unknown model (exit 2) left the copy behind
            remove_sample_workspace(target)
