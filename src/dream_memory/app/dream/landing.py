"""How a batch ends in git: committed, nothing new, held (the guard kept its diff under
memory/.dream_held/), set aside after repeated content failures; and the history compaction after
the run. Each lands as one commit through versioning.apply_commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import FileChange, GitStore, unified_diff
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.adapters.workspace import archive_paths, is_template, read_files
from dream_memory.app.deletion_window import recent_removals
from dream_memory.app.dream.options import DreamContext
from dream_memory.app.dream.phases import ModelSaid
from dream_memory.app.dream.provenance import attribute_batch, commit_body, save_note
from dream_memory.app.dream.report import STATUS_FAILED, BatchRecord, DreamReport, scrub
from dream_memory.app.versioning import apply_commit
from dream_memory.core import layout
from dream_memory.core.guards import hold_reasons
from dream_memory.core.history import Batch
from dream_memory.core.state import SET_ASIDE_AFTER, DreamState, HeldBatch, SetAside
from dream_memory.errors import BadReply, DreamError


@dataclass(frozen=True)
class BatchContext:
    """One batch of a run: the run's wiring, the batch, and where its outcome is recorded."""

    ctx: DreamContext
    git: GitStore | None  # None in a dry run
    batch: Batch
    record: BatchRecord
    report: DreamReport


def as_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _carried(ctx: DreamContext, git: GitStore) -> dict[str, bytes | None]:
    """In an enclosing repository: memory/ files it already tracks ride along with Dream's commit."""
    if not git.enclosing:
        return {}
    paths = set(git.tracked_in_head(layout.CARRIED_PATTERNS))
    if any(p.startswith(layout.ARCHIVE_DIR + "/") for p in paths):
        paths |= set(archive_paths(ctx.root))
    with ctx.history.lock():  # a consistent snapshot while appenders may be writing
        return read_files(ctx.root, sorted(paths))


def _commit_message(subject: str, batch: Batch, changes: Sequence[FileChange], record: BatchRecord, model: str) -> str:
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
    return "\n".join(lines)


def _subject_for(batch: Batch, changes: Sequence[FileChange]) -> str:
    summary = ", ".join(f"{c.path} +{c.added} -{c.removed}" for c in changes[:4])
    more = f", +{len(changes) - 4} more" if len(changes) > 4 else ""
    return f"dream: {batch.cursor_from}..{batch.cursor_to}: {summary}{more}"


def _bookkeeping(cursor: int, state: DreamState) -> dict[str, bytes | None]:
    return {layout.DREAM_CURSOR: f"{cursor}\n".encode(), layout.DREAM_STATE: state.to_json().encode()}


def land_batch(where: BatchContext, staging: StagingWorkspace, state: DreamState) -> DreamState:
    """The batch's one commit: its edits (or, held, their diff), the cursor past it, the state."""
    ctx, git, batch, record, report = where.ctx, where.git, where.batch, where.record, where.report
    assert git is not None
    changes = staging.changes()
    attribute_batch(record, changes)
    state = state.clear_failure()
    diffs = [unified_diff(p, as_bytes(b), as_bytes(a)) for p, (b, a) in changes.items()]
    template = lambda path, text: path in layout.DURABLE_FILES and is_template(path, text)  # noqa: E731
    edited = [path for path, (before, _) in changes.items() if before is not None]
    window = recent_removals(git, edited, ctx.options.guard.window_batches, is_template=template)
    reasons = hold_reasons(changes, ctx.options.guard, is_template=template, recent=window)
    files: dict[str, bytes | None] = {}
    if not changes:
        record.outcome = "nothing_new"
        subject = f"dream: nothing new in {batch.cursor_from}..{batch.cursor_to}"
    elif reasons:
        held = _hold(ctx, batch, changes, reasons)
        state = state.add_held(held)
        files.update(_held_files(held, changes, diffs))
        record.outcome = "held"
        record.notes.append("held: " + "; ".join(reasons))
        report.held.append(held.to_report())
        subject = f"dream: held {batch.cursor_from}..{batch.cursor_to} ({reasons[0]})"
    else:
        files.update({p: a.encode("utf-8") for p, (_, a) in changes.items()})
        record.outcome = "committed"
        record.files_changed = diffs
        subject = _subject_for(batch, diffs)
    files.update(_bookkeeping(batch.cursor_to, state))
    files.update(_carried(ctx, git))
    message = _commit_message(subject, batch, diffs if record.outcome == "committed" else [], record, ctx.model.name)
    record.commit = apply_commit(git, files, scrub(ctx.redactor, message))
    if record.commit:
        report.commits.append(record.commit)
    if record.commit and record.outcome == "committed":
        _provenance_note(where)
    return state


