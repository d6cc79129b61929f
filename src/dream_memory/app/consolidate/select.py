"""Which session files a run consolidates: ``--session`` paths and, with ``--all``, the workspace's
sessions/ folder and its sessions in nanobot's own store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dream_memory.adapters.sessions import find_nanobot_sessions, locate_session, session_files
from dream_memory.core import layout
from dream_memory.errors import UsageError


def select_sessions(
    root: Path,
    given: Sequence[str],
    all_sessions: bool,
    cwd: Path,
    *,
    nanobot_roots: Sequence[Path] = (),
    sources: list[str] | None = None,
    passed_over: list[str] | None = None,
) -> list[Path]:
    """The session files to consolidate: ``--session`` paths (taken from the current folder, else
    the workspace, else its sessions/ folder) and, with ``--all``, every ``sessions/*.jsonl`` plus
    every session of this workspace in nanobot 0.3.5's session store (``nanobot_roots``: the
    candidate ``<nanobot data dir>/sessions`` folders). ``sources`` receives where --all looked,
    ``passed_over`` the ``*.jsonl`` names there that could not be read (a dangling link, a folder)."""
    if not given and not all_sessions:
        raise UsageError.naming(
            lambda o: (
                "say which sessions to consolidate",
                f"pass {o('--all')} for every session of the workspace, or {o('--session')} FILE (repeatable)"
                if o("--all")
                else f"leave {o('--session')} out (None) for every session of the workspace, or list the files",
            )
        )
    chosen = [locate_session(raw, [cwd, root, root / layout.SESSIONS_DIR]) for raw in given]
    if all_sessions:
        local, skipped_local = session_files(root / layout.SESSIONS_DIR)
        chosen += local
        store = find_nanobot_sessions(root, nanobot_roots)
        stored, skipped_stored = session_files(store.folder)
        chosen += stored
        if passed_over is not None:
            passed_over += skipped_local + skipped_stored
        if sources is not None:
            sources.append(f"{layout.SESSIONS_DIR}/: {len(local)} session file(s)")
            sources.append(f"{store.detail}: {len(stored)} session file(s)" if store.folder else store.detail)
    unique: dict[str, Path] = {}
    for path in chosen:
        unique.setdefault(str(path.resolve()), path)
    return list(unique.values())
