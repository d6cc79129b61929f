"""Dream: drain history.jsonl from .dream_cursor in batches, two model phases per batch, one commit
per batch, and a report built from the real diff (CONTRACT sections 5, 6, 6a and 8).

How a batch ends is decided here and nowhere else:

- committed: its edits, the new cursor and the state in one commit;
- nothing to add: a commit holding only the cursor ("dream: nothing new in a..b");
- held: a guard stopped the edits; their diff is kept under memory/.dream_held/<id>/, the cursor
  passes the batch;
- failed: the cursor stays before the batch and the run stops (exit 1). Only content failures
  count against the batch; after three consecutive runs failing it that way it is set aside.

The commit lands before any memory file is written (versioning.apply_commit), so a crash at any
point is finished or rolled back by the next run, and the cursor on disk is never ahead of the
memory that produced it.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dream_memory import __version__
from dream_memory.adapters import fsutil
from dream_memory.adapters.git import FileChange, GitStore, unified_diff
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.locks import dream_lock
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.adapters.workspace import init_workspace, is_template
from dream_memory.app.deletion_window import recent_removals
from dream_memory.app.versioning import apply_commit, commit_manual_edits, recover
from dream_memory.core import layout
from dream_memory.core.agent_loop import (
    LoopResult,
    TargetedExecutor,
    place_with_rules,
    run_agent_loop,
    run_text_loop,
)
from dream_memory.core.chat import ChatReply, Message, ToolSpec, Usage, check_reply
from dream_memory.core.facts import Fact, Facts, parse_facts
from dream_memory.core.frontmatter import skill_description
from dream_memory.core.guards import GuardSettings, hold_reasons
from dream_memory.core.history import Batch, HistoryEntry, format_timestamp, plan_batches, split_text
from dream_memory.core.markdown import outline, query_terms
from dream_memory.core.placement import place_facts
from dream_memory.core.ports import ChatModel, Clock, NoRedaction, Redactor, TokenCounter
from dream_memory.core.prompts import (
    PHASE1_EXAMPLES,
    PHASE1_PROTOCOL,
    PHASE2_SYSTEM,
    PHASE2_TEXT_SYSTEM,
    TEXT_EXAMPLE_LINE,
    FileContext,
    dream_tools,
    phase1_correction,
    phase1_messages,
    phase2_messages,
    render_entry,
)
from dream_memory.core.search import relevant_sections
from dream_memory.core.state import SET_ASIDE_AFTER, DreamState, HeldBatch, SetAside
from dream_memory.errors import BadReply, ConfigError, DreamError, EditRejected, ModelError

STATUS_OK = "ok"
STATUS_NOTHING = "nothing_to_do"
STATUS_DRY_RUN = "dry_run"
STATUS_FAILED = "failed"
STATUS_LOCKED = "locked"
STATUS_HELD = "held"
STATUS_BUDGET = "budget_exhausted"
STATUS_SET_ASIDE = "set_aside"
EDIT_PROTOCOLS = ("tools", "text", "auto", "facts")
_EXCERPT_CHARS = 300


@dataclass(frozen=True)
class DreamOptions:
    batch_size: int = 20
    max_batches: int | None = None
    dry_run: bool = False
    branch: str | None = None
    max_iterations: int = 10
    batch_tokens: int = 12000
    file_context_tokens: int = 6000
    max_tokens_per_run: int | None = None
    max_cost_usd: float | None = None
    max_wall_seconds: float | None = None
    max_history_entries: int = 1000
    guard: GuardSettings = field(default_factory=GuardSettings)
    edit_protocol: str = "tools"  # tools | text | auto | facts (the preset's editProtocol)
    context_window: int | None = None  # the preset's contextWindow: bounds every prompt
    reply_tokens: int = 4096  # the preset's maxTokens: room kept for the answer
    follow_external_cursor: bool = False  # a .dream_cursor moved outside a commit is followed


@dataclass
class BatchRecord:
    cursor_from: int
    cursor_to: int
    entries: int
    outcome: str = ""  # committed | nothing_new | held | set_aside | failed | dry_run
    facts: int = 0
    tool_calls: int = 0
    commit: str | None = None
    files_changed: list[FileChange] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    model_s: float = 0.0  # of which waiting for the model
    protocol: str = ""  # the edit protocol that ran last for this batch
    dialects: dict[str, int] = field(default_factory=dict)  # tool calls by how they arrived
    left_out: list[str] = field(default_factory=list)  # what the context window kept out of prompts

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor_from": self.cursor_from,
            "cursor_to": self.cursor_to,
            "entries": self.entries,
            "outcome": self.outcome,
            "facts": self.facts,
            "tool_calls": self.tool_calls,
            "commit": self.commit,
            "files_changed": [f.to_json(with_diff=False) for f in self.files_changed],
            "usage": self.usage.to_report(),
            "error": self.error,
            "notes": self.notes,
            "duration_s": round(self.duration_s, 4),
            "model_s": round(self.model_s, 4),
            "edit_protocol": self.protocol or None,
            "tool_call_dialects": dict(sorted(self.dialects.items())),
            "left_out": self.left_out,
        }


@dataclass
class DreamReport:
    workspace: str
    model: str
    status: str = STATUS_OK
    cursor_before: int = 0
    cursor_after: int = 0
    entries_processed: int = 0
    batches: list[BatchRecord] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    held: list[dict[str, Any]] = field(default_factory=list)
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    manual_edits_commit: str | None = None
    compaction: dict[str, Any] | None = None
    dry_run_changes: list[FileChange] = field(default_factory=list)
    failed_exit: int = 1  # 2 when the run was refused for bad input (a crafted tree, a merge in progress)

    @property
    def exit_code(self) -> int:
        return self.failed_exit if self.status == STATUS_FAILED else 75 if self.status == STATUS_LOCKED else 0

    def _content_changes(self) -> list[FileChange]:
        if self.dry_run_changes:
            return self.dry_run_changes
        return [f for b in self.batches if b.outcome == "committed" for f in b.files_changed]

    def to_json(self) -> dict[str, Any]:
        totals: dict[str, list[int]] = {}
        for change in self._content_changes():
            added_removed = totals.setdefault(change.path, [0, 0])
            added_removed[0] += change.added
            added_removed[1] += change.removed
        return {
            "status": self.status,
            "workspace": self.workspace,
            "version": __version__,
            "cursor_before": self.cursor_before,
            "cursor_after": self.cursor_after,
            "entries_processed": self.entries_processed,
            "batches": [b.to_json() for b in self.batches],
            "commits": list(self.commits),
            "files_changed": [{"path": p, "added": a, "removed": r} for p, (a, r) in sorted(totals.items())],
            "model": self.model,
            "usage": self.usage.to_report(),
            "changed": any(
                b.outcome == "committed" and any(layout.is_content(f.path) for f in b.files_changed)
                for b in self.batches
            ),
            "held": self.held,
            "set_aside": self.set_aside,
            "redactions": dict(sorted(self.redactions.items())),
            "diff": "".join(f.diff for f in self._content_changes()),
            "duration_s": round(self.duration_s, 3),
            "errors": self.errors,
            "notes": self.notes,
            "manual_edits_commit": self.manual_edits_commit,
            "compaction": self.compaction,
            "tool_call_dialects": _summed(b.dialects for b in self.batches),
        }


def _summed(counts: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for mapping in counts:
        for key, value in mapping.items():
            total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


class BudgetExceeded(ModelError):
    def __init__(self, message: str) -> None:
        super().__init__(message, kind="budget", retryable=False)


class MeteredModel:
    """Counts usage of every call and stops calls once a run budget is spent."""

    def __init__(self, model: ChatModel, options: DreamOptions, clock: Clock) -> None:
        self.inner = model
        self.options = options
        self.clock = clock
        self.started = clock.monotonic()
        self.usage = Usage()
        self.seconds = 0.0  # spent inside model calls (wall clock, for the outside-the-model figure)

    @property
    def name(self) -> str:
        return self.inner.name

    def exhausted(self) -> str | None:
        """Which budget is spent, or None."""
        o = self.options
        if o.max_tokens_per_run is not None and self.usage.total_tokens >= o.max_tokens_per_run:
            return f"token budget of {o.max_tokens_per_run} spent ({self.usage.total_tokens} tokens)"
        if o.max_cost_usd is not None and (self.usage.cost_usd or 0.0) >= o.max_cost_usd:
            return f"cost budget of ${o.max_cost_usd:g} spent (${self.usage.cost_usd or 0:.4f})"
        if o.max_wall_seconds is not None and self.clock.monotonic() - self.started >= o.max_wall_seconds:
            return f"time budget of {o.max_wall_seconds:g} s spent"
        return None

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        spent = self.exhausted()
        if spent:
            raise BudgetExceeded(spent)
        started = time.perf_counter()
        try:
            reply = self.inner.complete(messages, tools=tools, purpose=purpose)
        finally:
            self.seconds += time.perf_counter() - started
        self.usage = self.usage + reply.usage
        return reply


@dataclass
class DreamContext:
    """What one run needs, wired by the entrypoint."""

    root: Path
    model: ChatModel
    history: HistoryLog
    clock: Clock
    counter: TokenCounter
    options: DreamOptions
    open_git: Callable[[bool], GitStore | None]
    redactor: Redactor = field(default_factory=NoRedaction)
    log: Callable[[str], None] = lambda message: None


def builtin_guide() -> str:
    from importlib import resources

    return (resources.files("dream_memory") / "data" / "guide" / "dream.md").read_text(encoding="utf-8")


# nanobot caps a workspace prompt override at this many characters (WORKSPACE_PROMPT_MAX_CHARS),
# with the same marker: a guide that works for nanobot's Dream works the same here.
GUIDE_MAX_CHARS = 32_000
GUIDE_TRUNCATED = "\n... (truncated)"


def guide_in_use(root: Path) -> tuple[str, str]:
    """(text, source): the workspace's prompts/dream.md when it has content, else the built-in
    guide. A workspace guide longer than GUIDE_MAX_CHARS is cut there (``guide_note`` says so)."""
    custom = fsutil.read_text(root / layout.DREAM_GUIDE)
    if custom is not None and custom.strip():
        text = custom.rstrip()
        if len(text) > GUIDE_MAX_CHARS:
            return text[:GUIDE_MAX_CHARS] + GUIDE_TRUNCATED, layout.DREAM_GUIDE
        return custom, layout.DREAM_GUIDE
    return builtin_guide(), "built-in"


def guide_note(root: Path) -> str | None:
    """Why the workspace guide is not sent whole, or None."""
    custom = fsutil.read_text(root / layout.DREAM_GUIDE)
    size = len(custom.rstrip()) if custom is not None else 0
    if size <= GUIDE_MAX_CHARS:
        return None
    return (
        f"{layout.DREAM_GUIDE} has {size} characters; only the first {GUIDE_MAX_CHARS} are used "
        "(nanobot caps its Dream prompt the same way)"
    )


def run_dream(ctx: DreamContext) -> DreamReport:
    """One Dream run over ``ctx.root``. Raises LockBusy (exit 75) when another run holds the lock."""
    log, redactor = ctx.log, ctx.redactor
    ctx = replace(ctx, log=lambda message: log(_scrub(redactor, message)))
    report = DreamReport(workspace=str(ctx.root), model=ctx.model.name)
    metered = MeteredModel(ctx.model, ctx.options, ctx.clock)
    started = ctx.clock.monotonic()
    if not ctx.options.dry_run:
        ctx.root.mkdir(parents=True, exist_ok=True)
    with dream_lock(ctx.root, now=ctx.clock.now()) as stale:
        if stale is not None and stale.pid is not None:
            ctx.log(f"took over a stale Dream lock ({stale.describe()})")
        git: GitStore | None = None
        try:
            git = _prepare(ctx, report)
            _run_batches(ctx, git, metered, report)
            if not ctx.options.dry_run and report.status not in (STATUS_FAILED,):
                _compact(ctx, git, report)
        except (DreamError, OSError) as exc:
            # A disk that fills up, a repository that cannot be written: the run stops where it
            # is (the journal lets the next run finish or roll back), and the report still says so.
            _fail_run(report, exc)
        except Exception as exc:  # a bug: the report still lists the batches committed before it
            ctx.log("internal error:\n" + traceback.format_exc())
            _fail_run(report, exc)
        finally:
            if git is not None:
                git.close()
    report.usage = metered.usage
    report.duration_s = ctx.clock.monotonic() - started
    _scrub_report(report, ctx.redactor)
    return report


def _scrub(redactor: Redactor, text: str) -> str:
    """Error and note texts quote what the model sent (a refused path, a line it tried to match):
    they pass the secret guard before reaching a report, a log line, the state or a commit."""
    return redactor.redact(text)[0]


def _scrub_report(report: DreamReport, redactor: Redactor) -> None:
    report.errors = [_scrub(redactor, e) for e in report.errors]
    report.notes = [_scrub(redactor, n) for n in report.notes]
    for batch in report.batches:
        batch.error = None if batch.error is None else _scrub(redactor, batch.error)
        batch.notes = [_scrub(redactor, n) for n in batch.notes]
    for item in [*report.held, *report.set_aside]:
        item["reason"] = _scrub(redactor, str(item.get("reason", "")))


def _fail_run(report: DreamReport, exc: Exception) -> None:
    if isinstance(exc, DreamError):
        message = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    elif isinstance(exc, OSError):
        message = fsutil.os_error(exc, "write").message
    else:
        message = f"internal error ({type(exc).__name__}): {exc}"
    open_batch = next((b for b in reversed(report.batches) if not b.outcome), None)
    if open_batch is not None:
        open_batch.outcome, open_batch.error = "failed", message
        report.errors.append(f"batch {open_batch.cursor_from}..{open_batch.cursor_to}: {message}")
    else:
        report.errors.append(message)
    report.status = STATUS_FAILED
    if isinstance(exc, DreamError) and exc.exit_code == 2:
        report.failed_exit = 2


def _prepare(ctx: DreamContext, report: DreamReport) -> GitStore | None:
    """Workspace, migration, crash recovery, branch and hand edits: before any batch."""
    if ctx.options.dry_run:
        if ctx.history.legacy_pending():
            report.notes.append("memory/HISTORY.md is waiting to be migrated; a dry run does not migrate")
        return ctx.open_git(False)
    created = init_workspace(ctx.root, guide_notes=False)
    if created:
        report.notes.append("created " + ", ".join(created))
    migrated = ctx.history.migrate_legacy()
    if migrated is not None:
        report.notes.append(f"migrated {migrated.entries} entries from memory/HISTORY.md ({migrated.mode})")
    git = ctx.open_git(True)
    assert git is not None
    recovered = recover(git)
    if recovered is not None:
        report.notes.append(f"recovered an interrupted change ({recovered.action}): {recovered.subject}")
        ctx.log(f"recovered an interrupted change ({recovered.action}): {recovered.subject}")
    if ctx.options.branch and git.checkout_branch(ctx.options.branch):
        report.notes.append(f"created branch {ctx.options.branch}")
    report.manual_edits_commit = commit_manual_edits(git)
    if (cut := guide_note(ctx.root)) is not None:
        report.notes.append(cut)
    return git


def _read_state(root: Path) -> DreamState:
    return DreamState.from_json(fsutil.read_text(root / layout.DREAM_STATE))


def _run_batches(ctx: DreamContext, git: GitStore | None, model: MeteredModel, report: DreamReport) -> None:
    state = _read_state(ctx.root)
    for warning in state.warnings:
        report.notes.append(warning)
    cursor = _trusted_cursor(ctx, git, report)
    report.cursor_before = report.cursor_after = cursor
    entries = ctx.history.entries_after(cursor)
    batches = plan_batches(
        entries,
        max_entries=ctx.options.batch_size,
        max_tokens=ctx.options.batch_tokens,
        count_tokens=ctx.counter.count,
    )
    if not batches:
        report.status = STATUS_NOTHING
        return
    report.status = STATUS_DRY_RUN if ctx.options.dry_run else STATUS_OK
    shared_staging = _new_staging(ctx) if ctx.options.dry_run else None
    protocols = _Protocols(ctx.options.edit_protocol)
    for number, planned in enumerate(batches):
        if ctx.options.max_batches is not None and number >= ctx.options.max_batches:
            report.notes.append(f"stopped after {number} batch(es) (--max-batches); {len(batches) - number} left")
            break
        spent = model.exhausted()
        if spent:
            report.status = STATUS_BUDGET
            report.notes.append(f"stopped before batch {planned.cursor_from}..{planned.cursor_to}: {spent}")
            break
        staging = shared_staging or _new_staging(ctx)
        batch = _guarded(ctx, planned, report)
        record = BatchRecord(batch.cursor_from, batch.cursor_to, len(batch.entries))
        report.batches.append(record)
        before_usage = model.usage
        batch_started, model_before = time.perf_counter(), model.seconds

        def timed(record: BatchRecord = record, started: float = batch_started, before: float = model_before) -> None:
            record.duration_s = time.perf_counter() - started
            record.model_s = model.seconds - before
            # Notes may quote the model (rejected lines, a cut-off line): secrets never pass.
            record.notes = [ctx.redactor.redact(note)[0] for note in record.notes]

        try:
            _dream_batch(ctx, model, batch, staging, record, protocols)
        except BudgetExceeded as exc:
            record.usage = _usage_since(model.usage, before_usage)
            record.outcome, record.error = "failed", str(exc)
            report.status = STATUS_BUDGET
            report.notes.append(f"stopped in batch {batch.cursor_from}..{batch.cursor_to}: {exc}; it will run again")
            timed()
            break
        except BadReply as exc:
            record.usage = _usage_since(model.usage, before_usage)
            timed()
            state = _content_failure(ctx, git, batch, record, report, state, exc)
            if record.outcome == "failed":
                break
            continue
        except ModelError as exc:
            record.usage = _usage_since(model.usage, before_usage)
            record.outcome, record.error = "failed", f"{exc.kind}: {exc}"
            report.status = STATUS_FAILED
            report.errors.append(f"batch {batch.cursor_from}..{batch.cursor_to}: {exc.kind}: {exc.message}")
            timed()
            break
        record.usage = _usage_since(model.usage, before_usage)
        for kind, count in staging.redactions.items():
            report.redactions[kind] = report.redactions.get(kind, 0) + count
        staging.redactions.clear()
        for path, reason in staging.unreadable.items():
            note = f"{path} was left alone: {reason}"
            if note not in report.notes:
                report.notes.append(note)
        if ctx.options.dry_run:
            record.outcome = "dry_run"
            record.files_changed = [unified_diff(p, _b(b), _b(a)) for p, (b, a) in staging.changes().items()]
            report.entries_processed += record.entries
            timed()
            continue
        assert git is not None
        state = _land_batch(ctx, git, batch, staging, record, report, state, model.name)
        report.cursor_after = batch.cursor_to
        report.entries_processed += record.entries
        timed()
    if ctx.options.dry_run and shared_staging is not None:
        report.dry_run_changes = [unified_diff(p, _b(b), _b(a)) for p, (b, a) in shared_staging.changes().items()]
    if report.set_aside and report.status in (STATUS_OK, STATUS_HELD, STATUS_BUDGET):
        report.status = STATUS_SET_ASIDE
    elif report.held and report.status == STATUS_OK:
        report.status = STATUS_HELD


def _guarded(ctx: DreamContext, batch: Batch, report: DreamReport) -> Batch:
    """The batch as the model may see it: each entry through the secret guard.

    Lines an agent writes into history.jsonl itself pass no guard on the way in, and a model may
    file one line of an entry as a fact of its own: one line of a private key's block is a lone
    run of base64 that the guard on Dream's writes cannot recognise. Whatever the guard
    recognises in the whole entry is gone before any model sees it, so no piece of it comes back.
    """
    entries: list[HistoryEntry] = []
    for entry in batch.entries:
        clean, counts = ctx.redactor.redact(entry.content)
        for kind, count in counts.items():
            report.redactions[kind] = report.redactions.get(kind, 0) + count
        entries.append(entry if clean == entry.content else replace(entry, content=clean))
    if all(new is old for new, old in zip(entries, batch.entries, strict=True)):
        return batch
    # Recounted: a marker can be longer than the secret it replaced.
    return plan_batches(entries, max_entries=len(entries), max_tokens=sys.maxsize, count_tokens=ctx.counter.count)[0]


def _b(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _usage_since(now: Usage, before: Usage) -> Usage:
    cost = None if now.cost_usd is None or before.cost_usd is None else now.cost_usd - before.cost_usd
    return Usage(
        now.prompt_tokens - before.prompt_tokens,
        now.completion_tokens - before.completion_tokens,
        cost,
        now.calls - before.calls,
    )


def _new_staging(ctx: DreamContext) -> StagingWorkspace:
    return StagingWorkspace(
        ctx.root,
        count_tokens=ctx.counter.count,
        file_budget_tokens=ctx.options.file_context_tokens,
        redactor=ctx.redactor,
    )


# --- the two phases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Budget:
    """What one prompt may hold: per file shown, and for the history (tokens, our counter)."""

    file_tokens: int
    history_tokens: int
    window: int | None = None


# The server counts with the model's own tokenizer, ours is an estimate of it: keep a margin.
_WINDOW_MARGIN = 0.85


def _budget(ctx: DreamContext, system: str) -> _Budget:
    """The prompt's budgets: the configured ones, tightened to fit the preset's contextWindow."""
    o = ctx.options
    if o.context_window is None:
        return _Budget(o.file_context_tokens, o.batch_tokens)
    reply = min(o.reply_tokens, o.context_window // 4)
    room = int((o.context_window - reply) * _WINDOW_MARGIN) - ctx.counter.count(system) - 200
    if room < 400:
        raise ConfigError(
            f"contextWindow {o.context_window} is too small for Dream's prompt: the system part alone "
            f"is about {ctx.counter.count(system)} tokens and {reply} are kept for the answer",
            hint="raise the preset's contextWindow, lower its maxTokens, or shorten prompts/dream.md",
        )
    files = max(100, min(o.file_context_tokens, int(room * 0.45) // 3))
    return _Budget(files, max(200, min(o.batch_tokens, room - 3 * files)), o.context_window)


def _file_context(
    ctx: DreamContext,
    staging: StagingWorkspace,
    path: str,
    query: Sequence[str],
    budget: int | None = None,
    left_out: list[str] | None = None,
) -> FileContext:
    """A file as the model sees it: whole, or (when over budget) outline plus relevant sections."""
    try:
        text = staging.read(path)
    except EditRejected as exc:  # not UTF-8, a folder, a symlink: shown as such, never read
        staging.unreadable[path] = exc.message
        return FileContext(path, None, "", unreadable=exc.message)
    if text is None:
        return FileContext(path, None, "")
    budget = ctx.options.file_context_tokens if budget is None else budget
    size = ctx.counter.count(text)
    if size <= budget:
        return FileContext(path, text, text)
    shape = outline(text)
    if ctx.counter.count(shape) > budget:
        # Not even the outline fits: the model is told the file exists and can read sections.
        if left_out is not None:
            left_out.append(f"{path}: left out ({size} tokens; not even its outline fits)")
        return FileContext(path, text, f"(left out: {size} tokens, too large for this prompt)", partial=True)
    parts = [f"Outline of {path}:", shape, "", "Relevant sections:"]
    # The read side's ranking picks the sections; the budget decides how many fit.
    room = budget // 2
    shown = 0
    for section in relevant_sections(text, " ".join(query)):
        cost = ctx.counter.count(section.text)
        if cost <= room:
            parts.append(section.text.rstrip())
            room -= cost
            shown += 1
    if left_out is not None:
        left_out.append(f"{path}: outline and {shown} relevant section(s) of {size} tokens")
    return FileContext(path, text, "\n".join(parts), partial=True)


def _history_blocks(ctx: DreamContext, batch: Batch, budget: int | None = None) -> list[list[str]]:
    """The batch as prompt blocks, one list per phase-1 call: entries grouped so each call's
    history fits ``budget``; an entry too large for one prompt is given in parts (never cut),
    each part in its own call."""
    limit = ctx.options.batch_tokens if budget is None else budget
    if batch.tokens <= limit:
        return [[render_entry(entry) for entry in batch.entries]]
    blocks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for entry in batch.entries:
        rendered = render_entry(entry)
        cost = ctx.counter.count(rendered)
        if cost > limit:
            if current:
                blocks.append(current)
                current, used = [], 0
            parts = split_text(entry.content, max(50, limit - 40), ctx.counter.count)
            blocks += [[render_entry(entry, (i, len(parts)), part)] for i, part in enumerate(parts, start=1)]
            continue
        if current and used + cost > limit:
            blocks.append(current)
            current, used = [], 0
        current.append(rendered)
        used += cost
    if current:
        blocks.append(current)
    return blocks


def _skills_listing(root: Path) -> list[str]:
    skills = []
    folder = root / layout.SKILLS_DIR
    if folder.is_dir():
        for skill in sorted(folder.glob("*/SKILL.md")):
            description = skill_description(fsutil.read_text(skill))  # YAML, as nanobot reads it
            skills.append(f"{skill.parent.name}: {description or '(no description)'}")
    return skills


def _entities_listing(root: Path) -> list[str]:
    folder = root / layout.ENTITIES_DIR
    return (
        sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.md"))
        if folder.is_dir()
        else []
    )


def _phase1(ctx: DreamContext, model: ChatModel, batch: Batch, staging: StagingWorkspace, record: BatchRecord) -> Facts:
    guide, _ = guide_in_use(ctx.root)
    budget = _budget(ctx, guide + PHASE1_PROTOCOL)
    query = query_terms("\n".join(e.content for e in batch.entries), limit=16)
    left_out: list[str] = []
    files = [_file_context(ctx, staging, path, query, budget.file_tokens, left_out) for path in layout.DURABLE_FILES]
    collected: list[Facts] = []
    blocks = _history_blocks(ctx, batch, budget.history_tokens)
    if budget.window is not None:
        if len(blocks) > 1:
            left_out.append(f"history: given in {len(blocks)} parts, one call each")
        record.left_out += [f"contextWindow {budget.window}, analysis: {item}" for item in left_out]
    for history in blocks:
        messages = phase1_messages(
            guide, files, history, skills=_skills_listing(ctx.root), entities=_entities_listing(ctx.root)
        )
        collected.append(_ask_for_facts(model, messages, record.notes))
        # Counted as they arrive: a batch that fails later still reports what phase 1 found.
        record.facts = len({f for result in collected for f in result.facts})
    facts = tuple(dict.fromkeys(f for result in collected for f in result.facts))
    rejected = [line for result in collected for line in result.rejected]
    if rejected:
        record.notes.append(f"not facts, left out: {'; '.join(rejected[:5])}")
    return Facts(facts, skip=not facts)


def _whole_lines(reply: ChatReply, notes: list[str]) -> ChatReply:
    """A phase-1 reply cut off by the token limit keeps its complete lines: each is a fact on its
    own, and only the last one can be cut (small models ramble until the limit). A reply with no
    complete line stays cut off, and fails as such."""
    text = reply.content or ""
    if reply.finish_reason != "length" or reply.tool_calls or "\n" not in text.strip():
        return reply
    kept, _, cut = text.rstrip().rpartition("\n")
    notes.append(f"the analysis reply was cut off by the token limit; its last line was left out: {_excerpt(cut, 120)}")
    return ChatReply(content=kept, finish_reason="stop", usage=reply.usage)


def _ask_for_facts(model: ChatModel, messages: list[Message], notes: list[str]) -> Facts:
    """One phase-1 call; an unusable reply gets exactly one corrective retry."""
    reply = _whole_lines(model.complete(messages, purpose="dream.phase1"), notes)
    try:
        check_reply(reply, tools_offered=False)
        return parse_facts(reply.content or "", examples=PHASE1_EXAMPLES)
    except BadReply as first:
        retry = [*messages, {"role": "assistant", "content": reply.content or ""}, phase1_correction(first.message)]
        second = _whole_lines(model.complete(retry, purpose="dream.phase1.retry"), notes)
        check_reply(second, tools_offered=False)
        try:
            return parse_facts(second.content or "", examples=PHASE1_EXAMPLES)
        except BadReply as exc:
            raise ModelSaid(
                f"the analysis reply could not be read, even after a corrective retry: {exc.message}",
                [_excerpt(second.content)],
            ) from exc


def _excerpt(text: str | None, limit: int = _EXCERPT_CHARS) -> str:
    """A model reply fit for a report: one line, cut, quoted (secrets are redacted by the caller)."""
    flat = " ".join((text or "").split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


class _Protocols:
    """Which edit protocol a batch starts with. ``auto`` starts with tools and, once a reply
    came back with no tool call in any form, starts later batches of the run with text."""

    def __init__(self, configured: str) -> None:
        self.configured = configured
        self.start = "tools" if configured == "auto" else configured

    def fell_back(self, protocol: str) -> None:
        if self.configured == "auto":
            self.start = protocol


def _dream_batch(
    ctx: DreamContext,
    model: ChatModel,
    batch: Batch,
    staging: StagingWorkspace,
    record: BatchRecord,
    protocols: _Protocols,
) -> None:
    """Both phases for one batch, into ``staging``; ``record`` is filled in as they go.

    Raises BadReply (a content failure) when phase 1 found facts and phase 2 applied none while
    some fact is not in memory yet: a batch that did not do its work is never "nothing new".
    """
    facts = _phase1(ctx, model, batch, staging, record)
    if facts.nothing_to_add:
        return
    today = format_timestamp(ctx.clock.now())[:10]
    targets = list(dict.fromkeys(f.target for f in facts.facts))
    if any(f.tag == "ENTITY" for f in facts.facts):
        targets.append(layout.INDEX)
    executor = TargetedExecutor(staging, targets, lambda path: _target_hint(path, facts.facts))
    protocol = protocols.start
    why: list[str] = []
    said: list[str] = []
    while True:
        record.protocol = protocol
        try:
            loop = _phase2(ctx, model, protocol, facts, targets, staging, executor, today, record)
        except BadReply as exc:
            if ctx.options.edit_protocol != "auto" or protocol == "facts":
                raise
            # An empty or cut-off edit reply (Qwen behind its own template answered nothing) is
            # one more way of not editing: auto moves on instead of failing the batch.
            loop = LoopResult(tool_less=True, errors=[exc.message])
            loop.replies.append(f"({exc.message})")
        for dialect, n in loop.dialects.items():
            record.dialects[dialect] = record.dialects.get(dialect, 0) + n
        record.tool_calls += loop.tool_calls
        if loop.stop != "done":
            record.notes.append(f"{protocol} edits stopped: {loop.stop} after {loop.tool_calls} call(s)")
        if staging.changes():
            break
        reason, quote = _why_nothing(protocol, loop, ctx.redactor)
        why.append(reason)
        said.append(f"{protocol}: {quote}" if quote else "")
        following = _fallback(ctx.options.edit_protocol, protocol, loop)
        if following is None:
            break
        quoted = f"; it answered {said[-1].partition(': ')[2]}" if said[-1] else ""
        record.notes.append(f"{protocol} protocol applied nothing ({why[-1]}{quoted}); falling back to {following}")
        if protocol == "tools" and following == "text":
            protocols.fell_back("text")
        protocol = following
    pending = place_facts(facts.facts, staging.read, today)
    if not staging.changes():
        if not pending:
            record.notes.append("every fact is already in memory")
            return
        raise ModelSaid(
            f"phase 1 found {len(facts.facts)} fact(s) but phase 2 applied none: " + "; then ".join(why),
            said,
            hint="try editProtocol 'auto' or 'facts' for a model that cannot edit (docs/configuration.md)",
        )
    left = sorted({f.target for f in facts.facts if f.target in pending})
    if left and protocol != "facts":
        record.notes.append(
            f"facts for {', '.join(left)} may not all be applied (the placement rules would still add some)"
        )


def _fallback(configured: str, protocol: str, loop: LoopResult) -> str | None:
    """``auto``'s next protocol after one that applied nothing: text after a tool-less reply,
    the placement rules after anything else."""
    if configured != "auto" or protocol == "facts":
        return None
    if protocol == "tools" and loop.tool_less:
        return "text"
    return "facts"


class ModelSaid(BadReply):
    """A content failure whose report quotes the model. The quote goes to the report only: the
    state file and commit messages keep the reason alone (a reply is untrusted text)."""

    def __init__(self, message: str, said: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.said = [s for s in said if s]


def _why_nothing(protocol: str, loop: LoopResult, redactor: Redactor) -> tuple[str, str]:
    """Why a protocol applied nothing, and what the model last said (quoted, cut, redacted)."""
    said = redactor.redact(_excerpt(loop.replies[-1]))[0] if loop.replies else ""
    if protocol == "facts":
        return "the placement rules changed nothing: " + (loop.errors[-1] if loop.errors else "no change"), ""
    if loop.tool_calls == 0:
        what = "no tool call" if protocol == "tools" else "no SEARCH/REPLACE block"
        return f"{protocol}: the model answered with {what}", said
    if loop.edits_rejected and not loop.edits_applied:
        last = redactor.redact(loop.errors[-1] if loop.errors else "no detail")[0]
        return f"{protocol}: every edit was refused ({loop.edits_rejected}); last: {last}", said
    if loop.stop != "done":
        return f"{protocol}: the edit loop ended ({loop.stop}) after {loop.tool_calls} call(s) with no valid edit", said
    return f"{protocol}: {loop.tool_calls} call(s) changed nothing", said


def _target_hint(path: str, facts: Sequence[Fact]) -> str:
    targets = list(dict.fromkeys(f.target for f in facts))
    if len(targets) == 1:
        return f"Put the facts in {targets[0]}."
    return "Each fact goes to the file it is listed under: " + ", ".join(targets) + "."


def _phase2(
    ctx: DreamContext,
    model: ChatModel,
    protocol: str,
    facts: Facts,
    targets: list[str],
    staging: StagingWorkspace,
    executor: TargetedExecutor,
    today: str,
    record: BatchRecord,
) -> LoopResult:
    if protocol == "facts":
        return place_with_rules(facts.facts, executor, staging.read, today)
    system = PHASE2_TEXT_SYSTEM if protocol == "text" else PHASE2_SYSTEM
    budget = _budget(ctx, system)
    query = query_terms("\n".join(f.text for f in facts.facts), limit=16)
    left_out: list[str] = []
    contexts = [_file_context(ctx, staging, path, query, budget.file_tokens, left_out) for path in targets]
    if budget.window is not None:
        record.left_out += [f"contextWindow {budget.window}, edits: {item}" for item in left_out]
    messages = phase2_messages(facts.facts, contexts, today, system=system)
    if protocol == "text":
        single = targets[0] if len(targets) == 1 else None
        return run_text_loop(
            model,
            messages,
            executor,
            max_edits=ctx.options.max_iterations,
            default_path=single,
            read=staging.read,
            refuse=(TEXT_EXAMPLE_LINE,),
        )
    return run_agent_loop(model, messages, dream_tools(), executor, max_tool_calls=ctx.options.max_iterations)


# --- landing a batch ------------------------------------------------------------------------------


def _carried(ctx: DreamContext, git: GitStore) -> dict[str, bytes | None]:
    """In an enclosing repository: memory/ files it already tracks ride along with Dream's commit."""
    if not git.enclosing:
        return {}
    paths = set(git.tracked_in_head(layout.CARRIED_PATTERNS))
    if any(p.startswith(layout.ARCHIVE_DIR + "/") for p in paths):
        archive = ctx.root / layout.ARCHIVE_DIR
        paths |= {p.relative_to(ctx.root).as_posix() for p in archive.glob("history-*.jsonl")}
    carried: dict[str, bytes | None] = {}
    with ctx.history.lock():  # a consistent snapshot while appenders may be writing
        for rel in sorted(paths):
            path = ctx.root / rel
            carried[rel] = path.read_bytes() if path.is_file() else None
    return carried


