"""How a batch ends in git: committed, nothing new, held (the changes the guards and the write
policy keep wait under memory/.dream_held/, one record per change, the rest lands), set aside
after repeated content failures; and the history compaction after the run. Each lands as one
commit through versioning.apply_commit: the held records, the applied edits and the cursor past
the batch move together, so a crash leaves either all of them or none (the journal finishes or
rolls back the commit).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import FileChange, GitStore, unified_diff
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.adapters.workspace import archive_paths, is_template, read_files
from dream_memory.app.deletion_window import recent_removals
from dream_memory.app.dream.meanwhile import onto_edits_made_meanwhile
from dream_memory.app.dream.options import DreamContext
from dream_memory.app.dream.origins import LazyOrigins, RunOrigins
from dream_memory.app.dream.phases import ModelSaid
from dream_memory.app.dream.provenance import attribute_batch, commit_body, save_note
from dream_memory.app.dream.report import STATUS_FAILED, BatchRecord, DreamReport, scrub
from dream_memory.app.dream.unapplied import Piece, unapplied_pieces
from dream_memory.app.held import same_change, waiting_changes
from dream_memory.app.onto_edits import writing_onto_edits
from dream_memory.app.restore_plan import HELD, HELD_AGAIN
from dream_memory.app.versioning import apply_commit
from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.guards import hold_reasons, net_removed
from dream_memory.core.history import Batch, HistoryEntry, format_timestamp
from dream_memory.core.late_entries import late_among, still_late
from dream_memory.core.provenance import attribute
from dream_memory.core.state import SET_ASIDE_AFTER, DreamState, HeldChange, SetAside
from dream_memory.core.surrogates import json_dumps_utf8
from dream_memory.core.write_policy import Hunk, plan_file
from dream_memory.errors import BadReply, DreamError


@dataclass(frozen=True)
class BatchContext:
    """One batch of a run: the run's wiring, the batch, and where its outcome is recorded."""

    ctx: DreamContext
    git: GitStore | None  # None in a dry run
    batch: Batch
    record: BatchRecord
    report: DreamReport
    origins: RunOrigins = field(default_factory=RunOrigins)  # the run's blames, carried batch to batch
    late_now: frozenset[str] = frozenset()  # keys of every late entry in history.jsonl
    written: tuple[HistoryEntry, ...] = ()  # the batch's entries as written (``batch`` may be redacted)

    @property
    def late(self) -> frozenset[str]:
        """Keys of this batch's late entries (core/late_entries.py), keyed as written."""
        return late_among(self.written, self.late_now)


def as_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _carried(ctx: DreamContext, git: GitStore) -> dict[str, bytes | None]:
    """In an enclosing repository: memory/ files it already tracks ride along with Dream's commit,
    and the archive with a tracked history.jsonl: compaction moves its entries there, and a
    commit of the shortened history without the archive would drop them from the repository
    (a CI checkout or a Job's emptyDir, thrown away after the run, held the only copy)."""
    if not git.enclosing:
        return {}
    paths = set(git.tracked_in_head(layout.CARRIED_PATTERNS))
    if layout.HISTORY in paths or _archive_tracked(paths):
        paths |= set(archive_paths(ctx.root))
    with ctx.history.lock():  # a consistent snapshot while appenders may be writing
        return read_files(ctx.root, sorted(paths))


def _archive_tracked(paths: set[str]) -> bool:
    return any(p.startswith(layout.ARCHIVE_DIR + "/") for p in paths)


