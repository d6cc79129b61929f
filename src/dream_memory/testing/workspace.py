"""Builders for workspaces in tests: real files on disk, in the layout of docs/reference/files.md."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from dream_memory.adapters.workspace import init_workspace
from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry


def build_workspace(
    root: Path,
    *,
    history: Iterable[str | HistoryEntry] = (),
    files: Mapping[str, str] | None = None,
    dream_cursor: int | None = None,
    cursor: int | None = None,
    session_key: str | None = None,
    timestamp: str = "2026-04-03 00:02",
    templates: bool = True,
) -> Path:
    """Create a workspace at ``root`` and return it.

    ``history`` items are entry texts (numbered from 1) or ready ``HistoryEntry`` values, written
    as history.jsonl lines; ``files`` maps workspace-relative paths to their text. Cursor files
    are written only when given.
    """
    root.mkdir(parents=True, exist_ok=True)
    if templates:
        init_workspace(root)
    lines: list[str] = []
    for i, item in enumerate(history, start=1):
        entry = item if isinstance(item, HistoryEntry) else HistoryEntry(i, timestamp, item, session_key)
        lines.append(entry.to_json_line())
    if lines:
        path = root / layout.HISTORY
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    for rel, text in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if dream_cursor is not None:
        (root / layout.DREAM_CURSOR).parent.mkdir(parents=True, exist_ok=True)
        (root / layout.DREAM_CURSOR).write_text(f"{dream_cursor}\n", encoding="utf-8")
    if cursor is not None:
        (root / layout.CURSOR).write_text(f"{cursor}\n", encoding="utf-8")
    return root


def write_session(
    root: Path, key: str, messages: Iterable[Mapping[str, object]], *, last_consolidated: int = 0
) -> Path:
    """A session file in nanobot's format: a metadata line, then one message per line."""
    path = root / layout.SESSIONS_DIR / layout.session_file_name(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "_type": "metadata",
        "key": key,
        "created_at": "2026-04-03T00:00:00",
        "last_consolidated": last_consolidated,
    }
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(meta, ensure_ascii=False) + "\n")
        for message in messages:
            handle.write(json.dumps(dict(message), ensure_ascii=False) + "\n")
    return path


def read_history(root: Path) -> list[dict[str, object]]:
    """The objects of history.jsonl (one per line; tests use clean files)."""
    path = root / layout.HISTORY
    if not path.exists():
        return []
    # split("\n"), not splitlines(): an entry's text may hold U+2028 or other characters that
    # splitlines() takes for line breaks, while JSON leaves them unescaped inside one line.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment variables for a subprocess on a machine with no configuration at all: HOME is
    ``home`` (created empty, so no git identity and no ~/.nanoinfra), no system git config, no
    DREAM_* variables, litellm's price map kept local. ``extra`` adds or overrides variables."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **extra}
