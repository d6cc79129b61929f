"""Creating a workspace from the bundled templates (CONTRACT section 2)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.core import layout
from dream_memory.errors import WorkspaceError

TEMPLATE_FILES: tuple[str, ...] = (layout.SOUL, layout.USER, layout.MEMORY, layout.PROMPTS_README)


def template_text(rel_path: str) -> str:
    """The bundled template for a workspace file."""
    return (resources.files("dream_memory") / "data" / "templates" / rel_path).read_text(encoding="utf-8")


def init_workspace(root: Path, *, guide_notes: bool = True) -> list[str]:
    """Create the workspace folders and any missing template file; never overwrite. Idempotent.

    ``guide_notes`` False leaves out prompts/README.md: jobs that create a workspace on the fly
    (Dream, append, consolidate) only need the memory files, and an unversioned README would
    otherwise be left untracked in a user's repository. Returns the paths it created.
    """
    if root.exists() and not root.is_dir():
        raise WorkspaceError(f"workspace {root} exists and is not a folder")
    created: list[str] = []
    try:
        for folder in ("memory", layout.SKILLS_DIR, *(("prompts",) if guide_notes else ())):
            (root / folder).mkdir(parents=True, exist_ok=True)
        for rel in TEMPLATE_FILES if guide_notes else layout.DURABLE_FILES:
            path = root / rel
            if not path.exists():
                fsutil.atomic_write(path, template_text(rel), site="template")
                created.append(rel)
    except OSError as exc:
        raise WorkspaceError(f"cannot create workspace {root}: {fsutil.describe_os_error(exc)}") from exc
    return created


def is_template(rel_path: str, text: str | None) -> bool:
    """True when a durable file still holds exactly its bundled template (or does not exist)."""
    if text is None:
        return True
    try:
        return text == template_text(rel_path)
    except (FileNotFoundError, OSError):
        return False
