"""The retention evaluation behind ``dream eval``: does a model keep what matters, and only that?

A scenario (``data/eval/scenarios/<name>/scenario.json`` plus its session files) is a few dated
conversations and the questions a good memory answers afterwards, LongMemEval-style. For each day,
in order, the day's sessions are copied into a fresh workspace, consolidated (``--force``: every
message up to the last user turn, which stays in the session like a live agent's tail) and
Dreamt, exactly as a nightly job would. Then the memory is checked, deterministically, with no
model in the loop:

- ``runs``: every consolidation and Dream run finished cleanly (not failed, locked, held, set aside,
  and no slice archived raw because the model could not summarize it);
- ``kept``: each expected answer is in the memory files;
- ``right_file``: ... in the file it belongs to (USER.md, SOUL.md or memory/MEMORY.md);
- ``no_duplicates``: ... on exactly one line;
- ``superseded_gone``: each superseded or forgotten value is gone from every memory file;
- ``superseded_in_history``: ... yet still in the git history (it was remembered, then replaced);
- ``noise_left_out``: small talk and one-off requests never reached memory;
- ``no_secret``: the planted secret is in no commit (any file, any message), no memory file and
  not in history.jsonl or its archive.

The score is the share of passed items; a scenario passes when its score reaches the scenario's
``threshold`` and every check it lists as ``required`` passes in full.

The use case receives a factory that opens a workspace (the entrypoint builds it from the wiring),
so this module never builds adapters for model calls itself; it reads files and git directly.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import string
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from dream_memory.core import layout
from dream_memory.errors import InputError

SCENARIO_FILE = "scenario.json"
SESSIONS_FOLDER = "sessions"

# (id, title), in the order the score table shows them.
CHECKS: tuple[tuple[str, str], ...] = (
    ("runs", "runs finished (consolidate, Dream)"),
    ("kept", "facts kept"),
    ("right_file", "facts in the right file"),
    ("no_duplicates", "facts on exactly one line"),
    ("superseded_gone", "superseded / forgotten values gone"),
    ("superseded_in_history", "superseded / forgotten values in git history"),
    ("noise_left_out", "noise left out"),
    ("no_secret", "no secret committed or stored"),
)
CHECK_IDS = tuple(c for c, _ in CHECKS)
QUESTION_KINDS = ("fact", "preference", "update", "deletion")
FILES = (layout.USER, layout.SOUL, layout.MEMORY)
_FINISHED = {"consolidate": ("ok", "nothing_to_do"), "dream": ("ok", "nothing_to_do")}


def builtin_scenarios_root() -> Path:
    return Path(str(resources.files("dream_memory") / "data" / "eval" / "scenarios"))


# --- scenarios -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    kind: str  # fact | preference | update | deletion
    question: str
    answers: tuple[str, ...] = ()  # any of them counts (empty for a deletion)
    file: str | None = None  # where the answer belongs
    gone: tuple[str, ...] = ()  # superseded (update) or forgotten (deletion) values


@dataclass(frozen=True)
class Day:
    date: str
    sessions: tuple[str, ...]


@dataclass(frozen=True)
class CanarySpec:
    placeholder: str
    kind: str


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    threshold: float
    required: tuple[str, ...]
    days: tuple[Day, ...]
    questions: tuple[Question, ...]
    noise: tuple[str, ...]
    canaries: tuple[CanarySpec, ...]
    folder: Path


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise InputError(f"{where}: '{key}' is missing")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InputError(f"{where}: '{key}' has the wrong type ({type(value).__name__})")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) and s.strip() for s in items):
        raise InputError(f"{where}: expected a non-empty string or a list of them")
    return tuple(items)


def load_scenario(folder: Path) -> Scenario:
    """Read and validate ``folder/scenario.json``; InputError names what is wrong."""
    path = folder / SCENARIO_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    where = str(path)
    threshold = float(_need(data, "threshold", (int, float), where))
    if not 0 < threshold <= 1:
        raise InputError(f"{where}: 'threshold' must be a share in (0, 1], not {threshold}")
    required = tuple(data.get("required", []))
    unknown = [c for c in required if c not in CHECK_IDS]
    if unknown:
        raise InputError(f"{where}: unknown required check(s) {unknown}; known: {', '.join(CHECK_IDS)}")
    days: list[Day] = []
    for i, raw in enumerate(_need(data, "days", list, where)):
        at = f"{where} days[{i}]"
        sessions = _strings(_need(raw, "sessions", list, at), at + " sessions")
        for name in sessions:
            if "/" in name or name.startswith(".") or not (folder / SESSIONS_FOLDER / name).is_file():
                raise InputError(f"{at}: session file {SESSIONS_FOLDER}/{name} does not exist in {folder}")
        days.append(Day(date=str(_need(raw, "date", str, at)), sessions=sessions))
    questions: list[Question] = []
    for i, raw in enumerate(_need(data, "questions", list, where)):
        at = f"{where} questions[{i}]"
        kind = _need(raw, "kind", str, at)
        if kind not in QUESTION_KINDS:
            raise InputError(f"{at}: kind must be one of {', '.join(QUESTION_KINDS)}")
        if kind == "deletion":
            answers: tuple[str, ...] = ()
            target = None
            gone = _strings(_need(raw, "forgotten", (str, list), at), at + " forgotten")
        else:
            answers = _strings(_need(raw, "answer", (str, list), at), at + " answer")
            target = _need(raw, "file", str, at)
            if target not in FILES:
                raise InputError(f"{at}: file must be one of {', '.join(FILES)}")
            gone = _strings(raw["superseded"], at + " superseded") if kind == "update" else ()
            if kind == "update" and not gone:
                raise InputError(f"{at}: an update names the values it supersedes in 'superseded'")
        questions.append(
            Question(
                id=str(_need(raw, "id", str, at)),
                kind=kind,
                question=str(raw.get("question", "")),
                answers=answers,
                file=target,
                gone=gone,
            )
        )
    canaries = []
    for i, raw in enumerate(data.get("canaries", [])):
        at = f"{where} canaries[{i}]"
        kind = _need(raw, "kind", str, at)
        if kind not in _CANARY_SHAPES:
            raise InputError(f"{at}: unknown canary kind {kind!r}; known: {', '.join(sorted(_CANARY_SHAPES))}")
        canaries.append(CanarySpec(placeholder=_need(raw, "placeholder", str, at), kind=kind))
    return Scenario(
        name=str(_need(data, "name", str, where)),
        title=str(data.get("title", data["name"])),
        description=str(data.get("description", "")),
        threshold=threshold,
        required=required,
        days=tuple(days),
        questions=tuple(questions),
        noise=_strings(data["noise"], where + " noise") if data.get("noise") else (),
        canaries=tuple(canaries),
        folder=folder,
    )


def load_scenarios(root: Path | None = None, names: Sequence[str] = ()) -> list[Scenario]:
    """Every scenario under ``root`` (default: the bundled set), by folder name; ``names`` picks some."""
    base = root if root is not None else builtin_scenarios_root()
    if (base / SCENARIO_FILE).is_file():
        folders = [base]
    elif base.is_dir():
        folders = sorted(p for p in base.iterdir() if (p / SCENARIO_FILE).is_file())
    else:
        raise InputError(f"scenario folder {base} does not exist")
    scenarios = [load_scenario(f) for f in folders]
    if names:
        known = {s.name: s for s in scenarios}
        missing = [n for n in names if n not in known]
        if missing:
            raise InputError(f"no scenario named {', '.join(missing)} (known: {', '.join(sorted(known)) or 'none'})")
        scenarios = [known[n] for n in names]
    if not scenarios:
        raise InputError(f"no scenario ({SCENARIO_FILE}) found under {base}")
    return scenarios


# --- canaries: fake secrets made at run time, never written into the scenario files ---------------

_ALNUM = string.ascii_letters + string.digits
_CANARY_SHAPES: dict[str, Callable[[random.Random], str]] = {
    "github_token": lambda r: "ghp_" + "".join(r.choice(_ALNUM) for _ in range(36)),
    "aws_access_key": lambda r: "AKIA" + "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
    "api_key": lambda r: "sk-" + "".join(r.choice(_ALNUM) for _ in range(48)),
}


def canary_value(scenario: Scenario, spec: CanarySpec) -> str:
    """A fake secret of the spec's shape, the same on every run of the scenario."""
    return _CANARY_SHAPES[spec.kind](random.Random(f"{scenario.name}:{spec.placeholder}:{spec.kind}"))