def _archive_kept_out(git: GitStore) -> str | None:
    """Why compaction must not run: the enclosing repository tracks history.jsonl but ignores the
    archive, so the entries moved would leave the repository (and a CI checkout with them)."""
    if not git.enclosing:
        return None
    tracked = set(git.tracked_in_head(layout.CARRIED_PATTERNS))
    if layout.HISTORY not in tracked or _archive_tracked(tracked):
        return None
    refusal = git.commit_refusal([f"{layout.ARCHIVE_DIR}/history-0000-00.jsonl"])
    if refusal is None:
        return None
    return (
        f"history compaction skipped: the repository tracks {layout.HISTORY} but would not take "
        f"{layout.ARCHIVE_DIR}/, so the entries it moves would leave the repository ({refusal.message}); "
        f"un-ignore {layout.ARCHIVE_DIR}/ there, or stop tracking {layout.HISTORY}"
    )


def _commit_message(
    subject: str, batch: Batch, changes: Sequence[FileChange], record: BatchRecord, model: str, *, scope: str | None
) -> str:
    lines = [subject, ""]
    if changes:
        width = max(len(c.path) for c in changes)
        lines += [f"  {c.path.ljust(width)}  +{c.added} -{c.removed}" for c in changes]
        lines.append("")
    lines.append(f"Entries: {record.entries}, facts: {record.facts}, tool calls: {record.tool_calls}")
    if record.outcome == "committed" and record.found:
        lines += ["", *commit_body(record)]
    lines += [
        "",
        f"Dream-Range: {batch.cursor_from}..{batch.cursor_to}",
        f"Dream-Model: {model}",
        f"Dream-Tokens: {record.usage.total_tokens}",
    ]
    if scope is not None:  # with scope rules: whose entries the commit holds (docs/scopes.md)
        lines.append(f"Dream-Scope: {scope}")
    return "\n".join(lines)


def _subject_for(batch: Batch, changes: Sequence[FileChange]) -> str:
    summary = ", ".join(f"{c.path} +{c.added} -{c.removed}" for c in changes[:4])
    more = f", +{len(changes) - 4} more" if len(changes) > 4 else ""
    return f"dream: {batch.cursor_from}..{batch.cursor_to}: {summary}{more}"


def _past_batch(where: BatchContext, state: DreamState) -> tuple[DreamState, dict[str, bytes | None]]:
    """The state recording the batch's late entries as dreamt, and the cursor and state files
    that say the batch is done. The cursor never goes back: a batch of late entries lies below it."""
    state = state.with_late_dreamt(still_late(state.late_dreamt, where.late_now, where.late))
    cursor = max(where.report.cursor_after, where.batch.cursor_to)
    return state, {layout.DREAM_CURSOR: f"{cursor}\n".encode(), layout.DREAM_STATE: state.to_json().encode()}


@contextlib.contextmanager
def _open_unless_committed(
    git: GitStore, record: BatchRecord, report: DreamReport, passed: Callable[[], None] = lambda: None
) -> Iterator[None]:
    """A batch whose commit raised before HEAD moved is left open, so the run's failure is
    reported as the batch's own (a refused commit read "committed" with no commit). One that
    raised after (writing the files failed) is committed, and the report lists its commit;
    the next run finishes writing it. ``passed`` narrows the record to what the commit passed
    (only the batch's front set aside): only once it landed, as a batch left open ran whole."""
    before = git.head()
    try:
        yield
    except BaseException:
        landed = None
        with contextlib.suppress(Exception):  # the error being raised is the one to report
            landed = git.head()
        if landed is not None and landed != before:  # its commit holds the cursor past it
            record.commit = landed
            report.commits.append(landed)
            passed()
            report.cursor_after = max(report.cursor_after, record.cursor_to)
            report.entries_processed += record.entries
        else:
            record.outcome, record.files_changed = "", []
        raise


