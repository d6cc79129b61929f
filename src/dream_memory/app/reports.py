"""The JSON shapes of the reports `dream run`, `dream consolidate` and `dream eval` print: the
typed side of their ``to_json()``, and the source of `docs/reference/report.schema.json`
(`scripts/gen_report_schema.py`).

A key the report classes add, drop or rename must change here too: the schema is generated from
these types with no extra keys allowed, and tests/reference validates real reports against it,
so the two cannot drift apart without a failing test. Each field's docstring is its description
in the schema. No ``from __future__ import annotations``: on Python 3.11 it hides NotRequired
from ``__required_keys__``.
"""

from typing import Literal, NotRequired, TypedDict

DreamStatus = Literal[
    "ok", "nothing_to_do", "dry_run", "failed", "locked", "held", "budget_exhausted", "set_aside", "interrupted"
]
BatchOutcome = Literal["committed", "nothing_new", "held", "set_aside", "failed", "dry_run", "interrupted"]
ConsolidateStatus = Literal["ok", "nothing_to_do", "dry_run", "failed", "locked", "interrupted"]
SessionOutcome = Literal["consolidated", "skipped", "would_consolidate", "failed", "not_attempted", "interrupted"]


class UsageJSON(TypedDict):
    """What the model calls of a run (or a batch) cost."""

    prompt_tokens: int
    """Tokens sent, as the endpoint reported them (counted locally when it reports none)."""
    completion_tokens: int
    """Tokens received."""
    total_tokens: int
    """prompt_tokens + completion_tokens."""
    cost_usd: float | None
    """Cost in US dollars; null when any call had no known price (a local model, say)."""
    llm_calls: int
    """Chat-completion calls made, retries of one call counted once."""


class FileTotalJSON(TypedDict):
    """One content file a run changed, its lines summed over the run's committed batches."""

    path: str
    """Workspace-relative POSIX path."""
    added: int
    """Lines added."""
    removed: int
    """Lines removed."""


class FileChangeJSON(TypedDict):
    """One file a batch changed."""

    path: str
    """Workspace-relative POSIX path."""
    status: Literal["added", "modified", "deleted"]
    """What happened to the file."""
    added: int
    """Lines added (0 for a binary file)."""
    removed: int
    """Lines removed (0 for a binary file)."""


class FactLineJSON(TypedDict):
    """A line a fact produced, as the batch left the file."""

    path: str
    line: int
    """1-based, in the file as the batch wrote it."""
    text: str


class FactJSON(TypedDict):
    """A fact phase 1 found, with the history entries it comes from."""

    id: int
    """Its number in the batch (phase 2's `facts` argument names it)."""
    tag: str
    name: str | None
    """The skill's or entity's name; null for other tags."""
    text: str
    target: str
    """The file it goes to."""
    sources: list[int]
    """The cursors of the batch's entries it cites."""
    source: Literal["cited", "unknown"]
    """unknown: it cites no entry of its batch (it is kept all the same)."""
    cited_outside_batch: list[int]
    """Cursors it cited that are not in its batch (not sources)."""
    lines: list[FactLineJSON]
    """The lines of memory it produced."""


class UnmatchedLineJSON(TypedDict):
    """A line the batch added that no fact of it matches."""

    path: str
    line: int
    text: str
    facts: list[int]


class RemovedLineJSON(TypedDict):
    """A line the batch removed or replaced, and why."""

    path: str
    text: str
    facts: list[int]
    """The facts that asked for it (empty: no fact of the batch did)."""
    replaced_by: str | None
    """The line that took its place; null for a removal."""
    reason: str
    """The facts that asked for it, as tagged lines."""


class CitedEntryJSON(TypedDict):
    """A history entry the batch's facts cite, as it was read."""

    cursor: int
    timestamp: str
    session_key: str | None
    content: str