def _commit_message(subject: str, batch: Batch, changes: Sequence[FileChange], record: BatchRecord, model: str) -> str:
    lines = [subject, ""]
    if changes:
        width = max(len(c.path) for c in changes)
        lines += [f"  {c.path.ljust(width)}  +{c.added} -{c.removed}" for c in changes]
        lines.append("")
    lines.append(f"Entries: {record.entries}, facts: {record.facts}, tool calls: {record.tool_calls}")
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


def _land_batch(
    ctx: DreamContext,
    git: GitStore,
    batch: Batch,
    staging: StagingWorkspace,
    record: BatchRecord,
    report: DreamReport,
    state: DreamState,
    model_name: str,
) -> DreamState:
    changes = staging.changes()
    state = state.clear_failure()
    diffs = [unified_diff(p, _b(b), _b(a)) for p, (b, a) in changes.items()]
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
    message = _commit_message(subject, batch, diffs if record.outcome == "committed" else [], record, model_name)
    record.commit = apply_commit(git, files, _scrub(ctx.redactor, message))
    if record.commit:
        report.commits.append(record.commit)
    return state


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


def _content_failure(
    ctx: DreamContext,
    git: GitStore | None,
    batch: Batch,
    record: BatchRecord,
    report: DreamReport,
    state: DreamState,
    exc: BadReply,
) -> DreamState:
    """Count a content failure against the batch; the third in a row sets it aside."""
    message = _scrub(ctx.redactor, exc.message)  # it reaches the state and a commit message
    # What the model said goes to the report (redacted), never to the state file or a commit.
    quote = "; ".join(exc.said) if isinstance(exc, ModelSaid) else ""
    shown = message + (f"; the model answered: {_scrub(ctx.redactor, quote)}" if quote else "")
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


def _trusted_cursor(ctx: DreamContext, git: GitStore | None, report: DreamReport) -> int:
    """The committed cursor, not a file another program moved (app/cursor.py, issue 15)."""
    from dream_memory.app.cursor import dream_cursor_check

    check = dream_cursor_check(ctx.history, git, follow_external=ctx.options.follow_external_cursor)
    if check.trouble:
        report.notes.append(check.reason)
        ctx.log(check.reason)
    return check.value


def _compact(ctx: DreamContext, git: GitStore | None, report: DreamReport) -> None:
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