def land_batch(where: BatchContext, staging: StagingWorkspace, state: DreamState) -> DreamState:
    """The batch's one commit: the edits the guards and the write policy let through, a record
    under memory/.dream_held/ for each change they hold, the cursor past the batch, the state."""
    ctx, git, batch, record, report = where.ctx, where.git, where.batch, where.record, where.report
    assert git is not None
    changes = onto_edits_made_meanwhile(git, where.record, staging.changes())
    state = state.clear_failure()

    def template(path: str, text: str | None) -> bool:
        return path in layout.DURABLE_FILES and is_template(path, text)

    # The deletion window is weighed only for a file this batch removes lines from
    # (core.guards.hold_reasons reads it for no other): a batch that only adds walks no history.
    removing = [
        path
        for path, (before, after) in changes.items()
        if before is not None and not template(path, before) and net_removed(before, after) > 0
    ]
    window = recent_removals(git, removing, ctx.options.guard.window_batches, is_template=template)
    files, landed, held, again = _sort(where, changes, state, template, window, read=staging.read)
    if again:
        record.notes.append(
            f"not held again: the same change is already waiting for review as {', '.join(again)} (dream review)"
        )
    diffs = [unified_diff(p, as_bytes(b), as_bytes(a)) for p, (b, a) in landed.items()]
    for item, meta in held:
        files.update(_held_files(item, meta))
    state = state.add_changes(tuple(item for item, _ in held))
    report.held.extend(item.to_report() for item, _ in held)
    if held:
        record.notes.append(
            f"held {len(held)} change(s) for review (dream review): " + "; ".join(i.reason for i, _ in held)
        )
    if not changes and not held and not again:
        record.outcome = "nothing_new"
        subject = f"dream: nothing new in {batch.cursor_from}..{batch.cursor_to}"
    elif not landed:
        record.outcome = "held"
        what = f"{len(held)} change(s): {held[0][0].reason}" if held else f"already held as {', '.join(again)}"
        subject = f"dream: held {batch.cursor_from}..{batch.cursor_to} ({what})"
    else:
        record.outcome = "committed"
        record.files_changed = diffs
        subject = _subject_for(batch, diffs) + (f" ({len(held)} held for review)" if held else "")
    state, bookkeeping = _past_batch(where, state)
    files.update(bookkeeping)
    files.update(_carried(ctx, git))
    scope = ctx.options.scope_named(batch.scope)
    message = _commit_message(
        subject, batch, diffs if record.outcome == "committed" else [], record, ctx.model.name, scope=scope
    )
    message += "".join(f"\n{HELD}: {i.id} {i.path}:{i.first_line}-{i.last_line}" for i, _ in held)
    message += "".join(f"\n{HELD_AGAIN}: {held_id}" for held_id in again)  # a restore of its first batch keeps it
    # The check above was made before the commit was built; an edit since then (nanobot's
    # write_user while git writes objects) is merged onto as each file is written.
    with (
        _open_unless_committed(git, record, report),
        writing_onto_edits(git, {p: as_bytes(b) for p, (b, _) in landed.items()}) as onto,
    ):
        record.commit = apply_commit(git, files, scrub(ctx.redactor, message))
    if record.commit:
        report.commits.append(record.commit)
        record.notes.extend(onto.notes("while the batch's commit was written", record.commit))
    if record.commit and record.outcome == "committed":
        _provenance_note(where)
    return state


_Held = list[tuple[HeldChange, dict[str, Any]]]