class ProvenanceJSON(TypedDict):
    """Where the batch's lines come from (docs/provenance.md)."""

    facts: list[FactJSON]
    facts_unsourced: int
    """Facts kept with an unknown source (no citation, or only cursors outside the batch)."""
    lines_without_fact: list[UnmatchedLineJSON]
    entries: list[CitedEntryJSON]
    """The entries the facts cite (their evidence), in cursor order."""
    removed: list[RemovedLineJSON]


class PendingJSON(TypedDict):
    """Entries that ran in a batch set aside but were not set aside with it: they joined the batch
    after its first failure, stay pending, and the next run dreams them."""

    cursor_from: int
    """Cursor of the first entry left pending."""
    cursor_to: int
    """Cursor of the last entry left pending."""
    entries: int
    """Entries left pending."""


class BatchJSON(TypedDict):
    """One batch of history entries and how it ended."""

    cursor_from: int
    """Cursor of the batch's first entry."""
    cursor_to: int
    """Cursor of the batch's last entry; for a batch set aside, of the last entry set aside."""
    entries: int
    """Entries in the batch; for a batch set aside, the entries set aside."""
    outcome: BatchOutcome
    """How the batch ended (docs/reference/report.md#how-a-batch-ends)."""
    facts: int
    """Facts phase 1 found."""
    tool_calls: int
    """Edit calls phase 2 made, refused ones included."""
    commit: str | None
    """The batch's commit (40 hex), or null (failed, dry run)."""
    files_changed: list[FileChangeJSON]
    """Every file the batch's commit (or dry run) changed, Dream's own files included."""
    usage: UsageJSON
    """The batch's share of the run's usage."""
    error: str | None
    """Why the batch failed, or null."""
    notes: list[str]
    """Things worth knowing that are not failures (a cap reached, a protocol fallback)."""
    duration_s: float
    """Wall time of the batch."""
    model_s: float
    """Of which in model calls, the request path included (building the request, HTTP, parsing the reply)."""
    edit_protocol: Literal["tools", "text", "facts"] | None
    """The edit protocol that ran last for the batch; null when phase 2 did not run."""
    tool_call_dialects: dict[str, int]
    """Tool calls by how they arrived: native, hermes, functions, fenced, bare, text (SEARCH/REPLACE
    blocks), whole (a whole-file answer), rules (placed by the facts protocol)."""
    left_out: list[str]
    """What the model's context window kept out of the prompts."""
    scope: str
    """The scope of every entry of the batch (docs/scopes.md): "shared", or a private scope such
    as "user:alice" whose facts go to scopes/user/alice/; "shared" when no scope rule is set."""
    scope_refusals: int
    """Edits refused because they named another scope's file (a private fact aimed at a shared
    file, or the reverse); each refusal told the model where the fact may go."""
    provenance: ProvenanceJSON | None
    """The batch's facts with their sources, the lines they produced, and what was removed and why;
    null when phase 1 found no fact."""
    left_pending: PendingJSON | None
    """For a batch set aside of which only the front failed three runs in a row: the entries after
    it, which stay pending (not in cursor_from..cursor_to); null otherwise."""


class HeldJSON(TypedDict):
    """A change held for review (memory/.dream_held/<id>/change.json): one hunk of one file."""

    id: str
    """The id for `dream review show|accept|reject` (and `dream restore --apply-held` /
    `--discard-held`): <cursor_from>-<cursor_to>.<n>."""
    path: str
    """The file it changes."""
    lines: list[int]
    """[first, last]: the 1-based line range it changes in the text it started from."""
    cursor_from: int
    """First cursor of the batch that made it."""
    cursor_to: int
    """Last cursor of the batch that made it."""
    reason: str
    """Why it waits: whose line it replaces or removes, or which guard held it."""


class SetAsideJSON(TypedDict):
    """A range set aside after failing on its content three runs in a row: the batch, or its
    front when entries joined the batch after its first failure (those stay pending)."""

    cursor_from: int
    """First cursor of the range set aside."""
    cursor_to: int
    """Last cursor of the range set aside."""
    reason: str
    """The failures that set it aside."""


