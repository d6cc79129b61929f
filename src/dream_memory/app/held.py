"""Settling held batches: ``dream restore --apply-held ID`` and ``--discard-held ID``.

A held batch's diff waits under memory/.dream_held/<id>/ (held.json holds each file's text before
and after). Applying it follows restore's conflict rule: every file must still hold the text the
batch started from, unless --force. Either way the held folder goes and the state forgets it, in
one commit.

The record is a file in the workspace, which anyone who can write there can change: its id, its
JSON and every path in it are checked before anything is read or written through them. A path
must be one Dream itself could have written (``core.policy.check_writable``); anything else (an
absolute path, ``..``, ``.git/hooks/...``) refuses the whole batch with exit 2 and changes nothing.
A record that cannot be read can still be discarded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit, recover
from dream_memory.core import layout, policy
from dream_memory.core.facts import Fact
from dream_memory.core.paths import describe, path_problem
from dream_memory.core.placement import place_facts
from dream_memory.core.state import DreamState, HeldBatch
from dream_memory.errors import InputError, RestoreConflict, ToolDenied

# Dream names a held batch after its cursor range ("12-31"); any id is one plain name.
_HELD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _check_id(held_id: str) -> str:
    if not _HELD_ID.fullmatch(held_id) or ".." in held_id:
        raise InputError(
            f"{describe(held_id)} is not a held batch id (ids are plain names such as 12-31)",
            hint="`dream status` lists the held batches",
        )
    return held_id


def _state(git: GitStore, held_id: str) -> tuple[DreamState, HeldBatch, str]:
    recover(git)
    _check_id(held_id)
    git.check_can_commit()
    state = state_of(git)
    held = state.find_held(held_id)
    if held is None:
        raise unknown_held(state, held_id)
    return state, held, f"{layout.DREAM_HELD_DIR}/{held_id}"


def state_of(git: GitStore) -> DreamState:
    """Dream's state as the workspace holds it (held changes and batches, set-asides)."""
    data = git.read_file(layout.DREAM_STATE)
    return DreamState.from_json(None if data is None else data.decode("utf-8", errors="replace"))


def unknown_held(state: DreamState, held_id: str) -> InputError:
    """An id that names nothing held, for restore's and review's ids alike: both take a held
    change's id and a batch's, so both name every one waiting (`dream status` lists the same)."""
    known = ", ".join([c.id for c in state.changes] + [h.id for h in state.held]) or "none"
    return InputError(f"nothing held under {held_id!r} (held now: {known})", hint="`dream review` lists them")


def read_record(git: GitStore, where: str, fix: str) -> Any:
    """The JSON of a held record in the workspace, or InputError naming ``where`` and ``fix``:
    missing, not UTF-8, or not JSON. Its shape is the caller's to check."""
    data = git.read_file(where)
    if data is None:
        raise InputError(f"{where} is missing (or not a regular file)", hint=fix)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{where} is not UTF-8 text", hint=fix) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})", hint=fix) from None


def _record(git: GitStore, held_id: str, folder: str) -> dict[str, Any]:
    """held.json, checked: an object whose ``files`` are Dream-writable paths with text or null."""
    where = f"{folder}/held.json"
    fix = (
        f"discard it with `dream restore --discard-held {held_id}` (its history stays consumed), "
        f"or restore {where} from git"
    )
    meta = read_record(git, where, fix)
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, list):
        raise InputError(f"{where} has no list of files", hint=fix)
    seen: set[str] = set()
    for item in files:
        # Both keys present: a missing one is not "no file" (null says that), it is a broken record.
        if not isinstance(item, dict) or not all(
            key in item and isinstance(item[key], (str, type(None))) for key in ("before", "after")
        ):
            raise InputError(f"{where}: every file needs a path and a before/after text (or null)", hint=fix)
        raw = item.get("path")
        problem = path_problem(raw) if isinstance(raw, str) else "not a string"
        path = ""
        if problem is None:
            try:
                path = policy.check_writable(raw)
            except ToolDenied:
                problem = "not a memory file Dream may change"
        if problem is not None:
            raise InputError(
                f"{where} names the path {describe(str(raw))} ({problem}), which a held batch can never hold; "
                "nothing was changed",
                hint=fix,
            )
        if path != raw or path in seen:
            raise InputError(f"{where} names {describe(str(raw))} in an unexpected form or twice", hint=fix)
        seen.add(path)
    assert isinstance(meta, dict)
    return meta


def folder_removal(git: GitStore, folder: str) -> dict[str, bytes | None]:
    """Every file of the held folder, for deletion: those on disk (nothing beyond a symlink is
    listed) and those committed. A folder a person deleted by hand is still in HEAD, and Dream's
    own files are never taken up as a manual edit: listed from the disk alone, it stayed in
    HEAD, and `git status` showed it deleted, for good."""
    prefix = folder.rstrip("/") + "/"
    committed = [path for path in git.files_at(git.head()) if path.startswith(prefix)]
    return dict.fromkeys([*git.fs.walk_files(folder), *committed])


def _held_change(git: GitStore, held_id: str) -> bool:
    """True when ``held_id`` names one held change (``dream review``'s), not a whole batch."""
    return state_of(git).find_change(_check_id(held_id)) is not None