def _sort(
    where: BatchContext,
    changes: dict[str, tuple[str | None, str]],
    state: DreamState,
    template: Callable[[str, str | None], bool],
    window: Any,
    *,
    read: Callable[[str], str | None],
) -> tuple[dict[str, bytes | None], dict[str, tuple[str | None, str | None]], _Held, list[str]]:
    """Each file's change split into what lands and what is held, then the facts phase 2 left
    out, held as the placement rules would add them; a held change the same as one already
    waiting is not held again (its id is listed instead). ``read``: a file the batch left alone."""
    ctx, git, batch, record = where.ctx, where.git, where.batch, where.record
    assert git is not None
    files: dict[str, bytes | None] = {}
    landed: dict[str, tuple[str | None, str | None]] = {}
    held: list[tuple[HeldChange, dict[str, Any]]] = []
    taken = {c.id for c in state.changes} | {h.id for h in state.held}
    waiting = waiting_changes(git, state)
    again: list[str] = []  # ids of held changes this batch asked for again
    pieces: list[tuple[Piece, dict[str, Any] | None]] = []
    for path, (before, after) in changes.items():
        reasons = hold_reasons({path: (before, after)}, ctx.options.guard, is_template=template, recent=window)
        result, split = _split(where, path, (before, after), reasons, template(path, before))
        if result != before:
            landed[path] = (before, result)
            files[path] = as_bytes(result)
        pieces.extend((piece, None) for piece in split)

    def as_landing(path: str) -> str | None:
        if path in landed:
            return landed[path][1]
        return changes[path][0] if path in changes else read(path)

    attribute_batch(record, {p: (b, a) for p, (b, a) in landed.items() if a is not None})  # what lands
    today = format_timestamp(ctx.clock.now())[:10]
    held_pieces = [piece for piece, _ in pieces]
    left_out, notes = unapplied_pieces(record, as_landing, held_pieces, policy=ctx.options.write_policy, today=today)
    pieces.extend(left_out)
    record.notes.extend(notes)
    for piece, extra in pieces:
        change_id = _next_id(batch, taken)
        item, meta = _held_change(ctx, record, batch, change_id, piece)
        meta.update(extra or {})
        if (same := waiting.get(same_change(meta))) is not None:
            again.append(same)  # review would show it twice: the one waiting stands for both
            continue
        taken.add(change_id)
        held.append((item, meta))
    return files, landed, held, again


def _provenance_note(where: BatchContext) -> None:
    """The batch's provenance note beside its commit. The commit has landed: a note that cannot
    be written (a full disk: the adapter's DreamError) leaves the batch landed and is reported in
    its notes and the run's (which the text summary prints), saying what is missing and what
    stands in for it: the commit body's facts and cursors, which `dream why` reads without a note."""
    ctx, record, batch = where.ctx, where.record, where.batch
    try:
        assert where.git is not None
        save_note(where.git, record, batch.entries, ctx.model.name, ctx.clock.now().isoformat(timespec="seconds"))
    except DreamError as exc:
        sha = (record.commit or "")[:10]
        missing = (
            f"commit {sha} landed without its provenance note ({exc.message}); its body lists the facts and "
            "their cursors, which `dream why` reads instead; no later run writes the note"
        )
        record.notes.append(missing)
        where.report.notes.append(f"batch {batch.cursor_from}..{batch.cursor_to}: {missing}")


def _split(
    where: BatchContext, path: str, change: tuple[str | None, str], reasons: list[str], template: bool
) -> tuple[str | None, list[Piece]]:
    """The file's text as it lands, and the changes that wait (each with its base and theirs)."""
    before, after = change
    if reasons:  # the guards hold the file's whole change, as they held whole batches before
        return before, [(path, Hunk(0, 0, (), (), "file", "file", (), "hold", "; ".join(reasons)), before, after)]
    ctx, git = where.ctx, where.git
    assert git is not None
    now = ctx.clock.now().timestamp()
    origins = LazyOrigins(where.origins, git, path, before, now) if before is not None else None
    plan = plan_file(path, before, after, origins, ctx.options.write_policy, template=template)
    applied = {i for i, h in enumerate(plan.hunks) if h.action != "hold"}
    result = plan.compose(applied)
    return result, [(path, _joined(plan.hunks, g), result, plan.compose(applied | set(g))) for g in plan.held_groups()]


def _joined(hunks: Sequence[Hunk], group: list[int]) -> Hunk:
    """One held change's hunks as one (a move: the removal, then the line's new place)."""
    lead = hunks[group[0]]
    if len(group) == 1:
        return lead
    parts = [hunks[i] for i in group]
    return replace(
        lead,
        change="move",
        start=min(h.start for h in parts),
        end=max(h.end for h in parts),
        removed=tuple(line for h in parts for line in h.removed),
        added=tuple(line for h in parts for line in h.added),
        reason=lead.reason.replace("removes ", "moves ", 1).replace("replaces ", "moves ", 1),
    )