class CompactionJSON(TypedDict):
    """What compaction moved from memory/history.jsonl into memory/archive/."""

    archived: int
    """Entries moved."""
    archive_files: list[str]
    """Archive files written (workspace-relative)."""
    commit: str | None
    """The compaction's own commit in an enclosing repository that tracks history, else null."""


class DreamRunJSON(TypedDict):
    """The report of `dream run` (stdout, and --report FILE)."""

    status: DreamStatus
    """How the run ended (docs/reference/report.md#statuses)."""
    workspace: str
    """Absolute path of the workspace."""
    version: str
    """dream-memory's version."""
    cursor_before: int
    """Dream's cursor at the start."""
    cursor_after: int
    """Dream's cursor at the end."""
    entries_processed: int
    """Entries of the batches that ended (committed, nothing new, held, set aside, dry run)."""
    batches: list[BatchJSON]
    """Every batch started, in order."""
    commits: list[str]
    """This run's batch commits (40 hex), oldest first; not manual_edits_commit, not compaction."""
    files_changed: list[FileTotalJSON]
    """Content files changed by committed batches (or the dry run), sorted by path."""
    model: str
    """The model that ran ("offline" for the built-in engine)."""
    usage: UsageJSON
    """Summed over the run."""
    changed: bool
    """A committed batch changed a content file (not only the cursor or state)."""
    held: list[HeldJSON]
    """Changes this run held for `dream review`; the rest of their batches landed."""
    set_aside: list[SetAsideJSON]
    """Batches this run set aside."""
    redactions: dict[str, int]
    """Secrets replaced before they reached a file, by kind (never the values)."""
    diff: str
    """Unified diff of the content changes (the would-be diff for a dry run)."""
    duration_s: float
    """Wall time of the run."""
    errors: list[str]
    """What failed (the content failure of a batch set aside included); empty for a clean run."""
    notes: list[str]
    """What else happened (created files, migration, recovery, a budget stop)."""
    manual_edits_commit: str | None
    """The `memory: manual edits` commit made before the first batch, or null."""
    compaction: CompactionJSON | None
    """The history compaction after the run, or null when nothing moved."""
    tool_call_dialects: dict[str, int]
    """Tool calls of every batch by how they arrived."""
    scope_refusals: int
    """Cross-scope edits refused in every batch (the sum of the batches' scope_refusals)."""


class LinesJSON(TypedDict):
    """Physical line numbers of a session file (1-based)."""

    first: int
    last: int


class MalformedLineJSON(TypedDict):
    """A session line that could not be read (skipped, never removed)."""

    line: int
    """Physical line number."""
    detail: str
    """What is wrong with it."""


class SessionJSON(TypedDict):
    """One session file of `dream consolidate`."""

    path: str
    """The session file, relative to the workspace (absolute outside it)."""
    key: str
    """The session key."""
    outcome: SessionOutcome
    """What happened to it."""
    reason: str
    """Why (below the budget, no messages, ...)."""
    messages_archived: int
    """Messages summarized into history."""
    entries: list[int]
    """Cursors of the history entries written."""
    raw_fallback: bool
    """The summary failed and the messages were archived as raw text."""
    tokens_before: int
    """Unconsolidated tokens before."""
    tokens_after: int
    """Unconsolidated tokens after."""
    lines: LinesJSON | None
    """The slice's physical lines, or null."""
    llm_calls: int
    """Model calls for this session."""
    last_consolidated: int | None
    """Messages consolidated so far (the value --update-sessions writes), or null."""
    session_file: str | None
    """What --update-sessions did to the session file, or null."""
    malformed_lines: list[MalformedLineJSON]
    """Lines skipped."""
    notes: list[str]
    """What else happened."""
    error: str | None
    """Why the session failed, or null."""


