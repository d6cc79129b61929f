"""Settling held batches: ``dream restore --apply-held ID`` and ``--discard-held ID``.

A held batch's diff waits under memory/.dream_held/<id>/ (held.json holds each file's text before
and after). Applying it follows restore's conflict rule: every file must still hold the text the
batch started from, unless --force. Either way the held folder goes and the state forgets it, in
one commit.
"""

from __future__ import annotations

import json
from typing import Any

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit, recover
from dream_memory.core import layout
from dream_memory.core.state import DreamState
from dream_memory.errors import InputError, RestoreConflict


def _load(git: GitStore, held_id: str) -> tuple[DreamState, dict[str, Any], str]:
    recover(git)
    state = DreamState.from_json(fsutil.read_text(git.workspace / layout.DREAM_STATE))
    folder = f"{layout.DREAM_HELD_DIR}/{held_id}"
    text = fsutil.read_text(git.workspace / folder / "held.json")
    if state.find_held(held_id) is None or text is None:
        known = ", ".join(h.id for h in state.held) or "none"
        raise InputError(f"no held batch {held_id!r} (held now: {known})")
    return state, json.loads(text), folder


def _folder_removal(git: GitStore, folder: str) -> dict[str, bytes | None]:
    base = git.workspace / folder
    return {p.relative_to(git.workspace).as_posix(): None for p in base.rglob("*") if p.is_file()}


def apply_held_batch(git: GitStore, held_id: str, *, force: bool = False) -> dict[str, Any]:
    state, meta, folder = _load(git, held_id)
    files = meta.get("files", [])
    conflicts = []
    for item in files:
        current = fsutil.read_text(git.workspace / item["path"])
        if current != item["before"]:
            conflicts.append(item["path"])
    if conflicts and not force:
        raise RestoreConflict(
            f"cannot apply held batch {held_id}: {', '.join(conflicts)} changed since it was held; nothing was changed",
            conflicts,
        )
    changes: dict[str, bytes | None] = _folder_removal(git, folder)
    for item in files:
        changes[item["path"]] = None if item["after"] is None else item["after"].encode("utf-8")
    changes[layout.DREAM_STATE] = state.without_held(held_id).to_json().encode()
    subject = f"dream: apply held {held_id} ({meta.get('reason', '')})"
    body = "\n".join(f"- {item['path']}" for item in files)
    commit = apply_commit(
        git, changes, f"{subject}\n\n{body}\n\nHeld-Range: {meta.get('cursor_from')}..{meta.get('cursor_to')}"
    )
    message = f"applied held batch {held_id} in commit {commit[:10] if commit else '(none)'}"
    if conflicts:
        message += f"; --force: later work in {', '.join(conflicts)} was replaced (it is still in git history)"
    return {
        "applied": held_id,
        "commit": commit,
        "files": [i["path"] for i in files],
        "forced_over": conflicts,
        "message": message,
    }


def discard_held_batch(git: GitStore, held_id: str) -> dict[str, Any]:
    state, meta, folder = _load(git, held_id)
    changes: dict[str, bytes | None] = _folder_removal(git, folder)
    changes[layout.DREAM_STATE] = state.without_held(held_id).to_json().encode()
    commit = apply_commit(git, changes, f"dream: discard held {held_id} ({meta.get('reason', '')})")
    return {
        "discarded": held_id,
        "commit": commit,
        "message": f"discarded held batch {held_id} in commit {commit[:10] if commit else '(none)'}; "
        "its history stays consumed",
    }
