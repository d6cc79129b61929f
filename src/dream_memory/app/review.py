"""``dream review``: the changes Dream held, one at a time: list, show, accept, reject.

Each held change waits as memory/.dream_held/<id>/change.json (the text the change started
from, ``base``; the text with it, ``theirs``; the hunk's lines) and an entry in the state file.
Accepting merges it into the file as it is now (base, ours = now, theirs: ``merge_texts``, the
rule a restore follows): a conflict names the file and the lines and changes nothing. Accepting
or rejecting removes the record and the state entry in the same commit, one commit per change,
so ``git log`` shows every step. Batches held whole by earlier versions (held.json) are listed
too and settled the way ``dream restore --apply-held/--discard-held`` settles them.

A record is a file anyone who can write the workspace can change: its id, its JSON and its path
are checked before anything is read or written through them (``app.held``'s rules); a damaged
record can still be rejected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dream_memory.adapters.git import GitStore, unified_diff
from dream_memory.app.held import (
    _check_id,
    _one_line,
    apply_held_batch,
    discard_held_batch,
    folder_removal,
    placed_again,
    read_record,
    state_of,
    unknown_held,
)
from dream_memory.app.versioning import apply_commit, commit_manual_edits, recover
from dream_memory.core import layout, policy
from dream_memory.core.paths import describe, path_problem
from dream_memory.core.state import DreamState, HeldChange
from dream_memory.errors import DreamError, InputError, RestoreConflict, ToolDenied, UsageError

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime


def _as_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


@dataclass(frozen=True)
class Record:
    """A held change's record, checked."""

    item: HeldChange
    base: str | None
    theirs: str | None
    meta: dict[str, Any]

    def to_json(self, *, full: bool = False) -> dict[str, Any]:
        item = self.item
        data: dict[str, Any] = {
            "id": item.id,
            "type": "change",
            "path": item.path,
            "lines": [item.first_line, item.last_line],
            "change": _one_line(self.meta.get("change", "")),
            "reason": item.reason,
            "cursor_from": item.cursor_from,
            "cursor_to": item.cursor_to,
            "created": item.created,
            "removed": _strings(self.meta.get("removed")),
            "added": _strings(self.meta.get("added")),
            "diff": unified_diff(item.path, _as_bytes(self.base), _as_bytes(self.theirs)).diff,
        }
        if full:
            data["section"] = _strings(self.meta.get("section"))
            data["facts"] = _strings(self.meta.get("facts"))
        return data


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _record(git: GitStore, item: HeldChange) -> Record:
    _check_id(item.id)  # the state file is the workspace's too: its ids name folders
    where = f"{layout.DREAM_HELD_DIR}/{item.id}/change.json"
    fix = f"reject it with `dream review reject {item.id}` (its history stays consumed), or restore {where} from git"
    meta = read_record(git, where, fix)
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), (str, type(None))) for k in ("base", "theirs")):
        raise InputError(f"{where} needs a base and a theirs text (or null)", hint=fix)
    raw = meta.get("path")
    problem = path_problem(raw) if isinstance(raw, str) else "not a string"
    if problem is None:
        try:
            if policy.check_writable(raw) != raw:
                problem = "not in its plain form"
        except ToolDenied:
            problem = "not a memory file Dream may change"
    if problem is None and raw != item.path:
        problem = f"not the file the state names ({describe(item.path)})"
    if problem is not None:
        raise InputError(
            f"{where} names the path {describe(str(raw))} ({problem}), which a held change can never hold; "
            "nothing was changed",
            hint=fix,
        )
    if meta["base"] is None and meta["theirs"] is None:
        raise InputError(f"{where} holds neither a base nor a theirs text", hint=fix)
    return Record(item, meta["base"], meta["theirs"], meta)


def _find(state: DreamState, held_id: str) -> HeldChange | None:
    _check_id(held_id)
    return state.find_change(held_id)


