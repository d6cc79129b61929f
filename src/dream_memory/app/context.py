"""`dream context`: gather the parts of the memory block from a workspace and fit them."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core import layout
from dream_memory.core.context import ContextBlock, Part, build_context
from dream_memory.core.frontmatter import is_always_on
from dream_memory.core.ports import TokenCounter

_DURABLE = (
    (layout.SOUL, "`dream section soul`"),
    (layout.USER, "`dream section user`"),
    (layout.MEMORY, "`dream section memory`"),
)


def always_on_skills(root: Path) -> list[Part]:
    """Skills nanobot puts in every prompt (``always: true``, ``metadata.nanobot.always``,
    ``metadata.openclaw.always``, read as YAML: core/frontmatter.py)."""
    folder = root / layout.SKILLS_DIR
    parts: list[Part] = []
    if folder.is_dir():
        for path in sorted(folder.glob("*/SKILL.md")):
            if path.is_symlink():
                continue
            text = fsutil.read_text(path) or ""
            if is_always_on(text):
                parts.append(
                    Part(f"Skill: {path.parent.name} (always on)", text, f"`cat skills/{path.parent.name}/SKILL.md`")
                )
    return parts


def entity_for_path(store: Path, path: str, *, excludes: frozenset[str], home: str | None = None) -> Part | None:
    """The entity whose repository root holds ``path`` (read side's resolver), as a context part.

    An excluded entity never resolves, so it can never reach a prompt through this door.
    """
    from dream_memory.app.read import ReadStore
    from dream_memory.errors import NotFound, Refused

    with ReadStore(store, excludes=excludes, home=home) as reader:
        try:
            resolved = reader.resolve(path)
            page = reader.entity(resolved.entity)
        except (NotFound, Refused):
            return None
    return Part(f"Entity: {resolved.entity} ({resolved.file})", page.text, f"`dream entity {resolved.entity}`")


def memory_context(
    root: Path,
    history: HistoryLog,
    *,
    budget: int,
    counter: TokenCounter,
    session_key: str | None = None,
    extra_parts: list[Part] | None = None,
) -> ContextBlock:
    """The block for an agent's system prompt (CONTRACT section 5, `dream context`)."""
    parts = [Part(path, fsutil.read_text(root / path) or "", pointer) for path, pointer in _DURABLE]
    parts += always_on_skills(root)
    parts += extra_parts or []
    cursor = history.read_dream_cursor() or 0
    entries = [e for e in history.entries_after(cursor) if session_key is None or e.session_key == session_key]
    return build_context(parts, entries, budget=budget, count_tokens=counter.count)