# --- running ---------------------------------------------------------------------------------------


class EvalWorkspace(Protocol):
    """One fresh, versioned workspace, with the model already chosen."""

    def consolidate(self, sessions: Sequence[Path]) -> dict[str, Any]:
        """Consolidate these session files regardless of budget; the consolidation report."""
        ...

    def dream(self) -> dict[str, Any]:
        """One Dream run; the Dream report."""
        ...


OpenWorkspace = Callable[[Path], EvalWorkspace]


@dataclass
class Item:
    check: str
    subject: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "subject": self.subject, "passed": self.passed, "detail": self.detail}


@dataclass
class Run:
    date: str
    step: str  # consolidate | dream
    status: str
    detail: str = ""
    tokens: int = 0
    commits: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "step": self.step,
            "status": self.status,
            "detail": self.detail,
            "tokens": self.tokens,
            "commits": self.commits,
            "errors": self.errors,
        }


@dataclass
class ScenarioResult:
    scenario: Scenario
    items: list[Item] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    baseline: list[Item] = field(default_factory=list)  # what a model that stores nothing scores
    workspace: Path | None = None
    duration_s: float = 0.0

    def counts(self, check: str) -> tuple[int, int]:
        mine = [i for i in self.items if i.check == check]
        return sum(1 for i in mine if i.passed), len(mine)

    @property
    def passed_items(self) -> int:
        return sum(1 for i in self.items if i.passed)

    @property
    def score(self) -> float:
        return self.passed_items / len(self.items) if self.items else 0.0

    @property
    def baseline_passed(self) -> int:
        return sum(1 for i in self.baseline if i.passed)

    @property
    def failed_required(self) -> list[str]:
        return [c for c in self.scenario.required if (n := self.counts(c))[0] != n[1]]

    @property
    def passed(self) -> bool:
        # Compared on integers so that a threshold of exactly p/q is met by p/q passed items.
        needed = self.scenario.threshold * len(self.items) - 1e-9
        return bool(self.items) and self.passed_items >= needed and not self.failed_required

    def to_json(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "name": s.name,
            "title": s.title,
            "threshold": s.threshold,
            "required": list(s.required),
            "passed": self.passed,
            "score": {"passed": self.passed_items, "total": len(self.items), "share": round(self.score, 4)},
            "baseline": _score(self.baseline_passed, len(self.baseline)),
            "above_baseline": self.passed_items - self.baseline_passed,
            "checks": [
                {"check": c, "title": t, "passed": self.counts(c)[0], "total": self.counts(c)[1]} for c, t in CHECKS
            ],
            "failed_required": self.failed_required,
            "items": [i.to_json() for i in self.items],
            "runs": [r.to_json() for r in self.runs],
            "tokens": sum(r.tokens for r in self.runs),
            "workspace": str(self.workspace) if self.workspace is not None else None,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class EvalReport:
    model: str
    results: list[ScenarioResult]
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def status(self) -> str:
        return "ok" if self.passed else "failed"

    @property
    def exit_code(self) -> int:
        from dream_memory.app.outcome import exit_code

        return exit_code(self)

    def to_json(self) -> dict[str, Any]:
        passed = sum(r.passed_items for r in self.results)
        total = sum(len(r.items) for r in self.results)
        baseline = sum(r.baseline_passed for r in self.results)
        return {
            "model": self.model,
            "passed": self.passed,
            "score": {"passed": passed, "total": total, "share": round(passed / total, 4) if total else 0.0},
            "baseline": _score(baseline, total),
            "scenarios": [r.to_json() for r in self.results],
            "tokens": sum(r.to_json()["tokens"] for r in self.results),
            "duration_s": round(self.duration_s, 3),
        }

    def table(self, *, details: bool = True) -> str:
        """The score table: one column per scenario, one row per check (deterministic text)."""
        names = [r.scenario.name for r in self.results]
        width = max(len(t) for _, t in CHECKS)
        cols = [max(len(n), 7) for n in names]
        head = f"{'check':<{width}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, cols, strict=True))
        lines = [f"dream eval: model {self.model}, {len(self.results)} scenario(s)", "", head, "-" * len(head)]
        for check, title in CHECKS:
            cells = []
            for result, w in zip(self.results, cols, strict=True):
                got, total = result.counts(check)
                mark = "" if got == total else "!"
                cells.append(f"{mark}{got}/{total}".rjust(w) if total else "-".rjust(w))
            lines.append(f"{title:<{width}}  " + "  ".join(cells))
        lines.append("-" * len(head))
        score_cells = [f"{r.passed_items}/{len(r.items)}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'score':<{width}}  " + "  ".join(score_cells))
        base = [f"{r.baseline_passed}/{len(r.items)}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'do-nothing baseline':<{width}}  " + "  ".join(base))
        need = [f"{r.scenario.threshold:.0%}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'threshold':<{width}}  " + "  ".join(need))
        verdict = [("PASS" if r.passed else "FAIL").rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'result':<{width}}  " + "  ".join(verdict))
        if details:
            failures = [(r.scenario.name, i) for r in self.results for i in r.items if not i.passed]
            if failures:
                lines += ["", "failed items:"]
                lines += [f"  {name}: {i.check}: {i.subject}: {i.detail}" for name, i in failures]
            for r in self.results:
                if r.failed_required:
                    lines.append(f"  {r.scenario.name}: required check(s) not met: {', '.join(r.failed_required)}")
        lines += ["", f"overall: {'PASS' if self.passed else 'FAIL'}"]
        return "\n".join(lines)


def _score(passed: int, total: int) -> dict[str, Any]:
    return {"passed": passed, "total": total, "share": round(passed / total, 4) if total else 0.0}


def run_evaluation(
    scenarios: Sequence[Scenario],
    open_workspace: OpenWorkspace,
    *,
    model: str,
    base: Path,
    log: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
) -> EvalReport:
    """Run every scenario in its own workspace under ``base`` and check the memory it leaves."""
    started = clock()
    results = []
    for scenario in scenarios:
        began = clock()
        result = run_scenario(scenario, open_workspace, base / scenario.name, log=log)
        result.duration_s = clock() - began
        results.append(result)
    return EvalReport(model=model, results=results, duration_s=clock() - started)


def _install_session(scenario: Scenario, name: str, target: Path, secrets: dict[str, str]) -> Path:
    text = (scenario.folder / SESSIONS_FOLDER / name).read_text(encoding="utf-8")
    for placeholder, value in secrets.items():
        # The text is JSON: the value is inserted as JSON string content.
        text = text.replace(placeholder, json.dumps(value)[1:-1])
    path = target / layout.SESSIONS_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run_scenario(
    scenario: Scenario, open_workspace: OpenWorkspace, root: Path, *, log: Callable[[str], None] = lambda m: None
) -> ScenarioResult:
    if root.exists():
        shutil.rmtree(root)
    result = ScenarioResult(scenario=scenario, workspace=root)
    secrets = {spec.placeholder: canary_value(scenario, spec) for spec in scenario.canaries}
    workspace = open_workspace(root)
    for day in scenario.days:
        paths = [_install_session(scenario, name, root, secrets) for name in day.sessions]
        consolidated = workspace.consolidate(paths)
        entries = sum(len(s.get("entries", [])) for s in consolidated.get("sessions", []))
        result.runs.append(
            Run(
                date=day.date,
                step="consolidate",
                status=str(consolidated.get("status")),
                detail=f"{entries} history entr{'y' if entries == 1 else 'ies'}",
                tokens=int(consolidated.get("usage", {}).get("total_tokens") or 0),
                errors=[str(e) for e in consolidated.get("errors", [])],
            )
        )
        dreamt = workspace.dream()
        held = [f"held {h.get('id')}: {h.get('reason')}" for h in dreamt.get("held", [])]
        aside = [f"set aside {s.get('cursor_from')}..{s.get('cursor_to')}" for s in dreamt.get("set_aside", [])]
        # A failed batch says what it did get: phase-1 facts, tool calls, time (a model that
        # found facts and could not edit is not the same as one that found nothing).
        aside += [
            f"batch {b.get('cursor_from')}..{b.get('cursor_to')} {b.get('outcome')}: {b.get('facts')} fact(s), "
            f"{b.get('tool_calls')} tool call(s), {b.get('duration_s')} s"
            for b in dreamt.get("batches", [])
            if b.get("outcome") in ("failed", "set_aside")
        ]
        result.runs.append(
            Run(
                date=day.date,
                step="dream",
                status=str(dreamt.get("status")),
                detail=f"{dreamt.get('entries_processed', 0)} entries",
                tokens=int(dreamt.get("usage", {}).get("total_tokens") or 0),
                commits=len(dreamt.get("commits", [])),
                errors=[str(e) for e in dreamt.get("errors", [])] + held + aside,
            )
        )
        last = result.runs[-2:]
        log(
            f"{scenario.name} {day.date}: consolidate {last[0].status} ({last[0].detail}), "
            f"dream {last[1].status} ({last[1].detail}, {last[1].commits} commit(s))"
        )
    result.items = check_workspace(scenario, root, result.runs, secrets)
    result.baseline = baseline_items(scenario, result.runs, secrets)
    return result


# --- checking --------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.casefold()).strip()


def _contains(text: str, value: str) -> bool:
    return _norm(value) in _norm(text)


def memory_files(root: Path) -> dict[str, str]:
    """Workspace-relative path -> text of every memory content file on disk (tracked, not Dream's own)."""
    found: dict[str, str] = {}
    for top in layout.tracked_roots():
        start = root / top
        candidates = [start] if start.is_file() else sorted(start.rglob("*")) if start.is_dir() else []
        for path in candidates:
            rel = path.relative_to(root).as_posix()
            if path.is_file() and layout.is_content(rel):
                found[rel] = path.read_text(encoding="utf-8", errors="replace")
    return found


@dataclass
class GitHistory:
    """Every version of every memory file in any commit, and every commit message."""

    memory_versions: list[tuple[str, str, str]]  # (commit, path, text) for content files
    all_blobs: list[tuple[str, str, bytes]]  # (commit, path, data) for every file
    messages: list[tuple[str, str]]  # (commit, message)

    @classmethod
    def read(cls, root: Path) -> GitHistory:
        from dream_memory.adapters.clock import SystemClock
        from dream_memory.adapters.git import GitStore
        from dream_memory.settings import DEFAULT_GIT_AUTHOR

        git = GitStore.open(root, author=DEFAULT_GIT_AUTHOR, clock=SystemClock(), create=False)
        history = cls([], [], [])
        if git is None:
            return history
        with git:
            seen: set[bytes] = set()
            for sha in git.all_commits():
                info = git.info(sha, with_files=False)
                history.messages.append((sha, info.message))
                for rel, (_mode, blob) in git.files_at(sha).items():
                    if blob in seen:
                        continue
                    seen.add(blob)
                    data = git.blob(blob)
                    history.all_blobs.append((sha, rel, data))
                    if layout.is_content(rel):
                        history.memory_versions.append((sha, rel, data.decode("utf-8", errors="replace")))
        return history

    def first_with(self, value: str) -> tuple[str, str] | None:
        for sha, rel, text in self.memory_versions:
            if _contains(text, value):
                return sha, rel
        return None

    def leaks(self, value: str) -> Iterator[str]:
        raw = value.encode("utf-8")
        for sha, rel, data in self.all_blobs:
            if raw in data:
                yield f"{rel} in commit {sha[:12]}"
        for sha, message in self.messages:
            if value in message:
                yield f"the message of commit {sha[:12]}"


def _lines_with(files: dict[str, str], value: str) -> list[str]:
    return [
        f"{rel}:{n}"
        for rel, text in files.items()
        for n, line in enumerate(text.splitlines(), 1)
        if _contains(line, value)
    ]


def _where(files: dict[str, str], value: str) -> list[str]:
    return [rel for rel, text in files.items() if _contains(text, value)]


def check_workspace(scenario: Scenario, root: Path, runs: Sequence[Run], secrets: dict[str, str]) -> list[Item]:
    """The checks of the module docstring, one Item per (check, subject)."""
    stored = {rel: (root / rel).read_text(encoding="utf-8", errors="replace") for rel in _stored_history_files(root)}
    return check_memory(scenario, memory_files(root), GitHistory.read(root), runs, secrets, stored)


def _template_files() -> dict[str, str]:
    base = resources.files("dream_memory") / "data" / "templates"
    return {rel: (base / rel).read_text(encoding="utf-8") for rel in FILES if (base / rel).is_file()}


def baseline_items(scenario: Scenario, runs: Sequence[Run], secrets: dict[str, str]) -> list[Item]:
    """The score of a model that keeps nothing: every run finished and memory is the templates.

    Shown beside each score: a model that stores nothing still passes "noise left out",
    "superseded values gone" and "no secret", so a raw score alone cannot tell "kept nothing"
    from "kept half" (Qwen2.5-Coder-1.5B scored exactly this baseline on `personal`).
    """
    templates = _template_files()
    history = GitHistory([("init", rel, text) for rel, text in templates.items()], [], [("init", "memory: init")])
    finished = [Run(r.date, r.step, "ok") for r in runs]
    return check_memory(scenario, templates, history, finished, secrets, {})


def check_memory(
    scenario: Scenario,
    files: dict[str, str],
    history: GitHistory,
    runs: Sequence[Run],
    secrets: dict[str, str],
    stored: dict[str, str],
) -> list[Item]:
    """The checks on memory as given: its files, its git history, the runs, stored history texts."""
    items: list[Item] = []
    for run in runs:
        # A consolidation that reports errors fell back to archiving raw (the model failed); a Dream
        # run that held or set a batch aside left its facts out of memory.
        ok = run.status in _FINISHED[run.step] and not run.errors
        detail = "" if ok else f"status {run.status}" + (f": {'; '.join(run.errors)}" if run.errors else "")
        items.append(Item("runs", f"{run.date} {run.step}", ok, detail))
    for q in scenario.questions:
        if q.kind == "deletion":
            continue
        shown = " or ".join(repr(a) for a in q.answers)
        found = [a for a in q.answers if _where(files, a)]
        where = sorted({rel for a in q.answers for rel in _where(files, a)})
        items.append(Item("kept", q.id, bool(found), "" if found else f"{shown} is in no memory file"))
        in_file = q.file is not None and any(_contains(files.get(q.file, ""), a) for a in q.answers)
        detail = "" if in_file else f"{shown} belongs in {q.file}" + (f", found in {', '.join(where)}" if where else "")
        items.append(Item("right_file", q.id, in_file, detail))
        lines = sorted({line for a in q.answers for line in _lines_with(files, a)})
        once = len(lines) == 1
        items.append(
            Item("no_duplicates", q.id, once, "" if once else f"{shown} is on {len(lines)} lines: {', '.join(lines)}")
        )
    for q in scenario.questions:
        for value in q.gone:
            subject = f"{q.id}: {value}"
            left = _where(files, value)
            items.append(Item("superseded_gone", subject, not left, f"still in {', '.join(left)}" if left else ""))
            seen = history.first_with(value)
            items.append(
                Item(
                    "superseded_in_history",
                    subject,
                    seen is not None,
                    "" if seen else "never committed: it was not remembered before it changed",
                )
            )
    for marker in scenario.noise:
        left = _where(files, marker)
        items.append(Item("noise_left_out", marker, not left, f"found in {', '.join(left)}" if left else ""))
    for spec in scenario.canaries:
        value = secrets[spec.placeholder]
        leaks = list(history.leaks(value))
        leaks += [f"{rel} (on disk)" for rel, text in files.items() if value in text]
        leaks += [f"{rel} (not versioned)" for rel, text in stored.items() if value in text]
        subject = f"{spec.kind} canary"
        items.append(Item("no_secret", subject, not leaks, f"the value is in {', '.join(leaks)}" if leaks else ""))
    return items


def _stored_history_files(root: Path) -> list[str]:
    rels = [layout.HISTORY] if (root / layout.HISTORY).is_file() else []
    archive = root / layout.ARCHIVE_DIR
    if archive.is_dir():
        rels += sorted(p.relative_to(root).as_posix() for p in archive.rglob("*") if p.is_file())
    return rels