def list_held(git: GitStore) -> dict[str, Any]:
    """Every change and batch waiting for a person; a damaged record is listed with its problem."""
    recover(git)
    state = state_of(git)
    changes: list[dict[str, Any]] = []
    for item in state.changes:
        try:
            changes.append(_record(git, item).to_json())
        except InputError as exc:
            changes.append({**item.to_report(), "type": "change", "problem": exc.message})
    batches = [{**h.to_report(), "type": "batch", "files": list(h.files)} for h in state.held]
    return {"changes": changes, "batches": batches, "count": len(changes) + len(batches)}


def show_held(git: GitStore, held_id: str) -> dict[str, Any]:
    recover(git)
    state = state_of(git)
    item = _find(state, held_id)
    if item is not None:
        return _record(git, item).to_json(full=True)
    batch = state.find_held(held_id)
    if batch is None:
        raise unknown_held(state, held_id)
    diff = git.read_file(f"{layout.DREAM_HELD_DIR}/{held_id}/changes.diff") or b""
    return {**batch.to_report(), "type": "batch", "files": list(batch.files), "diff": diff.decode("utf-8", "replace")}


def _chosen(state: DreamState, ids: Sequence[str], every: bool) -> list[str]:
    if every:
        return [c.id for c in state.changes] + [h.id for h in state.held]
    if not ids:
        raise InputError.naming(
            lambda o: (f"name the held changes (dream review lists their ids), or give {o('--all')}", None)
        )
    for held_id in ids:
        if _find(state, held_id) is None and state.find_held(held_id) is None:
            raise unknown_held(state, held_id)
    return list(dict.fromkeys(ids))


def _merge(base: str, ours: str, theirs: str, *, force: bool) -> tuple[str, tuple[tuple[int, int], ...]]:
    from dream_memory.core.merge import merge_texts

    merged = merge_texts(base, ours, theirs, prefer="theirs" if force else "none")
    return merged.text, merged.conflicts


def _conflict(message: str, path: str) -> RestoreConflict:
    return RestoreConflict(
        message, [path], hint="edit the file by hand (dream review show ID has the change), then reject the change"
    )


def _accepted_text(record: Record, ours: str | None, forced: list[str] | None = None) -> str | None:
    """The file with the change merged in; RestoreConflict (exit 1) where it cannot be, unless
    ``forced`` (restore --apply-held --force): then the change wins its conflicting lines only,
    and the file is noted in ``forced``."""
    path, base, theirs = record.item.path, record.base, record.theirs
    if ours == base:
        return theirs
    # Facts phase 2 left out: placed anew in the file as it is now (lines added under the same
    # heading since would make merging the held lines a conflict).
    placed = placed_again(record.meta, path, ours, record.item.created[:10])
    if placed is not None:
        return placed
    if theirs is None or ours is None:  # a held deletion or creation meets a file that changed since
        if forced is not None:
            forced.append(path)
            return theirs
        state = "was removed" if ours is None else "changed"
        raise _conflict(f"cannot accept {record.item.id}: {path} {state} since it was held; nothing was changed", path)
    text, conflicts = _merge(base or "", ours, theirs, force=forced is not None)
    if conflicts and forced is not None:
        forced.append(path)
    elif conflicts:
        raise _conflict(
            f"cannot accept {record.item.id}: {path} {_ranges(conflicts)} changed since it was held; "
            "nothing was changed",
            path,
        )
    return text


def _accept_into(
    record: Record, current: str | None, groups: dict[str, tuple[str, str | None, str]], forced: list[str] | None
) -> str | None:
    """``current`` with the change accepted. Changes one batch held in one file share their base:
    accepted together they are merged as one change (base, the file before the first of them, all
    of them), so two neighbouring hunks of one diff are not taken for a conflict with each other.
    ``groups``: per file, the base, the text before the group and the group's changes so far."""
    path, base, theirs = record.item.path, record.base, record.theirs
    group = groups.get(path)
    if group is not None and base is not None and theirs is not None and group[0] == base:
        combined, clash = _merge(base, group[2], theirs, force=False)
        if not clash:
            groups[path] = (base, group[1], combined)
            return _accepted_text(replace(record, theirs=combined), group[1], forced)
    if base is not None and theirs is not None:
        groups[path] = (base, current, theirs)
    else:
        groups.pop(path, None)
    return _accepted_text(record, current, forced)


