"""``prompt``: which Dream guide is in use, and ``prompt init`` (an editable prompts/dream.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dream_memory.core import layout

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime


@dataclass(frozen=True)
class GuideReport:
    source: str  # "built-in", or the workspace guide's path
    path: str  # "built-in", or the path of prompts/dream.md
    text: str
    note: str | None = None  # the guide was cut to its size limit, or not used, and why

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "path": self.path, "text": self.text}


@dataclass(frozen=True)
class GuideInitReport:
    path: str
    created: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "created": self.created, "message": self.message}


def guide(rt: Runtime) -> GuideReport:
    from dream_memory.app.dream import guide_in_use, guide_note

    text, source = guide_in_use(rt.root)
    path = str(rt.root / layout.DREAM_GUIDE) if source != "built-in" else "built-in"
    return GuideReport(source, path, text, guide_note(rt.root))


def init_guide(rt: Runtime) -> GuideInitReport:
    from dream_memory.adapters import fsutil
    from dream_memory.adapters.workspace import init_workspace
    from dream_memory.app.dream import builtin_guide

    path = rt.root / layout.DREAM_GUIDE
    init_workspace(rt.root)
    existing = fsutil.read_text(path)
    if existing is not None and existing.strip():
        return GuideInitReport(str(path), False, f"{path} already has content; it was left as it is")
    fsutil.atomic_write(path, builtin_guide(), site="guide")
    return GuideInitReport(
        str(path), True, f"created {path} from the built-in guide; edit it to steer Dream for this workspace"
    )
