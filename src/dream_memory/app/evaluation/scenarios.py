"""The evaluation's scenarios: ``data/eval/scenarios/<name>/scenario.json`` read and validated
(one reader per section: days, questions, canaries), and the fake secrets they plant."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dream_memory.adapters import eval_files
from dream_memory.core import layout
from dream_memory.core.scopes import is_private_file
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
    ("provenance_coverage", "Dream lines that resolve to a history entry"),
    ("provenance_precision", "cited entries that hold the line's key words"),
    ("scope_kept", "private facts kept in their own scope"),
    ("scope_isolation", "no private canary reaches another scope"),
    ("purge", "a purged value left nowhere"),
)
CHECK_IDS = tuple(c for c, _ in CHECKS)
QUESTION_KINDS = ("fact", "preference", "update", "deletion")
FILES = (layout.USER, layout.SOUL, layout.MEMORY)


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
class ScopeReader:
    """One private scope of a scope scenario: its name, a session key of it, its planted canaries."""

    scope: str
    session_key: str
    canaries: tuple[CanarySpec, ...]


@dataclass(frozen=True)
class ScopeSpec:
    """A scope scenario's ``scopes``: the rules its workspace runs with, the private readers and
    their canaries, the words readers search for, and the canary ``dream forget --purge`` removes."""

    rules: dict[str, str]
    readers: tuple[ScopeReader, ...]
    queries: tuple[str, ...]
    purge: str | None = None  # a canary placeholder

    def canaries(self) -> list[tuple[ScopeReader, CanarySpec]]:
        return [(reader, spec) for reader in self.readers for spec in reader.canaries]


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
    scopes: ScopeSpec | None = None  # a scope scenario (docs/eval-scopes.md)


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
    data = _read_json(path)
    where = str(path)
    threshold = float(_need(data, "threshold", (int, float), where))
    if not 0 < threshold <= 1:
        raise InputError(f"{where}: 'threshold' must be a share in (0, 1], not {threshold}")
    required = tuple(data.get("required", []))
    unknown = [c for c in required if c not in CHECK_IDS]
    if unknown:
        raise InputError(f"{where}: unknown required check(s) {unknown}; known: {', '.join(CHECK_IDS)}")
    days = [_day(folder, raw, f"{where} days[{i}]") for i, raw in enumerate(_need(data, "days", list, where))]
    questions = [
        _question(raw, f"{where} questions[{i}]") for i, raw in enumerate(_need(data, "questions", list, where))
    ]
    canaries = [_canary(raw, f"{where} canaries[{i}]") for i, raw in enumerate(data.get("canaries", []))]
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
        scopes=_scopes(data["scopes"], f"{where} scopes") if "scopes" in data else None,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(eval_files.read_text(path))
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _day(folder: Path, raw: dict[str, Any], at: str) -> Day:
    sessions = _strings(_need(raw, "sessions", list, at), at + " sessions")
    for name in sessions:
        if "/" in name or name.startswith(".") or not eval_files.is_file(folder / SESSIONS_FOLDER / name):
            raise InputError(f"{at}: session file {SESSIONS_FOLDER}/{name} does not exist in {folder}")
    return Day(date=str(_need(raw, "date", str, at)), sessions=sessions)


def _question(raw: dict[str, Any], at: str) -> Question:
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
        if target not in FILES and not is_private_file(target):
            raise InputError(
                f"{at}: file must be one of {', '.join(FILES)}, or a private scope's scopes/<...>/USER.md or MEMORY.md"
            )
        gone = _strings(raw["superseded"], at + " superseded") if kind == "update" else ()
        if kind == "update" and not gone:
            raise InputError(f"{at}: an update names the values it supersedes in 'superseded'")
    return Question(
        id=str(_need(raw, "id", str, at)),
        kind=kind,
        question=str(raw.get("question", "")),
        answers=answers,
        file=target,
        gone=gone,
    )


def _canary(raw: dict[str, Any], at: str) -> CanarySpec:
    kind = _need(raw, "kind", str, at)
    if kind not in _CANARY_SHAPES:
        raise InputError(f"{at}: unknown canary kind {kind!r}; known: {', '.join(sorted(_CANARY_SHAPES))}")
    return CanarySpec(placeholder=_need(raw, "placeholder", str, at), kind=kind)


def _scopes(raw: Any, at: str) -> ScopeSpec:
    """The ``scopes`` section: rules that parse, readers whose session key the rules map to
    their scope, canaries of a private kind, and a purge naming one of those canaries."""
    from dream_memory.core.scopes import SHARED, ScopeRules

    if not isinstance(raw, dict):
        raise InputError(f"{at}: expected an object")
    rules_raw = _need(raw, "rules", dict, at)
    try:
        rules = ScopeRules.parse(rules_raw)
    except ValueError as exc:
        raise InputError(f"{at} rules: {exc}") from exc
    readers: list[ScopeReader] = []
    for i, item in enumerate(_need(raw, "readers", list, at)):
        where = f"{at} readers[{i}]"
        scope, key = str(_need(item, "scope", str, where)), str(_need(item, "session_key", str, where))
        if scope == SHARED or rules.scope_of(key) != scope:
            raise InputError(f"{where}: the rules put session {key!r} in scope {rules.scope_of(key)!r}, not {scope!r}")
        specs = [_canary(c, f"{where} canaries[{j}]") for j, c in enumerate(_need(item, "canaries", list, where))]
        if not specs:
            raise InputError(f"{where}: a reader plants at least one canary")
        readers.append(ScopeReader(scope, key, tuple(specs)))
    if len(readers) < 2:
        raise InputError(f"{at}: a scope scenario needs two private readers at least")
    purge = raw.get("purge")
    planted = {spec.placeholder for reader in readers for spec in reader.canaries}
    if purge is not None and purge not in planted:
        raise InputError(f"{at}: purge {purge!r} is none of the readers' canaries")
    return ScopeSpec(dict(rules_raw), tuple(readers), _strings(_need(raw, "queries", list, at), at + " queries"), purge)


def load_scenarios(root: Path | None = None, names: Sequence[str] = ()) -> list[Scenario]:
    """Every scenario under ``root`` (default: the bundled set), by folder name; ``names`` picks some."""
    base = root if root is not None else builtin_scenarios_root()
    folders = eval_files.folders_with(base, SCENARIO_FILE)
    if folders is None:
        raise InputError(f"scenario folder {base} does not exist")
    scenarios = [load_scenario(f) for f in folders]
    if names:
        known = {s.name: s for s in scenarios}
        missing = [n for n in names if n not in known]
        if missing:
            raise InputError(f"no scenario named {', '.join(missing)} (known: {', '.join(sorted(known)) or 'none'})")
        scenarios = [known[n] for n in dict.fromkeys(names)]  # a name given twice runs once
    if not scenarios:
        raise InputError(f"no scenario ({SCENARIO_FILE}) found under {base}")
    return scenarios


# --- canaries: fake secrets made at run time, never written into the scenario files ---------------

_ALNUM = string.ascii_letters + string.digits
_WORDS = ("heron", "otter", "lark", "marten", "finch", "badger", "plover", "stoat")
_CANARY_SHAPES: dict[str, Callable[[random.Random], str]] = {
    "github_token": lambda r: "ghp_" + "".join(r.choice(_ALNUM) for _ in range(36)),
    "aws_access_key": lambda r: "AKIA" + "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
    "api_key": lambda r: "sk-" + "".join(r.choice(_ALNUM) for _ in range(48)),
    # A private detail, not a secret (the secret guard keeps it): a word and four digits, which
    # appear nowhere else, so finding it anywhere means it came from its scope.
    "private_code": lambda r: r.choice(_WORDS) + "-" + "".join(r.choice(string.digits) for _ in range(4)),
}


def canary_value(scenario: Scenario, spec: CanarySpec) -> str:
    """A fake secret of the spec's shape, the same on every run of the scenario."""
    return _CANARY_SHAPES[spec.kind](random.Random(f"{scenario.name}:{spec.placeholder}:{spec.kind}"))