def _ranges(conflicts: Sequence[tuple[int, int]]) -> str:
    """1-based inclusive ranges as a person reads them ((n, n - 1): just before line n)."""
    parts = [str(a) if b == a else f"{a}-{b}" if b > a else f"before {a}" for a, b in conflicts]
    one = len(conflicts) == 1 and conflicts[0][1] <= conflicts[0][0]
    return ("line " if one else "lines ") + ", ".join(parts)


def accept(git: GitStore, ids: Sequence[str], *, every: bool = False, force: bool = False) -> dict[str, Any]:
    """Apply held changes, one commit each; every change is merged before any is committed, so a
    conflict in one of them changes nothing. ``force``: the change's side of conflicting lines."""
    recover(git)
    git.check_can_commit()
    state = state_of(git)
    chosen = _chosen(state, ids, every)
    batches = [h for h in chosen if state.find_held(h) is not None]
    if batches and len(batches) < len(chosen):
        # Whole batches held by an earlier version write their files as they were held: the held
        # changes are merged after them, against what they wrote (merged before, a change's
        # commit wrote its file as it was before the batch, and the batch's lines were lost).
        first = accept(git, batches, force=force)
        then = accept(git, [h for h in chosen if h not in batches], force=force)
        done_all = [*first["accepted"], *then["accepted"]]
        forced_all = sorted({*first["forced_over"], *then["forced_over"]})
        return {"accepted": done_all, "forced_over": forced_all, "message": _summary("accepted", done_all, forced_all)}
    texts: dict[str, str | None] = {}
    groups: dict[str, tuple[str, str | None, str]] = {}
    plan: list[tuple[Record, str | None, str | None]] = []  # the record, its file before and after
    forced: list[str] | None = [] if force else None
    for held_id in chosen:
        item = state.find_change(held_id)
        if item is None:
            continue
        record = _record(git, item)
        if item.path not in texts:
            data = git.read_file(item.path)
            texts[item.path] = None if data is None else data.decode("utf-8", errors="replace")
        before = texts[item.path]
        texts[item.path] = _accept_into(record, before, groups, forced)
        plan.append((record, before, texts[item.path]))
    # Merged against the files as they are on disk; only now that nothing conflicts, hand edits
    # are committed as a person's (before the accepts, so blame keeps them theirs).
    commit_manual_edits(git)
    done: list[dict[str, Any]] = []
    for held_id in chosen:
        if state.find_held(held_id) is not None:  # a whole batch held by an earlier version
            result = apply_held_batch(git, held_id, force=force)
            state = state.without_held(held_id)
            done.append({"id": held_id, "type": "batch", "commit": result["commit"], "files": result["files"]})
    for record, before, text in plan:
        item = record.item
        state = state_of(git).without_change(item.id)
        changes: dict[str, bytes | None] = folder_removal(git, f"{layout.DREAM_HELD_DIR}/{item.id}")
        changes[item.path] = _as_bytes(text)
        changes[layout.DREAM_STATE] = state.to_json().encode()
        subject = f"dream: apply held {item.id}: {_where(item)} (accepted in review)"
        body = f"{_one_line(item.reason)}\n\nHeld-Range: {item.cursor_from}..{item.cursor_to}\nHeld-Change: {item.id}"
        commit = apply_commit(git, changes, f"{subject}\n\n{body}")
        done.append({"id": item.id, "type": "change", "commit": commit, "files": [item.path]})
        missing = _accept_note(git, record, commit, before, text) if commit is not None else None
        if missing:
            done[-1]["note"] = missing
    forced_over = sorted(set(forced or []))
    return {"accepted": done, "forced_over": forced_over, "message": _summary("accepted", done, forced_over)}


def _accept_note(git: GitStore, record: Record, commit: str, before: str | None, after: str | None) -> str | None:
    """The accepted lines' provenance note, from the facts the held change carries. Committed
    already, the change stands without it: a note that cannot be written is said (returned)."""
    from dream_memory.app.dream.provenance import save_accept_note

    item = record.item
    held = {"id": item.id, "cursor_from": item.cursor_from, "cursor_to": item.cursor_to, "created": item.created}
    try:
        save_accept_note(
            git, commit, item.path, texts=(before, after), facts=_strings(record.meta.get("facts")), held=held
        )
    except DreamError as exc:
        return f"the provenance note was not written ({exc.message}); `dream why` matches its lines by key words"
    return None