def _next_id(batch: Batch, taken: set[str]) -> str:
    n = 1
    while f"{batch.cursor_from}-{batch.cursor_to}.{n}" in taken:
        n += 1
    return f"{batch.cursor_from}-{batch.cursor_to}.{n}"


def _facts_of(record: BatchRecord, path: str, base: str | None, theirs: str | None) -> list[str]:
    """The batch's facts that asked for a held change, with the cursors they were learnt from."""
    if not record.found or theirs is None:
        return []
    found = attribute({path: (base, theirs)}, record.found, record.declared)
    numbers = sorted({n for line in found.lines for n in line.facts} | {n for r in found.removed for n in r.facts})
    facts = [record.found[n - 1] for n in numbers if 0 < n <= len(record.found)]
    return [f"{f.render()}  <- {', '.join(map(str, f.sources)) or 'unknown'}" for f in facts]


def _held_change(
    ctx: DreamContext, record: BatchRecord, batch: Batch, change_id: str, piece: Piece
) -> tuple[HeldChange, dict[str, Any]]:
    path, hunk, base, theirs = piece
    first, last = hunk.lines if hunk.change != "file" else (1, max(1, len(split_lines(base or ""))))
    reason = scrub(ctx.redactor, hunk.reason)
    item = HeldChange(
        id=change_id,
        path=path,
        cursor_from=batch.cursor_from,
        cursor_to=batch.cursor_to,
        reason=reason,
        created=ctx.clock.now().isoformat(timespec="seconds"),
        first_line=first,
        last_line=last,
    )
    meta = {
        "id": change_id,
        "version": 1,
        "facts": _facts_of(record, path, base, theirs),
        "path": path,
        "cursor_from": batch.cursor_from,
        "cursor_to": batch.cursor_to,
        "reason": reason,
        "created": item.created,
        "change": hunk.change,
        "kind": hunk.kind,
        "section": list(hunk.headings),
        "lines": [first, last],
        "removed": [line.rstrip("\r\n") for line in hunk.removed],
        "added": [line.rstrip("\r\n") for line in hunk.added],
        "base": base,
        "theirs": theirs,
    }
    return item, meta


def _held_files(item: HeldChange, meta: dict[str, Any]) -> dict[str, bytes | None]:
    folder = f"{layout.DREAM_HELD_DIR}/{item.id}"
    diff = unified_diff(item.path, as_bytes(meta["base"]), as_bytes(meta["theirs"])).diff
    return {
        # The facts may hold half an emoji (a lone surrogate): escaped, so the record is UTF-8.
        f"{folder}/change.json": (json_dumps_utf8(meta, indent=2) + "\n").encode(),
        f"{folder}/changes.diff": diff.encode(),
    }


