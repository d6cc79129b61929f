"""A Dream run's report: the run's status, one record per batch, and the JSON the faces print.
Every text in it passes the secret guard (``scrub_report``) before it leaves the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dream_memory import __version__
from dream_memory.adapters.git import FileChange
from dream_memory.core import layout
from dream_memory.core.chat import Usage
from dream_memory.core.facts import Fact
from dream_memory.core.history import Batch, HistoryEntry
from dream_memory.core.ports import Redactor
from dream_memory.core.provenance import Attribution, Declared

STATUS_OK = "ok"
STATUS_NOTHING = "nothing_to_do"
STATUS_DRY_RUN = "dry_run"
STATUS_FAILED = "failed"
STATUS_LOCKED = "locked"
STATUS_HELD = "held"
STATUS_BUDGET = "budget_exhausted"
STATUS_SET_ASIDE = "set_aside"
STATUS_INTERRUPTED = "interrupted"


NO_FACT_ASKED = "no fact of the batch asked for it"


@dataclass
class BatchRecord:
    cursor_from: int
    cursor_to: int
    entries: int
    outcome: str = ""  # committed | nothing_new | held | set_aside | failed | dry_run | interrupted
    facts: int = 0
    tool_calls: int = 0
    commit: str | None = None
    files_changed: list[FileChange] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    model_s: float = 0.0  # of which in model calls: the request path (building, HTTP, parsing) included
    protocol: str = ""  # the edit protocol that ran last for this batch
    dialects: dict[str, int] = field(default_factory=dict)  # tool calls by how they arrived
    left_out: list[str] = field(default_factory=list)  # what the context window kept out of prompts
    scope: str = "shared"  # the scope of every entry of the batch (docs/scopes.md)
    scope_refusals: int = 0  # edits refused because they named another scope's file
    # Provenance (docs/provenance.md): the facts phase 1 found, their sources checked against the
    # batch (cursors cited outside it are kept here, the fact's source then unknown), the edits
    # that declared facts, and the batch's lines tied to the facts once it lands.
    found: tuple[Fact, ...] = field(default=(), repr=False)
    cited_outside: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)  # fact number -> cursors
    declared: list[Declared] = field(default_factory=list, repr=False)
    cited: dict[int, HistoryEntry] = field(default_factory=dict, repr=False)  # cursor -> the entry its facts cite
    attribution: Attribution | None = field(default=None, repr=False)
    unapplied: tuple[int, ...] = field(default=(), repr=False)  # numbers of the facts phase 2 left out
    left_pending: dict[str, int] | None = None  # set aside: the batch's entries that were not

    def set_aside_front(self, front: Batch, ran: Batch) -> None:
        """When only ``front`` of the batch that ran was set aside, the record's range becomes it,
        as the commit, ``set_aside`` and the cursor say, and ``left_pending`` names the rest: a
        reader of ``batches`` alone took every entry that ran for set aside."""
        rest = ran.entries[len(front.entries) :]
        if rest:
            self.left_pending = {"cursor_from": rest[0].cursor, "cursor_to": rest[-1].cursor, "entries": len(rest)}
            self.cursor_to, self.entries = front.cursor_to, len(front.entries)

    @property
    def facts_unsourced(self) -> int:
        """Facts with no valid citation (none, or only cursors outside the batch)."""
        return sum(1 for f in self.found if not f.sources)

    def provenance_json(self) -> dict[str, Any] | None:
        if not self.found:
            return None
        lines = self.attribution.lines if self.attribution else ()
        removed = self.attribution.removed if self.attribution else ()
        facts = []
        for number, fact in enumerate(self.found, start=1):
            facts.append(
                {
                    "id": number,
                    "tag": fact.tag,
                    "name": fact.name,
                    "text": fact.text,
                    "target": fact.target,
                    "sources": list(fact.sources),
                    "source": "cited" if fact.sources else "unknown",
                    "cited_outside_batch": list(self.cited_outside.get(number, ())),
                    "lines": [
                        {"path": ln.path, "line": ln.line, "text": ln.text} for ln in lines if number in ln.facts
                    ],
                }
            )
        return {
            "facts": facts,
            "facts_unsourced": self.facts_unsourced,
            "lines_without_fact": [ln.to_json() for ln in lines if not ln.facts],
            "entries": [
                {"cursor": e.cursor, "timestamp": e.timestamp, "session_key": e.session_key, "content": e.content}
                for _, e in sorted(self.cited.items())
            ],
            "removed": [
                {
                    **r.to_json(),
                    "reason": "; ".join(self.found[n - 1].render() for n in r.facts) or NO_FACT_ASKED,
                }
                for r in removed
            ],
        }

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
            "scope": self.scope,
            "scope_refusals": self.scope_refusals,
            "provenance": self.provenance_json(),
            "left_pending": self.left_pending,
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
    stopped_by: int | None = None  # the signal that interrupted the run: its exit code is 128 + it
    manual_edits_commit: str | None = None
    compaction: dict[str, Any] | None = None
    dry_run_changes: list[FileChange] = field(default_factory=list)
    failed_exit: int = 1  # 2 when the run was refused for bad input (a crafted tree, a merge in progress)

    @property
    def exit_code(self) -> int:
        """The status's exit code from the one table (app/outcome.py); ``failed_exit`` for a
        failed run."""
        from dream_memory.app.outcome import exit_code

        return exit_code(self)

    def set_aside_landed(self, record: BatchRecord, front: Batch, ran: Batch, reason: str) -> None:
        """Once the set-aside commit holds ``front``: the record narrowed to it, and ``front``
        listed as set aside. A commit refused before it landed set nothing aside, and was listed."""
        record.set_aside_front(front, ran)
        self.set_aside.append({"cursor_from": front.cursor_from, "cursor_to": front.cursor_to, "reason": reason})

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
            "scope_refusals": sum(b.scope_refusals for b in self.batches),
        }


def _summed(counts: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for mapping in counts:
        for key, value in mapping.items():
            total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


def scrub(redactor: Redactor, text: str) -> str:
    """Error and note texts quote what the model sent (a refused path, a line it tried to match):
    they pass the secret guard before reaching a report, a log line, the state or a commit."""
    return redactor.redact(text)[0]


def scrub_report(report: DreamReport, redactor: Redactor) -> None:
    report.errors = [scrub(redactor, e) for e in report.errors]
    report.notes = [scrub(redactor, n) for n in report.notes]
    for batch in report.batches:
        batch.error = None if batch.error is None else scrub(redactor, batch.error)
        batch.notes = [scrub(redactor, n) for n in batch.notes]
    for item in [*report.held, *report.set_aside]:
        item["reason"] = scrub(redactor, str(item.get("reason", "")))