def apply_held_batch(git: GitStore, held_id: str, *, force: bool = False) -> dict[str, Any]:
    if _held_change(git, held_id):  # `--apply-held` takes a held change's id too: `dream review accept`
        from dream_memory.app.review import accept

        done = accept(git, [held_id], force=force)
        first = done["accepted"][0]
        return {**first, "applied": held_id, "forced_over": done["forced_over"], "message": done["message"]}
    state, _, folder = _state(git, held_id)
    meta = _record(git, held_id, folder)
    files = meta["files"]
    conflicts = []
    for item in files:
        data = git.read_file(item["path"])
        current = None if data is None else data.decode("utf-8", errors="replace")
        if current != item["before"]:
            conflicts.append(item["path"])
    if conflicts and not force:
        raise RestoreConflict(
            f"cannot apply held batch {held_id}: {', '.join(conflicts)} changed since it was held; nothing was changed",
            conflicts,
        )
    changes: dict[str, bytes | None] = folder_removal(git, folder)
    for item in files:
        changes[item["path"]] = None if item["after"] is None else item["after"].encode("utf-8")
    changes[layout.DREAM_STATE] = state.without_held(held_id).to_json().encode()
    subject = f"dream: apply held {held_id} ({_one_line(meta.get('reason', ''))})"
    body = "\n".join(f"- {item['path']}" for item in files)
    span = f"{_one_line(meta.get('cursor_from'))}..{_one_line(meta.get('cursor_to'))}"
    commit = apply_commit(git, changes, f"{subject}\n\n{body}\n\nHeld-Range: {span}")
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
    """Drop a held batch; works on a record that is damaged too (that is how one is got rid of)."""
    if _held_change(git, held_id):
        from dream_memory.app.review import reject

        done = reject(git, [held_id])
        return {**done["rejected"][0], "discarded": held_id, "message": done["message"]}
    state, held, folder = _state(git, held_id)
    changes: dict[str, bytes | None] = folder_removal(git, folder)
    changes[layout.DREAM_STATE] = state.without_held(held_id).to_json().encode()
    commit = apply_commit(git, changes, f"dream: discard held {held_id} ({_one_line(held.reason)})")
    return {
        "discarded": held_id,
        "commit": commit,
        "message": f"discarded held batch {held_id} in commit {commit[:10] if commit else '(none)'}; "
        "its history stays consumed",
    }


def without_held(git: GitStore, state: DreamState, held_id: str) -> tuple[dict[str, bytes | None], DreamState]:
    """What dropping one held change or batch writes (its folder deleted, ``state`` without it),
    and the state it leaves: `dream forget` commits it, and its dry run reads the files through
    it, so that both name the same files."""
    changes: dict[str, bytes | None] = folder_removal(git, f"{layout.DREAM_HELD_DIR}/{_check_id(held_id)}")
    state = state.without_change(held_id).without_held(held_id)
    changes[layout.DREAM_STATE] = state.to_json().encode()
    return changes, state


def held_on(git: GitStore, going: Callable[[str], bool]) -> dict[str, str]:
    """Held changes and batches (id -> path) on a file ``going`` says is about to go or be
    renamed (``dream forget``): their records would name a file that is no longer there."""
    state = state_of(git)
    found = {item.id: item.path for item in state.changes if going(item.path)}
    for batch in state.held:
        hit = next((path for path in batch.files if going(path)), None)
        if hit is not None:
            found[batch.id] = hit
    return found


def _one_line(value: object) -> str:
    """A record's free text in a commit subject: one line, printable, bounded."""
    text = "" if value is None else str(value)
    return "".join(c if c.isprintable() else " " for c in text)[:200]


def same_change(meta: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two held changes the same one for review: the file and the lines it removes
    and adds (line numbers move as other lines land), or the whole text for a file held whole."""
    if meta.get("change") == "file":
        return (meta.get("path"), "file", meta.get("base"), meta.get("theirs"))
    return (meta.get("path"), meta.get("change"), tuple(meta.get("removed") or ()), tuple(meta.get("added") or ()))


def waiting_changes(git: GitStore, state: DreamState) -> dict[tuple[Any, ...], str]:
    """The held changes waiting for review, by what they change; a record that cannot be read is
    left out (it is never taken for a duplicate)."""
    found: dict[tuple[Any, ...], str] = {}
    for item in state.changes:
        meta = record_json(git.read_file(f"{layout.DREAM_HELD_DIR}/{item.id}/change.json"))
        if meta.get("path") == item.path:
            found.setdefault(same_change(meta), item.id)
    return found


def record_json(data: bytes | None) -> dict[str, Any]:
    """A held record's change.json as an object; {} when missing, not UTF-8, not JSON or not an object."""
    try:
        meta = json.loads(data.decode("utf-8")) if data is not None else {}
    except (UnicodeDecodeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


PLACE = "place"  # a held record's facts left out, as accept places them again (app/dream/unapplied.py)


def placed_again(meta: Mapping[str, Any], path: str, text: str | None, today: str) -> str | None:
    """``dream review accept`` of facts left out, on the file as it is now: the facts placed
    anew, so lines added since they were held are no conflict (merging the held lines would
    be). None when the record holds no facts to place or the file is gone."""
    raw = meta.get(PLACE)
    if text is None or not isinstance(raw, list):
        return None
    facts = [
        Fact(
            str(f["tag"]),
            str(f["text"]),
            f.get("name") if isinstance(f.get("name"), str) else None,
            (),
            str(f["scope"]),
        )
        for f in raw
        if isinstance(f, dict) and all(isinstance(f.get(k), str) for k in ("tag", "text", "scope"))
    ]
    changed = place_facts(facts, lambda rel: text if rel == path else None, today)
    return changed[path][1] if path in changed else text
