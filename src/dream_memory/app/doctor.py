"""``dream doctor``: is this workspace ready for its scheduled job, and if not, what to do.

One service returning a typed report: each check has a status (``ok``, ``info``, ``warning``,
``problem``), one line saying what was found, and for warnings and problems the fix. Problems are
what stops or misleads the next ``dream run`` (no workspace, a bad config, no usable model, a
stale git lock, a held batch waiting for a person, an index row that leads nowhere, a nearly full
disk); warnings are worth knowing but the run copes (unsaved edits, a pending migration, an
interrupted change the next run finishes). It reads only: nothing is created, locked or fixed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from dream_memory.adapters import health
from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.preflight import check_workspace_writable
from dream_memory.adapters.workspace import require_usable_history
from dream_memory.app.doctor_model import key_source, safe_endpoint
from dream_memory.app.models import close_model
from dream_memory.core import layout
from dream_memory.core.ports import ChatModel
from dream_memory.core.schedule import effective_schedule
from dream_memory.errors import DreamError, NotFound, Refused
from dream_memory.settings import ResolvedModel, Settings

Status = Literal["ok", "info", "warning", "problem"]

LOW_DISK_BYTES = 100 * 1024 * 1024  # below this a run may stop on a full disk half way
STALE_GIT_LOCK_S = 60.0  # a live git holds its locks for milliseconds
MODEL_CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    summary: str
    fix: str | None = None
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "fix": self.fix,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class DoctorReport:
    workspace: str
    checks: tuple[Check, ...]

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.status == "problem"]

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "healthy": self.healthy,
            "problems": [c.name for c in self.problems],
            "warnings": [c.name for c in self.checks if c.status == "warning"],
            "checks": [c.to_json() for c in self.checks],
        }


@dataclass
class DoctorInputs:
    """What the doctor looks at, wired by the face: the settings (None when the config could not
    be loaded, with the error that says why), and the adapters to reach the workspace."""

    root: Path
    settings: Settings | None
    config_error: DreamError | None
    config_path: Path | None
    env: Mapping[str, str]
    history: Callable[[], HistoryLog]
    git: Callable[[], GitStore | None]
    chat_model: Callable[[ResolvedModel], ChatModel]
    cli_model: str | None = None
    check_model: bool = False
    clock: Callable[[], float] = field(default=time.monotonic)
    config_warnings: tuple[str, ...] = ()  # what loading the config warned about (unknown keys)


def diagnose(inputs: DoctorInputs) -> DoctorReport:
    """Every check, in the order an operator fixes them (workspace, repository, config, model,
    content, disk). Checks that need a workspace are left out when there is none."""
    checks: list[Check] = []
    workspace = _workspace_check(inputs.root)
    checks.append(workspace)
    if workspace.status == "ok":
        checks += _repository_checks(inputs)
    checks.append(_config_check(inputs))
    checks += _schedule_checks(inputs)
    checks += _model_checks(inputs)
    if workspace.status == "ok":
        checks += _content_checks(inputs.root)
    checks.append(_disk_check(inputs.root))
    return DoctorReport(str(inputs.root), tuple(checks))


# --- the workspace and its repository -------------------------------------------------------------

_MARKERS = (layout.SOUL, layout.USER, layout.MEMORY, layout.HISTORY, "memory")


def _workspace_check(root: Path) -> Check:
    init = f"dream init --workspace {root}"
    if not health.is_folder(root):
        return Check("workspace", "problem", f"no workspace at {root}", fix=f"`{init}` creates it")
    found = health.present(root, _MARKERS)
    if not found:
        return Check(
            "workspace",
            "problem",
            f"{root} is not a dream workspace (no SOUL.md, USER.md or memory/)",
            fix=f"check the path; `{init}` adds the templates there (it never overwrites a file)",
        )
    try:  # the same checks append, run and consolidate make before they start
        require_usable_history(root, write=True)
        check_workspace_writable(root)  # run's: .git/objects owned by another uid is not "healthy"
    except DreamError as exc:
        return Check("workspace", "problem", exc.message, fix=exc.hint)
    missing = [rel for rel in layout.DURABLE_FILES if rel not in found]
    if missing:
        return Check(
            "workspace",
            "warning",
            f"a dream workspace, but {', '.join(missing)} missing",
            fix=f"`{init}` adds the missing templates (the next writing command does too)",
        )
    return Check("workspace", "ok", f"a dream workspace ({', '.join(layout.DURABLE_FILES)})")


def _repository_checks(inputs: DoctorInputs) -> list[Check]:
    from dream_memory.app.history import workspace_status

    root = inputs.root
    follow = inputs.settings.dream.follow_external_cursor if inputs.settings else False
    git: GitStore | None = None
    try:
        git = inputs.git()
        status = workspace_status(root, inputs.history(), git, follow_external=follow).to_json()
        checks = [_git_check(git, status, root)]
        if git is not None:
            checks += _git_lock_checks(git)
            busy = git.in_progress()
            if busy is not None:
                checks.append(Check("git-operation", "problem", f"git is in the middle of {busy[0]}", fix=busy[1]))
    except DreamError as exc:
        # A damaged repository or an unreadable workspace file: that is the finding.
        fix = exc.hint or "`git fsck` and `dream status` say more; restore the damaged file from a clone or a backup"
        return [Check("git", "problem", f"the workspace or its repository cannot be read: {exc.message}", fix=fix)]
    finally:
        if git is not None:
            git.close()
    checks += _state_checks(root, status)
    return checks


def _git_check(git: GitStore | None, status: dict[str, Any], root: Path) -> Check:
    if git is None:
        return Check(
            "git",
            "warning",
            "not versioned yet: no repository",
            fix=f"`dream init --workspace {root}` creates it (the first dream run does too)",
        )
    head = git.head()
    if head is None:
        return Check("git", "warning", f"repository at {git.root} has no commit yet", fix="`dream init` commits one")
    branch = git.branch()
    where = f"on {branch}" if branch else "detached"
    details = [f"repository {git.root}"]
    if git.is_shallow:
        details.append("a shallow clone: older commits are absent (git fetch --unshallow brings them)")
    last = status["last_dream_commit"]
    details.append(f"last Dream commit {last['commit'][:10]} {last['subject']}" if last else "no Dream commit yet")
    if branch is None and git.created:
        return Check(
            "git",
            "problem",
            f"HEAD {head[:10]} is detached in dream-memory's own repository: Dream refuses to commit there",
            fix="check a branch out (git checkout main), or give dream run --branch NAME",
            details=tuple(details),
        )
    dirty = status["dirty"]
    refusal = git.commit_refusal(dirty)
    if refusal is not None:
        said = refusal.message.removesuffix("; nothing was committed")
        return Check("git", "problem", f"the next commit stops: {said}", fix=refusal.hint, details=tuple(details))
    if dirty:
        return Check(
            "git",
            "warning",
            f"HEAD {head[:10]} {where}; unsaved edits in {', '.join(dirty)}",
            fix="nothing to do unless they are a mistake: "
            "the next dream run commits them as `memory: manual edits` first",
            details=tuple(details),
        )
    return Check("git", "ok", f"HEAD {head[:10]} {where}; no unsaved edits", details=tuple(details))


def _git_lock_checks(git: GitStore) -> list[Check]:
    stale = [lock for lock in health.git_lock_files(git) if lock.age_s >= STALE_GIT_LOCK_S]
    if not stale:
        return [Check("git-locks", "ok", "no lock file left in .git")]
    named = ", ".join(f".git/{lock.path} ({lock.age_s:.0f} s old)" for lock in stale)
    return [
        Check(
            "git-locks",
            "problem",
            f"lock files left in the repository: {named}; commits fail while they exist",
            fix="if no git command is running, delete them (rm "
            + " ".join(f"{git.root}/.git/{lock.path}" for lock in stale)
            + "); dream run removes the ones an interrupted change of its own left",
        )
    ]


def _state_checks(root: Path, status: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    holder = status["lock"]
    if holder:
        checks.append(
            Check(
                "dream-lock",
                "info",
                f"a Dream run (or restore) is working: pid {holder['pid']} on {holder['host']}, "
                f"since {holder['started']}",
            )
        )
    else:
        checks.append(Check("dream-lock", "ok", "free"))
    if health.present(root, [layout.DREAM_JOURNAL]):
        checks.append(
            Check(
                "journal",
                "warning",
                f"an interrupted change waits in {layout.DREAM_JOURNAL}",
                fix="the next writing command (dream run, dream append) finishes or rolls it back",
            )
        )
    cursor = status["cursor_check"]
    if cursor["state"] in ("ahead", "behind", "missing"):
        checks.append(Check("cursor", "warning", f"{layout.DREAM_CURSOR}: {cursor['reason']}"))
    else:
        where = f"cursor {status['cursor']}, Dream at {status['dream_cursor']}, {status['pending']} pending"
        checks.append(Check("cursor", "ok", where))
    if status["malformed"]:
        checks.append(
            Check(
                "history",
                "warning",
                f"{status['malformed']} line(s) of {layout.HISTORY} are skipped (not entries of ours)",
                fix="dream status names them on stderr; they are never removed, fix or leave them",
            )
        )
    if status.get("interrupted_forget"):
        from dream_memory.app.history import FORGET_UNFINISHED_HINT, forget_unfinished_message

        checks.append(
            Check(
                "forget", "problem", forget_unfinished_message(status["interrupted_forget"]), fix=FORGET_UNFINISHED_HINT
            )
        )
    for waiting in status.get("replaced_history") or []:
        from dream_memory.app.history import REPLACED_HISTORY_HINT, replaced_history_message

        checks.append(Check("history", "warning", replaced_history_message(waiting), fix=REPLACED_HISTORY_HINT))
    if status["pending_migration"]:
        checks.append(
            Check(
                "migration",
                "warning",
                f"{layout.LEGACY_HISTORY} is waiting to be migrated",
                fix="the next writing command (dream append, dream run) migrates it",
            )
        )
    if status["held"]:
        checks.append(
            Check(
                "held",
                "problem",
                f"{len(status['held'])} change(s) held for a person to decide: {', '.join(status['held'])}",
                fix="look at them with dream review (dream review show ID), then dream review accept ID or "
                "reject ID (dream restore --apply-held ID / --discard-held ID do the same)",
            )
        )
    if status["set_aside"]:
        checks.append(
            Check(
                "set-aside",
                "warning",
                f"entries set aside after failing three runs: {', '.join(status['set_aside'])}",
                fix="dream log shows the set-aside commit; dream restore --replay runs them again",
            )
        )
    return checks


# --- configuration and model ------------------------------------------------------------------


def _config_check(inputs: DoctorInputs) -> Check:
    if inputs.config_error is not None:
        return Check(
            "config",
            "problem",
            inputs.config_error.message,
            fix=inputs.config_error.hint or "fix the file (docs/configuration.md lists every setting)",
        )
    if inputs.config_path is None:
        return Check("config", "ok", "no config file: the defaults apply")
    if inputs.config_warnings:
        return Check(
            "config",
            "warning",
            f"{inputs.config_path} has {len(inputs.config_warnings)} ignored key(s): unknown, or a setting given twice",
            details=inputs.config_warnings,
            fix="correct or remove them (a misspelt key, `pinn` for `pin`, leaves its setting off); "
            "docs/configuration.md lists every setting",
        )
    return Check("config", "ok", f"{inputs.config_path} is valid")


def _schedule_checks(inputs: DoctorInputs) -> list[Check]:
    """The schedule as `dream schedule` reads it, by the same rule (``effective_schedule``): a
    cron expression or intervalH that command refuses is a problem here too. Left out when the
    config could not be read (the config check says why)."""
    settings = inputs.settings
    if settings is None:
        return []
    dream = settings.dream
    try:
        result = effective_schedule(dream.cron, dream.interval_h)
    except DreamError as exc:
        return [
            Check(
                "schedule",
                "problem",
                exc.message,
                fix=f"{exc.hint or 'correct it'} (`dream schedule` refuses it until then)",
            )
        ]
    details = (result.note,) if result.note else ()
    return [Check("schedule", "ok", f"{result.expression!r} (from {result.source})", details=details)]


def _model_checks(inputs: DoctorInputs) -> list[Check]:
    settings = inputs.settings
    if settings is None:
        return [Check("model", "problem", "unknown: the config could not be read", fix="fix the config first")]
    try:
        resolved = settings.model(inputs.cli_model)
    except DreamError as exc:
        return [Check("model", "problem", exc.message, fix=exc.hint)]
    if resolved is None:
        return [
            Check(
                "model",
                "problem",
                "no model is configured: dream run and dream consolidate refuse to start",
                fix="set DREAM_MODEL or agents.defaults.model (a preset, a litellm id, or 'offline'); "
                "docs/configuration.md",
            )
        ]
    endpoint = safe_endpoint(resolved.api_base)
    summary = f"{resolved.name} (chosen by {resolved.source}"
    summary += f", preset {resolved.preset})" if resolved.preset else ")"
    details = [f"key: {key_source(resolved, settings)}"]
    if endpoint:
        details.append(f"endpoint: {endpoint}")
    checks = [Check("model", "ok", summary, details=tuple(details))]
    if inputs.check_model:
        checks.append(_model_call_check(inputs, resolved))
    return checks


def _model_call_check(inputs: DoctorInputs, resolved: ResolvedModel) -> Check:
    if resolved.is_offline:
        return Check("model-call", "ok", "the offline engine runs in process: nothing to call")
    # One attempt with a short timeout: the doctor says what happens, it does not wait out retries.
    probe = replace(resolved, max_retries=0, timeout=min(resolved.timeout, MODEL_CHECK_TIMEOUT_S), max_tokens=8)
    model = inputs.chat_model(probe)
    started = inputs.clock()
    try:
        model.complete(
            [
                {"role": "system", "content": "You are a health check. Answer with one word."},
                {"role": "user", "content": "Say OK."},
            ],
            purpose="doctor",
        )
    except DreamError as exc:
        fix = exc.hint or "check the endpoint, the model name and the key"
        return Check("model-call", "problem", exc.message, fix=fix)
    finally:
        close_model(model)  # built for this one probe
    seconds = inputs.clock() - started
    return Check("model-call", "ok", f"{resolved.name} answered one request in {seconds:.1f} s")


# --- memory content and disk ----------------------------------------------------------------------


def _content_checks(root: Path) -> list[Check]:
    from dream_memory.app.context import always_on_skills
    from dream_memory.app.read import ReadStore

    checks: list[Check] = [_encoding_check(root)]
    skills = always_on_skills(root)
    if skills:
        names = [part.title.removeprefix("Skill: ").removesuffix(" (always on)") for part in skills]
        checks.append(Check("skills", "info", f"always on (in every prompt): {', '.join(names)}"))
    else:
        checks.append(Check("skills", "ok", "no always-on skill"))
    if not health.present(root, [layout.INDEX]):
        checks.append(Check("index", "ok", f"no {layout.INDEX} yet"))
        return checks
    broken: list[str] = []
    with ReadStore(root) as store:
        rows = store.index.rows
        for row in rows:
            try:
                store.entity(row.entity)
            except (NotFound, Refused) as exc:
                broken.append(f"line {row.line_no} ({row.entity}): {exc.message}")
        unusable = list(store.index_problems)
    if broken:
        checks.append(
            Check(
                "index",
                "problem",
                f"{len(broken)} of {len(rows)} {layout.INDEX} row(s) lead nowhere",
                fix="fix the File cell of those rows, or create the file; dream entity NAME shows what a reader gets",
                details=tuple(broken + unusable),
            )
        )
    elif unusable:
        checks.append(
            Check(
                "index",
                "warning",
                f"{len(unusable)} row(s) of {layout.INDEX} cannot be used",
                fix="dream resolve names them on stderr",
                details=tuple(unusable),
            )
        )
    else:
        checks.append(Check("index", "ok", f"{len(rows)} {layout.INDEX} row(s), each leads to its file"))
    return checks


def _encoding_check(root: Path) -> Check:
    """Memory files Dream cannot read as UTF-8 make every run fail: name them."""
    bad = [f"{rel} (byte {at})" for rel, at in health.undecodable(root, layout.is_content)]
    if bad:
        return Check(
            "encoding",
            "problem",
            f"memory file(s) not UTF-8 text: {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}",
            fix="save them as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), then commit; every dream run fails until then",
        )
    return Check("encoding", "ok", "every memory file is UTF-8 text")


def _disk_check(root: Path) -> Check:
    free = health.free_bytes(root)
    if free is None:
        return Check("disk", "warning", f"free space of {root} cannot be read")
    shown = f"{free / 1024**3:.1f} GiB" if free >= 1024**3 else f"{free / 1024**2:.0f} MiB"
    if free < LOW_DISK_BYTES:
        return Check(
            "disk",
            "problem",
            f"only {shown} free where {root} is",
            fix="free some space: a full disk stops dream run (nothing is lost, but nothing is dreamt)",
        )
    return Check("disk", "ok", f"{shown} free")