def content_failure(where: BatchContext, state: DreamState, exc: BadReply) -> tuple[DreamState, bool]:
    """Count a content failure against the batch; the third in a row sets aside the range that
    failed all three times (DreamState.record_failure). Also says whether the run goes on."""
    ctx, git, batch, record, report = where.ctx, where.git, where.batch, where.record, where.report
    message = scrub(ctx.redactor, exc.message)  # it reaches the state and a commit message
    # What the model said goes to the report (redacted), never to the state file or a commit.
    quote = "; ".join(exc.said) if isinstance(exc, ModelSaid) else ""
    shown = message + (f"; the model answered: {scrub(ctx.redactor, quote)}" if quote else "")
    record.error = f"content: {shown}"
    report.errors.append(f"batch {batch.cursor_from}..{batch.cursor_to}: {shown}")
    if ctx.options.dry_run or git is None:
        record.outcome = "failed"
        report.status = STATUS_FAILED
        return state, False
    state = state.record_failure(batch.cursor_from, batch.cursor_to, message)
    failure = state.failure
    assert failure is not None
    if failure.count < SET_ASIDE_AFTER:
        record.outcome = "failed"
        record.notes.append(
            f"content failure {failure.count} of {SET_ASIDE_AFTER} before {_to_set_aside(batch, failure.cursor_to)}"
        )
        report.status = STATUS_FAILED
        fsutil.atomic_write(ctx.root / layout.DREAM_STATE, state.to_json(), site="dream_state.write")
        return state, False
    aside = replace(batch, entries=tuple(e for e in batch.entries if e.cursor <= failure.cursor_to))
    left = len(batch.entries) - len(aside.entries)
    reason = f"failed {failure.count} runs in a row: {message}"
    state = state.add_set_aside(
        SetAside(aside.cursor_from, aside.cursor_to, reason, ctx.clock.now().isoformat(timespec="seconds"))
    )
    record.outcome = "set_aside"
    if left:
        # The batches planned after this one start past its end: landing them would carry the
        # cursor over the entries left pending here, so the run ends and the next one starts there.
        record.notes.append(
            f"set aside {aside.cursor_from}..{aside.cursor_to}, which failed {failure.count} runs in a row; "
            f"{batch.entries[len(aside.entries)].cursor}..{batch.cursor_to} joined the batch after its first "
            "failure and stay pending: the run stops here and the next one dreams them"
        )
        # Only the late entries set aside are dreamt: the others stay pending with the rest.
        written = tuple(e for e in where.written if e.cursor <= failure.cursor_to)
        where = replace(where, batch=aside, written=written)
    state, bookkeeping = _past_batch(where, state)
    files = {**bookkeeping, **_carried(ctx, git)}
    subject = f"dream: set aside {aside.cursor_from}..{aside.cursor_to} after {failure.count} failed runs"
    counted = replace(record, entries=len(aside.entries))
    message = _commit_message(subject, aside, [], counted, ctx.model.name, scope=ctx.options.scope_named(batch.scope))
    with _open_unless_committed(git, record, report, partial(report.set_aside_landed, record, aside, batch, reason)):
        record.commit = apply_commit(git, files, message)
    report.set_aside_landed(record, aside, batch, reason)
    if record.commit:
        report.commits.append(record.commit)
    report.cursor_after = max(report.cursor_after, record.cursor_to)
    report.entries_processed += record.entries
    return state, not left


def _to_set_aside(batch: Batch, failed_to: int) -> str:
    """What the third failure would set aside, as a failed batch's note ends."""
    if failed_to >= batch.cursor_to:
        return "the batch is set aside"
    return (
        f"{batch.cursor_from}..{failed_to} is set aside (it failed in each of these runs; "
        f"the entries after it joined the batch later and stay pending)"
    )


def compact(ctx: DreamContext, git: GitStore | None, report: DreamReport) -> None:
    # What this run's commits left (never a file moved ahead of them: that would archive entries
    # still pending).
    cursor = report.cursor_after
    # The state as this run's last commit (or failure) left it: which late entries are dreamt.
    dreamt_late = DreamState.from_json(fsutil.read_text(ctx.root / layout.DREAM_STATE)).late_dreamt
    if git is not None and (kept_out := _archive_kept_out(git)) is not None:
        report.notes.append(kept_out)
        return
    result = ctx.history.compact(
        dream_cursor=cursor, max_entries=ctx.options.max_history_entries, dreamt_late=dreamt_late
    )
    if result.note is not None:
        report.notes.append(result.note)
    if not result.archived:
        return
    report.compaction = {"archived": result.archived, "archive_files": list(result.archive_files), "commit": None}
    if git is not None and git.enclosing:
        carried = _carried(ctx, git)
        if carried:
            message = (
                f"dream: compact history ({result.archived} entries to {layout.ARCHIVE_DIR}/)\n\n"
                f"Entries up to cursor {cursor} moved; nothing was deleted."
            )
            report.compaction["commit"] = apply_commit(git, carried, message)