def _provenance_note(where: BatchContext) -> None:
    """The batch's provenance note beside its commit; a note that cannot be written is reported,
    and the commit body still lists the facts and their cursors."""
    ctx, record = where.ctx, where.record
    try:
        assert where.git is not None
        save_note(where.git, record, where.batch.entries, ctx.model.name, ctx.clock.now().isoformat(timespec="seconds"))
    except DreamError as exc:
        record.notes.append(f"the provenance note was not written ({exc.message}); the commit body lists the facts")


def _hold(ctx: DreamContext, batch: Batch, changes: dict[str, tuple[str | None, str]], reasons: list[str]) -> HeldBatch:
    return HeldBatch(
        id=f"{batch.cursor_from}-{batch.cursor_to}",
        cursor_from=batch.cursor_from,
        cursor_to=batch.cursor_to,
        reason="; ".join(reasons),
        created=ctx.clock.now().isoformat(timespec="seconds"),
        files=tuple(sorted(changes)),
    )


def _held_files(
    held: HeldBatch, changes: dict[str, tuple[str | None, str]], diffs: list[FileChange]
) -> dict[str, bytes | None]:
    folder = f"{layout.DREAM_HELD_DIR}/{held.id}"
    meta = {
        "id": held.id,
        "cursor_from": held.cursor_from,
        "cursor_to": held.cursor_to,
        "reason": held.reason,
        "created": held.created,
        "files": [{"path": p, "before": b, "after": a} for p, (b, a) in sorted(changes.items())],
    }
    return {
        f"{folder}/held.json": (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode(),
        f"{folder}/changes.diff": "".join(d.diff for d in diffs).encode(),
    }


def content_failure(where: BatchContext, state: DreamState, exc: BadReply) -> DreamState:
    """Count a content failure against the batch; the third in a row sets it aside."""
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
        return state
    state = state.record_failure(batch.cursor_from, batch.cursor_to, message)
    failure = state.failure
    assert failure is not None
    if failure.count < SET_ASIDE_AFTER:
        record.outcome = "failed"
        record.notes.append(f"content failure {failure.count} of {SET_ASIDE_AFTER} before the batch is set aside")
        report.status = STATUS_FAILED
        fsutil.atomic_write(ctx.root / layout.DREAM_STATE, state.to_json(), site="dream_state.write")
        return state
    reason = f"failed {failure.count} runs in a row: {message}"
    state = state.add_set_aside(
        SetAside(batch.cursor_from, batch.cursor_to, reason, ctx.clock.now().isoformat(timespec="seconds"))
    )
    record.outcome = "set_aside"
    report.set_aside.append({"cursor_from": batch.cursor_from, "cursor_to": batch.cursor_to, "reason": reason})
    files = {**_bookkeeping(batch.cursor_to, state), **_carried(ctx, git)}
    subject = f"dream: set aside {batch.cursor_from}..{batch.cursor_to} after {failure.count} failed runs"
    record.commit = apply_commit(git, files, _commit_message(subject, batch, [], record, ctx.model.name))
    if record.commit:
        report.commits.append(record.commit)
    report.cursor_after = batch.cursor_to
    report.entries_processed += record.entries
    return state


def compact(ctx: DreamContext, git: GitStore | None, report: DreamReport) -> None:
    # What this run's commits left (never a file moved ahead of them: that would archive entries
    # still pending).
    cursor = report.cursor_after
    result = ctx.history.compact(dream_cursor=cursor, max_entries=ctx.options.max_history_entries)
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
