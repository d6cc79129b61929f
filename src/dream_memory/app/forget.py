"""``dream forget``: a value or an entity removed from every layer of a workspace and from every
commit of its git history (docs/forget.md). One service for the CLI and ``Workspace.forget``.

The steps, under the Dream lock, each idempotent, with a journal written first so that a crash
at any point is finished by running the same purge again (the journal names the purge by keyed
hash, never by its value):

1. the memory files on disk (tracked files, held batches, Dream's state, .consolidation.json);
2. history.jsonl and memory/archive/ (under the history lock; cursors kept);
3. the search index (a cache outside the store: removed, built again by the next search);
4. git: every commit rewritten, refs and reflogs moved, the index brought in step;
5. git: unreachable objects pruned, loose and packed;
6. the audit record (``memory/.forgotten.json``, which the guard reads from the start of the purge,
   step 0) gets the purge's counts, the journal goes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dream_memory.core import forget as rules
from dream_memory.core import layout
from dream_memory.errors import RepositoryStateError, UsageError

if TYPE_CHECKING:
    from dream_memory.adapters import forgotten as forgotten_mod
    from dream_memory.adapters.git import GitStore
    from dream_memory.adapters.rooted import RootedDir
    from dream_memory.app.runtime import Runtime


@dataclass(frozen=True)
class ForgetRequest:
    value: str | None = None  # --purge TEXT
    entity: str | None = None  # --entity NAME
    dry_run: bool = False


@dataclass
class ForgetReport:
    kind: Literal["value", "entity"]
    dry_run: bool
    purge_id: str | None = None  # the keyed hash's head, as the audit record names the purge
    resumed: bool = False  # an interrupted purge was finished
    files: dict[str, list[int]] = field(default_factory=dict)  # memory file -> lines changed
    removed: list[str] = field(default_factory=list)  # files that went whole
    renamed: dict[str, str] = field(default_factory=dict)
    history: dict[str, list[int]] = field(default_factory=dict)  # history.jsonl / archive -> lines
    cursors: list[int] = field(default_factory=list)  # history entries rewritten (cursors kept)
    search_index: bool = False  # a search index was removed
    held_dropped: dict[str, str] = field(default_factory=dict)  # held change or batch id -> its file
    commits: int = 0  # commits walked
    commits_holding: list[str] = field(default_factory=list)  # commits whose content held it
    commits_rewritten: int = 0
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)
    reflog_lines: int = 0
    pruned: int = 0  # objects deleted
    remotes: list[str] = field(default_factory=list)
    push: list[str] = field(default_factory=list)  # the force-push commands to run
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.files or self.removed or self.renamed or self.history or self.commits_rewritten or self.held_dropped
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dry_run": self.dry_run,
            "purge_id": self.purge_id,
            "resumed": self.resumed,
            "files": self.files,
            "removed": self.removed,
            "renamed": self.renamed,
            "history": self.history,
            "cursors": self.cursors,
            "search_index_removed": self.search_index,
            "held_dropped": self.held_dropped,
            "commits": self.commits,
            "commits_holding": self.commits_holding,
            "commits_rewritten": self.commits_rewritten,
            "refs": {name: {"old": old, "new": new} for name, (old, new) in self.refs.items()},
            "reflog_lines": self.reflog_lines,
            "pruned_objects": self.pruned,
            "remotes": self.remotes,
            "push": self.push,
            "warnings": self.warnings,
        }


def _target(request: ForgetRequest) -> rules.Target:
    if (request.value is None) == (request.entity is None):
        raise UsageError.naming(lambda o: (f"give exactly one of {o('--purge')} TEXT and {o('--entity')} NAME", None))
    if request.entity is not None:
        name = request.entity.strip()
        if "/" in name or name in (".", ".."):
            raise UsageError(f"the entity name {name!r} is not a name (no folders)")
        return rules.Target("entity", rules.check_value(name, "entity"))
    assert request.value is not None
    return rules.Target("value", rules.check_value(request.value, "value"))


def _disk_scope(rel: str) -> bool:
    """The workspace files the purge rewrites on disk besides the history files: the legacy
    HISTORY.md and its migration backups too (left, they fed the value back into history.jsonl at
    the next run's migration, and kept it on disk)."""
    return (
        layout.is_tracked(rel)
        or rel == layout.CONSOLIDATION
        or layout.matches_any(rel, (layout.LEGACY_HISTORY, f"{layout.LEGACY_HISTORY}.bak*"))
    )


def after_a_stop(root: Path, *, dry_run: bool) -> Callable[[], str]:
    """What a stopped `dream forget` leaves, asked at the signal: nothing before its journal is
    written (so nothing has changed), an unfinished purge after."""

    def left() -> str:
        from dream_memory.adapters import forgotten

        if dry_run:
            return "nothing was written (a dry run)"
        if forgotten.read_journal(root) is None:
            return "the purge had not started: nothing was changed"
        return "the purge is unfinished: run the same dream forget again to finish it"

    return left


def forget(rt: Runtime, request: ForgetRequest) -> ForgetReport:
    target = _target(request)
    if not rt.has_workspace():
        raise UsageError(f"no workspace at {rt.root}", hint="check --workspace / $DREAM_WORKSPACE")
    report = ForgetReport(kind=target.kind, dry_run=request.dry_run)
    git = rt.git(create=False)
    try:
        if request.dry_run:
            from dream_memory.adapters.locks import dream_lock_shared

            with dream_lock_shared(rt.root):
                _run(rt, git, target, report, dry_run=True)
        else:
            with rt.dream_lock():
                _run(rt, git, target, report, dry_run=False)
    finally:
        if git is not None:
            git.close()
    return report


def _run(rt: Runtime, git: GitStore | None, target: rules.Target, report: ForgetReport, *, dry_run: bool) -> None:
    from dream_memory.adapters import forgotten, locks

    root = rt.root
    if not dry_run:
        record = forgotten.load_or_create(root)
        digest = record.digest(target.value)
        report.purge_id = digest[:16]
        journal = forgotten.read_journal(root)
        if journal is not None:
            if journal.get("id") != report.purge_id:
                from dream_memory.app.history import FORGET_UNFINISHED_HINT, forget_unfinished_message

                raise UsageError(
                    forget_unfinished_message(journal) + "; it is finished before another value is purged",
                    hint=FORGET_UNFINISHED_HINT,
                )
            report.resumed = True
    if git is not None:
        _check_repository(git, resumed=report.resumed, dry_run=dry_run)
    if git is not None and git.head() is not None:
        # Read before the journal: a held record it cannot read fails the purge while nothing
        # has changed, not after, when every command that commits would wait for it.
        report.held_dropped = _held_on(git, target)
    if not dry_run:
        started = rt.clock.now().isoformat(timespec="seconds")
        forgotten.write_journal(
            root, {"id": report.purge_id, "kind": target.kind, "started": started, **locks.this_process()}
        )
        # The guard first: an append made while the purge rewrites files and commits (it takes
        # no Dream lock) is redacted already. Saved last, it let the value back into history.
        _guard(root, target, report.purge_id)
    held = report.held_dropped
    dropped = _drop_held(git, target, held, dry_run=dry_run) if git is not None and held else {}
    _purge_files(rt, git, target, report, dry_run=dry_run, dropped=dropped)
    _purge_history(rt, target, report, dry_run=dry_run)
    _purge_search_index(rt, report, dry_run=dry_run)
    _note_sessions(rt, target, report)
    if git is not None and git.head() is not None:
        from dream_memory.app.forget_git import purge_git

        purge_git(git, target, report, dry_run=dry_run)
    if not dry_run:
        record = forgotten.load_or_create(root)
        entry = _guard(root, target, report.purge_id, record)
        entry.update(
            {
                "at": rt.clock.now().isoformat(timespec="seconds"),
                "files": len(report.files) + len(report.removed),
                "history_entries": len(report.cursors),
                "commits_rewritten": report.commits_rewritten,
                "refs": sorted(report.refs),
            }
        )
        forgotten.save(root, record)
        forgotten.remove_journal(root)


def _guard(
    root: Path, target: rules.Target, purge_id: str | None, record: forgotten_mod.Record | None = None
) -> dict[str, Any]:
    """The purge's entry in the audit record (added and saved when missing): what the guard
    compares later writes against (keyed hashes, never the value)."""
    from dream_memory.adapters import forgotten

    assert purge_id is not None
    record = record if record is not None else forgotten.load_or_create(root)
    found = next((p for p in record.purges if p.get("id") == purge_id), None)
    if found is not None:
        return found
    entry: dict[str, Any] = {
        "id": purge_id,
        "kind": target.kind,
        "digest": record.digest(target.value),
        "rolling": record.rolling(target.value),
        "length": len(target.value),
    }
    if target.fold:  # an entity's name is matched in any case, by the purge and by the guard
        entry["folded"] = record.digest(forgotten.fold(target.value))
        entry["folded_rolling"] = record.rolling(forgotten.fold(target.value))
    record.purges.append(entry)
    forgotten.save(root, record)
    return entry


def _check_repository(git: GitStore, *, resumed: bool, dry_run: bool) -> None:
    """Like every writing command: nothing under way in git, no Dream change half written, and
    (unless this finishes an interrupted purge, whose own edits are the difference) no
    uncommitted edit of a memory file, which the rewrite would otherwise have to guess about."""
    if not dry_run:
        from dream_memory.app.versioning import recover

        recover(git)
    from dream_memory.adapters.git import rewrite

    git.check_can_commit()
    git._check_index()
    rewrite.check_refs(git.repo)
    if resumed or git.head() is None:
        return
    dirty = git.dirty()
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise RepositoryStateError(
            f"memory files have uncommitted edits ({shown}); dream forget rewrites history and needs a clean tree",
            hint="let `dream run` commit them (or commit or restore them with git), then run dream forget again",
        )


def _held_on(git: GitStore, target: rules.Target) -> dict[str, str]:
    """The held changes on a file the purge deletes or renames: dropped first, their records with
    them (their history stays consumed). Left, a record named
    `entities/[forgotten].md` was damaged: neither accepted nor restored from git after the purge."""
    from dream_memory.app.held import held_on

    return held_on(git, lambda rel: target.drops(rel) or rules.purge_name(rel, target) != rel)


def _drop_held(git: GitStore, target: rules.Target, held: dict[str, str], *, dry_run: bool) -> dict[str, bytes | None]:
    """Drops each held change or batch in a commit of its own, under a subject of its own: committed
    as `dream review reject` commits, `git log` said a person had rejected it in review. The subject
    names neither the file (the forgotten entity's own name) nor the value. Returns the files as
    the drops leave them, which the purge reads: a dry run, which commits nothing, listed the held
    records as lines to rewrite while the real run deletes them."""
    from dream_memory.app.held import state_of, without_held
    from dream_memory.app.versioning import apply_commit

    gone: dict[str, bytes | None] = {}
    state = state_of(git)
    for held_id, rel in held.items():
        what = "change" if state.find_change(held_id) is not None else "batch"
        changes, state = without_held(git, state, held_id)
        gone.update(changes)
        if not dry_run:
            how = "deleted" if target.drops(rel) else "renamed"
            apply_commit(
                git,
                changes,
                f"dream: forget dropped held {what} {held_id} (its file is {how} by the purge)\n\n"
                "Dropped by dream forget; its history stays consumed.",
            )
    return gone


def _fs(rt: Runtime, git: GitStore | None) -> RootedDir:
    if git is not None:
        return git.fs
    from dream_memory.adapters.rooted import RootedDir

    return RootedDir(rt.root)


def _purge_files(
    rt: Runtime,
    git: GitStore | None,
    target: rules.Target,
    report: ForgetReport,
    *,
    dry_run: bool,
    dropped: dict[str, bytes | None],
) -> None:
    fs = _fs(rt, git)
    from dream_memory.adapters.forgotten import files_below

    for rel in files_below(fs, (*layout.tracked_roots(), layout.CONSOLIDATION), _disk_scope):
        if layout.matches_any(rel, (layout.HISTORY, f"{layout.ARCHIVE_DIR}/**")):
            continue
        data = dropped[rel] if rel in dropped else fs.read(rel)
        if data is None:
            continue
        new = rules.purge_bytes(rel, data, target)
        renamed = rules.purge_name(rel, target)
        if new is None:
            report.removed.append(rel)
            if not dry_run:
                fs.remove(rel, site="forget.remove")
            continue
        if new != data:
            text = data.decode("utf-8", errors="replace")
            report.files[rel] = list(rules.purge_text_of(rel, text, target).lines) or [1]
        if renamed != rel:
            report.renamed[rel] = renamed
            if not dry_run:
                fs.write(renamed, new, site="forget.write")
                fs.remove(rel, site="forget.remove")
        elif new != data and not dry_run:
            fs.write(rel, new, site="forget.write")
    _purge_top_files(fs, target, report, dry_run=dry_run)


def _purge_top_files(fs: RootedDir, target: rules.Target, report: ForgetReport, *, dry_run: bool) -> None:
    """The top folder's other files. A report Dream wrote there (``--report /workspace/report.json``
    is the container's documented use) quotes the entries and diffs it read: purged as Dream's own
    JSON files are. Any other file holding the value is the user's or the agent's: named, never
    changed, so that no copy in the workspace is missed without a word. A file that cannot be
    searched (too large, unreadable) is named too, and never fails the purge: a purge failing
    here, after the journal, could be finished by no rerun while every commit waited for it."""
    from dream_memory.adapters.forgotten import top_files

    others: list[str] = []
    unsearched: list[str] = []
    for top in top_files(fs.root):
        if _disk_scope(top.name):
            continue
        if top.data is None:
            unsearched.append(f"{top.name} {top.problem}")
            continue
        if not target.holds(top.data):
            continue
        if not rules.is_dream_report(top.name, top.data):
            others.append(top.name)
            continue
        new = rules.purge_bytes(top.name, top.data, target)
        if new is None or new == top.data:
            continue
        text = top.data.decode("utf-8", errors="replace")
        report.files[top.name] = list(rules.purge_text_of(top.name, text, target).lines) or [1]
        if not dry_run:
            fs.write(top.name, new, site="forget.write")
    if others:
        report.warnings.append(
            f"{len(others)} file(s) in the workspace's top folder still hold it ({_first_five(others)}): they "
            "are neither memory files nor reports dream-memory wrote, so they were left as they are; edit or "
            "delete them"
        )
    if unsearched:
        report.warnings.append(
            f"{len(unsearched)} file(s) in the workspace's top folder were not searched for it "
            f"({_first_five(unsearched)}): check them yourself"
        )


def _first_five(items: list[str]) -> str:
    return ", ".join(items[:5]) + (" ..." if len(items) > 5 else "")


def _purge_history(rt: Runtime, target: rules.Target, report: ForgetReport, *, dry_run: bool) -> None:
    from dream_memory.adapters.history_log.purge import purge_history

    history = rt.history
    kept = 0

    def purge(text: str) -> rules.TextChange:
        nonlocal kept
        change = rules.purge_jsonl(text, target)
        # Compared as text: a line may hold half an emoji, which no UTF-8 error handler encodes.
        kept += sum(1 for line in change.text.split("\n") if target.holds_text(line))
        return change

    done = purge_history(history, purge, dry_run=dry_run)
    report.warnings += history.rewrite_notes
    if kept:
        report.warnings.append(
            f"{kept} history line(s) still hold it in a cursor, a timestamp, a session key or a JSON key: those say "
            "where, when and for whom an entry was written (a rewritten session key would move it into another "
            "scope), so they were left as they are"
        )
    if done.in_unterminated_tail:
        report.warnings.append(
            f"the last line of {layout.HISTORY} has no newline (a write in progress, or a line cut short) and holds "
            "the value: it was left as it is; run the same dream forget again once that line is complete"
        )
    report.history = done.files
    report.cursors = sorted(set(done.cursors))


def _purge_search_index(rt: Runtime, report: ForgetReport, *, dry_run: bool) -> None:
    """The index is a cache of the store's words: removed whole (SQLite's free pages would keep
    the old text), built again by the next search."""
    from dream_memory.adapters.forgotten import remove_search_indexes
    from dream_memory.settings import search_cache_dir

    settings = rt.read_settings
    cache = search_cache_dir(settings.env)
    if cache is not None:
        report.search_index = remove_search_indexes(
            cache, (rt.root, settings.store), dry_run=dry_run, warnings=report.warnings
        )


def _note_sessions(rt: Runtime, target: rules.Target, report: ForgetReport) -> None:
    """Session files are the agent's own, not memory: counted, never changed."""
    from dream_memory.adapters.forgotten import files_holding

    holding = files_holding(rt.root / layout.SESSIONS_DIR, target.holds)
    if holding:
        report.warnings.append(
            f"{len(holding)} session file(s) in {layout.SESSIONS_DIR}/ still hold it ({', '.join(holding[:3])}"
            f"{' ...' if len(holding) > 3 else ''}): they are the agent's, not memory; delete them or their lines there"
        )