def reject(git: GitStore, ids: Sequence[str], *, every: bool = False) -> dict[str, Any]:
    """Drop held changes, one commit each; a damaged record can be rejected too."""
    recover(git)
    git.check_can_commit()
    state = state_of(git)
    chosen = _chosen(state, ids, every)
    done: list[dict[str, Any]] = []
    for held_id in chosen:
        if state.find_held(held_id) is not None:
            result = discard_held_batch(git, held_id)
            done.append({"id": held_id, "type": "batch", "commit": result["commit"]})
            continue
        item = state_of(git).find_change(held_id)
        if item is None:
            continue
        _check_id(item.id)
        changes: dict[str, bytes | None] = folder_removal(git, f"{layout.DREAM_HELD_DIR}/{item.id}")
        changes[layout.DREAM_STATE] = state_of(git).without_change(item.id).to_json().encode()
        subject = f"dream: reject held {item.id}: {_where(item)} (rejected in review)"
        body = f"{_one_line(item.reason)}\n\nHeld-Range: {item.cursor_from}..{item.cursor_to}\nHeld-Change: {item.id}"
        commit = apply_commit(git, changes, f"{subject}\n\n{body}")
        done.append({"id": item.id, "type": "change", "commit": commit, "files": [item.path]})
    return {"rejected": done, "message": _summary("rejected", done)}


def _where(item: HeldChange) -> str:
    lines = f"{item.first_line}" if item.first_line == item.last_line else f"{item.first_line}-{item.last_line}"
    return f"{_one_line(item.path)} line {lines}" if item.first_line else _one_line(item.path)


def _summary(verb: str, done: list[dict[str, Any]], forced_over: Sequence[str] = ()) -> str:
    if not done:
        return f"nothing {verb}"
    said = "; ".join(f"{verb} {d['id']} in commit {(d['commit'] or '(none)')[:10]}" for d in done)
    if forced_over:  # --force wrote over later work there: say where (it is in git history still)
        said += f"; --force replaced later work in {', '.join(forced_over)} (it is still in git history)"
    return said


# --- the service (every face calls this) ----------------------------------------------------------

ACTIONS = ("list", "show", "accept", "reject")


@dataclass(frozen=True)
class ReviewRequest:
    action: str = "list"  # list | show | accept | reject
    ids: tuple[str, ...] = ()
    every: bool = False  # --all


def review(rt: Runtime, request: ReviewRequest) -> dict[str, Any]:
    """``dream review``: list or show what waits (no lock: a read), accept or reject (under the
    Dream lock, so no run lands a batch meanwhile)."""
    if request.action not in ACTIONS:
        raise UsageError(f"unknown review action {request.action!r}; use one of: {', '.join(ACTIONS)}")
    if request.action == "list" and (request.ids or request.every):
        raise UsageError("`dream review` lists everything; give `show ID` to see one change")
    if request.action == "show" and (len(request.ids) != 1 or request.every):
        raise UsageError("`dream review show` takes exactly one id")
    if request.every and request.ids:
        raise UsageError.naming(lambda o: (f"give ids or {o('--all')}, not both", None))
    # Accept and reject open the repository once they hold the lock: one opened before kept the
    # pack files of that moment, which a `dream forget` holding the lock meanwhile replaced.
    committing = request.action in ("accept", "reject")
    with rt.commit_lock(f"dream review {request.action}") if committing else contextlib.nullcontext():
        git = rt.git(create=False) if rt.has_workspace() else None
        if git is None:
            raise UsageError(f"no memory versions in {rt.root}: nothing can be held there")
        with git:
            if request.action == "list":
                return list_held(git)
            if request.action == "show":
                return show_held(git, request.ids[0])
            if request.action == "accept":
                return accept(git, request.ids, every=request.every)
            return reject(git, request.ids, every=request.every)