class RecoveredJSON(TypedDict):
    """A slice an interrupted run had begun appending, finished without calling the model."""

    path: str
    """The session file."""
    key: str
    """The session key."""
    planned: int
    """Entries the slice was to append."""
    outcome: Literal["finished", "failed"]
    """Whether it was finished."""
    error: NotRequired[str]
    """Why it could not be finished (outcome failed only)."""
    already_present: NotRequired[list[int]]
    """Cursors of the slice's entries already in history (outcome finished only)."""
    entries: NotRequired[list[int]]
    """Cursors of all the slice's entries (outcome finished only)."""
    appended: NotRequired[list[int]]
    """Cursors appended now (outcome finished only)."""
    messages_archived: NotRequired[int]
    """Messages the slice archived (outcome finished only)."""
    raw_fallback: NotRequired[bool]
    """The slice was raw text (outcome finished only)."""


class ConsolidateJSON(TypedDict):
    """The report of `dream consolidate` (stdout)."""

    status: ConsolidateStatus
    """How the run ended (docs/reference/report.md#consolidate)."""
    workspace: str
    """Absolute path of the workspace."""
    version: str
    """dream-memory's version."""
    model: str
    """The model that ran."""
    budget_tokens: int
    """The token budget a session's unconsolidated messages may reach."""
    budget_source: str
    """Where the budget came from (--budget, the config key, or the context window)."""
    force: bool
    """--force was given."""
    dry_run: bool
    """--dry-run was given."""
    sessions: list[SessionJSON]
    """Every session looked at, in order."""
    recovered: list[RecoveredJSON]
    """Interrupted slices finished first."""
    sources: list[str]
    """Where --all looked for sessions."""
    usage: UsageJSON
    """Summed over the run."""
    redactions: dict[str, int]
    """Secrets replaced, by kind."""
    warnings: list[str]
    """Problems that did not stop the run."""
    errors: list[str]
    """What failed."""
    notes: list[str]
    """What else a person should know: where a signal stopped the run."""
    stopped_by: int | None
    """The signal that stopped the run (status interrupted), else null."""
    duration_s: float
    """Wall time of the run."""


class ScoreJSON(TypedDict):
    """Items passed out of items checked."""

    passed: int
    total: int
    share: float
    """passed / total, rounded to 4 digits (0.0 when total is 0)."""


class CheckJSON(TypedDict):
    """One kind of check of a scenario."""

    check: str
    title: str
    passed: int
    total: int


class ItemJSON(TypedDict):
    """One thing checked."""

    check: str
    """The kind of check."""
    subject: str
    """What was checked (a fact, a file, a secret)."""
    passed: bool
    detail: str
    """Where it was found, or why it failed."""


class EvalRunJSON(TypedDict):
    """One consolidate or Dream run of a scenario's day."""

    date: str
    step: Literal["consolidate", "dream"]
    status: str
    """The run's report status."""
    detail: str
    tokens: int
    commits: int
    errors: list[str]


class ScenarioJSON(TypedDict):
    """One scenario of `dream eval`."""

    name: str
    title: str
    threshold: float
    """Share of items to pass."""
    required: list[str]
    """Checks that must pass in full."""
    passed: bool
    """The threshold is met and every required check passed."""
    score: ScoreJSON
    baseline: ScoreJSON
    """What a model that stores nothing scores."""
    above_baseline: int
    """Items passed beyond the baseline."""
    checks: list[CheckJSON]
    failed_required: list[str]
    items: list[ItemJSON]
    runs: list[EvalRunJSON]
    tokens: int
    workspace: str | None
    """The scenario's workspace with --keep, else null."""
    duration_s: float


class EvalJSON(TypedDict):
    """The report of `dream eval --json`."""

    status: Literal["ok", "failed", "interrupted"]
    model: str
    passed: bool
    """Every scenario passed (exit 0)."""
    score: ScoreJSON
    baseline: ScoreJSON
    scenarios: list[ScenarioJSON]
    tokens: int
    stopped_by: int | None
    """The signal that stopped it (status interrupted), else null."""
    interrupted: str | None
    """The scenario in flight when it stopped (not checked, not scored)."""
    not_run: list[str]
    """The scenarios after it."""
    duration_s: float


# The schema generator's registry: the name under $defs of docs/reference/report.schema.json.
REPORTS: dict[str, type] = {"DreamRun": DreamRunJSON, "Consolidate": ConsolidateJSON, "Eval": EvalJSON}
