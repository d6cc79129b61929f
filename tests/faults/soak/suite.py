"""The fault soak: crash, starve and confuse dream-memory on purpose, then check what must hold.

    .venv/bin/python tests/faults/soak/run.py --trials 300 --seed 1 [--json | --markdown] [--kinds ...]

Every trial builds a small workspace in a temp folder, injects faults (a SIGKILL at a write site
or after a random delay, appenders racing Dream and compaction, a full disk at a write site, a
model that answers garbage, nothing, half an answer, too late or with broken tool calls, random
input files), then runs the next normal command (the "recovery run") and checks the invariants
of ``dream_memory.testing.invariants``: git fsck clean, every appended entry exactly once, the
cursor never ahead of the committed memory, memory equal to a committed state, no recovery
committed as hand edits, nothing secret-shaped in any commit. A trial whose checks fail is a
violation; the suite exits 1 when there is any.

Faults are placed through the package's injector (``dream_memory.testing.faults``: every durable
write of the package passes ``fsutil.set_fault_injector``) and, for git's own lock files, at the moment dulwich holds them (the lock written, not
yet renamed). Crashes are real: a forked process SIGKILLs itself (or is killed) mid-operation.
The figures (trials, faults, checks, violations per kind) depend only on ``--seed`` and
``--trials``; wall times do not and are reported apart.

Known bugs (``KNOWN_BUGS``) are product defects already reported with a failing test in
tests/faults/test_found_bugs.py: their checks are counted under "known" instead of
"violations" until they are fixed (``--strict`` counts them as violations). Remove an entry once
its test passes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import string
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_memory.core import layout
from dream_memory.testing.faults import Injector, at_write, disk_full, fault_hook, kill_self, trace_writes
from dream_memory.testing.invariants import (
    INVARIANTS,
    Violation,
    check_git_fsck,
    check_memory_committed,
    check_workspace,
    head_sha,
    read_blob,
    read_ledger,
    tree_blobs,
)
from dream_memory.testing.invariants import git as git_cli
from soak.ops import Ops

if TYPE_CHECKING:
    from dream_memory.core.chat import ChatReply, Message, ToolSpec

DEFAULT_SEED = 1
HTTP_TRIALS = 20  # through litellm and the scripted server (at 200 trials and more)


# --- known bugs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownBug:
    summary: str
    test: str


# Open product bugs the suite can run into, each with its failing test (xfail, strict) in
# tests/faults/test_found_bugs.py. The bugs it found and that are fixed keep their tests there
# (docs/reliability.md lists both).
KNOWN_BUGS: dict[str, KnownBug] = {}

# Write sites (fault_hook's names) left out of the kill rotation while a known bug makes any kill
# there fail the same way: site -> bug id in KNOWN_BUGS.
SITE_BUGS: dict[str, str] = {}


def site_bug(site: str, path: str) -> str | None:
    """The known bug a fault at this write would only find again (such writes leave the rotation
    of kill sites while it is open)."""
    return SITE_BUGS.get(site)


# --- results -------------------------------------------------------------------------------------


@dataclass
class TrialOutcome:
    kind: str
    index: int
    detail: str = ""
    faults: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    seconds: float = 0.0
    folder: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "detail": self.detail,
            "faults": self.faults,
            "checks": self.checks,
            "violations": self.violations,
            "known": self.known,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Injected:
    """What a trial injected: how many faults, and a short description."""

    faults: int
    detail: str


class Checks:
    """Counts checks and collects violations (or known-bug observations) for one trial."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.count = 0
        self.violations: list[str] = []
        self.known: list[str] = []

    def allows(self, bug: str | None) -> bool:
        return bug is not None and bug in KNOWN_BUGS and not self.strict

    def expect(self, ok: bool, invariant: str, detail: str, *, known: str | None = None) -> bool:
        self.count += 1
        if ok:
            return True
        if self.allows(known):
            self.known.append(f"{known}: {invariant}: {detail}")
        else:
            self.violations.append(f"{invariant}: {detail}")
        return False

    def add(
        self, stage: str, problems: Sequence[Violation], *, checks: int, known: Mapping[str, str] | None = None
    ) -> None:
        self.count += checks
        for problem in problems:
            bug = (known or {}).get(problem.invariant)
            if self.allows(bug):
                self.known.append(f"{bug}: {stage}: {problem}")
            else:
                self.violations.append(f"{stage}: {problem}")

    def workspace(self, stage: str, root: Path, *, known: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        """Every invariant of ``check_workspace`` for ``root``."""
        self.add(stage, check_workspace(root, **kwargs), checks=len(INVARIANTS), known=known)

    def attempt(
        self, stage: str, call: Callable[[], Any], *, known: str | None = None, counted: bool = True
    ) -> tuple[Any, BaseException | None]:
        """Run ``call``: a result or one of the package's errors is fine; anything else is a
        violation ("error_kind": the user would see a traceback, not a message)."""
        from dream_memory.errors import DreamError

        self.count += counted
        try:
            return call(), None
        except DreamError as exc:
            return None, exc
        except Exception as exc:
            detail = f"{stage} raised {type(exc).__name__}: {_short(str(exc))}"
            if self.allows(known):
                self.known.append(f"{known}: error_kind: {detail}")
            else:
                self.violations.append(f"error_kind: {detail}")
            return None, exc


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class ChildResult:
    killed: bool
    exit_code: int | None
    messages: list[str]
    error: str


@dataclass
class Child:
    pid: int
    read_fd: int
    log: Path | None
    status: int | None = None

    def kill(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def running(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = status
        return self.status is None

    def wait(self) -> ChildResult:
        chunks = []
        while True:
            chunk = os.read(self.read_fd, 64 * 1024)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(self.read_fd)
        status = self.status
        if status is None:
            _, status = os.waitpid(self.pid, 0)
            self.status = status
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        error = ""
        if code == 3 and self.log is not None and self.log.is_file():
            lines = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            error = _short(lines[-1]) if lines else ""
        text = b"".join(chunks).decode("utf-8", "replace")
        return ChildResult(killed, code, [line for line in text.split("\n") if line], error)


def start_child(
    target: Callable[[Callable[[str], None]], Any],
    *,
    kill_at: int | None = None,
    log: Path | None = None,
) -> Child:
    """Fork a process running ``target(say)``; it SIGKILLs itself just before its ``kill_at``-th
    write (0-based, counting every site of ``fault_hook``). ``say(text)`` sends a line to the
    parent ("about to append X", "appended X"). Fork only from the main thread of a process
    without other threads: the child would inherit locks held by them."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        code = 0
        try:
            if log is not None:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 2)
                os.close(fd)
            inject: Injector = (lambda site, path: None) if kill_at is None else at_write(kill_self, nth=kill_at + 1)

            def say(text: str) -> None:
                os.write(write_fd, (text.replace("\n", " ") + "\n").encode("utf-8", "surrogatepass"))

            with fault_hook(inject):
                target(say)
        except BaseException:
            code = 3
            with contextlib.suppress(BaseException):
                os.write(2, traceback.format_exc().encode("utf-8", "replace"))
        finally:
            os._exit(code)
    os.close(write_fd)
    return Child(pid, read_fd, log)


def run_in_child(
    target: Callable[[Callable[[str], None]], Any],
    *,
    kill_at: int | None = None,
    delay: float | None = None,
    log: Path | None = None,
) -> ChildResult:
    """``start_child`` and wait for it; with ``delay``, the parent SIGKILLs it after that long."""
    child = start_child(target, kill_at=kill_at, log=log)
    if delay is not None:
        time.sleep(delay)
        child.kill()
    return child.wait()


# --- the trial context -----------------------------------------------------------------------------


@dataclass
class Trial:
    """What a trial function gets: its seeded RNG, its own folder, its checks and the suite."""

    kind: str
    index: int
    rng: random.Random
    folder: Path
    checks: Checks
    suite: Suite

    @property
    def tag(self) -> str:
        """A short token unique to the trial, so its entries are recognisable everywhere."""
        return f"q{self.index}{self.kind[:2]}"

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.suite.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def ops(self, root: Path, config: Path | None = None) -> Ops:
        return Ops(root, self.env(), config)

    def copy(self, source: Path, name: str) -> Path:
        target = self.folder / name
        shutil.copytree(source, target, symlinks=True)
        return target

    def choose_site(self, sites: Sequence[tuple[str, str]]) -> int:
        """A write to fault, uniformly among the sites not excluded for a known bug."""
        allowed = [i for i, (site, path) in enumerate(sites) if not self.checks.allows(site_bug(site, path))]
        return self.rng.choice(allowed)


# --- workspaces for the trials ----------------------------------------------------------------------

_WORDS = ("dark mode", "tabs", "short answers", "PostgreSQL", "pytest", "vim", "UTC", "French", "ruff", "nix")


def fact(tag: str, i: int, rng: random.Random) -> str:
    """A history entry the offline engine keeps, recognisable by its token ``<tag>x<i>``."""
    word = rng.choice(_WORDS)
    shapes = (
        f"- [durable] User prefers {word} for task {tag}x{i}.",
        f"- Decided to use {word} for project {tag}x{i}.",
        f"- Solution: pin {word} to fix bug {tag}x{i}.",
        f"- [durable] User works as engineer on team {tag}x{i}.",
    )
    return rng.choice(shapes)


def filler(tag: str, i: int, rng: random.Random) -> str:
    """An entry with nothing to keep."""
    return rng.choice(
        (
            f"- nothing to keep here ({tag}y{i})",
            f"- [ephemeral] ran the tests once ({tag}y{i})",
            f"- chatted about the weather {tag}y{i}",
        )
    )


def history_texts(tag: str, n: int, rng: random.Random) -> list[str]:
    return [fact(tag, i, rng) if rng.random() < 0.75 else filler(tag, i, rng) for i in range(1, n + 1)]


def build(root: Path, texts: Sequence[str], **kwargs: Any) -> Path:
    from dream_memory.testing.workspace import build_workspace

    return build_workspace(root, history=texts, **kwargs)


def session_messages(tag: str, turns: int, rng: random.Random, start: int = 0) -> list[dict[str, Any]]:
    """Turns of a session: user asks, maybe a tool call and its result, assistant answers."""
    messages: list[dict[str, Any]] = []
    for k in range(start, start + turns):
        stamp = f"2026-04-03T10:{k % 60:02d}:00"
        word = rng.choice(_WORDS)
        messages.append({"role": "user", "content": f"I prefer {word} for item {tag}s{k}.", "timestamp": stamp})
        if rng.random() < 0.4:
            call = f"call-{tag}-{k}"
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": call, "type": "function", "function": {"name": "exec", "arguments": "{}"}}],
                    "timestamp": stamp,
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call, "name": "exec", "content": f"ok {k}", "timestamp": stamp}
            )
        messages.append(
            {"role": "assistant", "content": f"Noted: the user prefers {word} ({tag}s{k}).", "timestamp": stamp}
        )
    return messages


def write_dream_config(root: Path, **dream: Any) -> Path:
    path = root / layout.WORKSPACE_CONFIG
    path.write_text(json.dumps({"agents": {"defaults": {"dream": dream}}}), encoding="utf-8")
    return path


def content_files(root: Path) -> dict[str, bytes]:
    """Versioned memory files other than Dream's bookkeeping, as on disk."""
    from dream_memory.testing.invariants import versioned_on_disk

    return {rel: data for rel, data in versioned_on_disk(root).items() if layout.is_content(rel)}


def dream_cursor(root: Path) -> int:
    path = root / layout.DREAM_CURSOR
    text = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    return int(text) if text.isdigit() else 0


def committed_text(root: Path) -> str:
    """Every content file of HEAD, joined (to look for facts)."""
    blobs = tree_blobs(root, head_sha(root))
    return "\n".join(
        read_blob(root, sha).decode("utf-8", "replace") for rel, sha in blobs.items() if layout.is_content(rel)
    )


def _compare_files(checks: Checks, got: Mapping[str, bytes], want: Mapping[str, bytes], what: str) -> None:
    differing = sorted(p for p in set(got) | set(want) if got.get(p) != want.get(p))
    checks.expect(not differing, "same_as_uninterrupted", f"{what}: {', '.join(differing[:4])} differ(s)")


def _history_pairs(root: Path) -> Counter[tuple[str, str | None]]:
    return Counter((e.content, e.session_key) for e in read_ledger(root).entries)


# --- trial kinds: SIGKILL at a write site ---------------------------------------------------------------


def trial_sigkill_append(trial: Trial) -> Injected:
    """`dream append` killed at a random write (history line, .cursor, cleanup)."""
    rng, tag = trial.rng, trial.tag
    existing = history_texts(tag + "e", rng.randint(0, 4), rng)
    texts = [f"- appended {tag}a{i}: {rng.choice(_WORDS)}" for i in range(rng.randint(2, 6))]
    template = build(trial.folder / "template", existing, cursor=len(existing) or None)

    def appends(root: Path) -> Callable[[Callable[[str], None]], None]:
        def run(say: Callable[[str], None]) -> None:
            ops = trial.ops(root)
            for i, text in enumerate(texts):
                say(f"B{i}")
                ops.append(text)
                say(f"A{i}")

        return run

    reference = trial.copy(template, "reference")
    sites, _ = trace_writes(lambda: appends(reference)(lambda text: None))
    k = trial.choose_site(sites)
    ws = trial.copy(template, "ws")
    child = run_in_child(appends(ws), kill_at=k, log=trial.folder / "child.log")
    trial.checks.expect(child.killed, "fault_landed", f"the append was not killed at write {k} ({child.error})")
    done = {int(m[1:]) for m in child.messages if m.startswith("A")}
    begun = {int(m[1:]) for m in child.messages if m.startswith("B")}
    sure = existing + [texts[i] for i in sorted(done)]
    maybe = [texts[i] for i in sorted(begun - done)]
    trial.checks.workspace("after kill", ws, appended=sure, maybe=maybe, settled=False)
    extra = f"- appended {tag}z: the recovery run"
    trial.checks.attempt("recovery append", lambda: trial.ops(ws).append(extra))
    trial.checks.workspace("after recovery", ws, appended=[*sure, extra], maybe=maybe)
    return Injected(1, f"SIGKILL before write {k} ({sites[k][0]}) of {len(texts)} appends")


def trial_sigkill_compact(trial: Trial) -> Injected:
    """Compaction (as Dream runs it after a batch) killed at a random write."""
    rng, tag = trial.rng, trial.tag
    n = rng.randint(12, 40)
    texts = [f"- entry {tag}c{i}" for i in range(1, n + 1)]
    consumed = rng.randint(max(1, n // 3), n)
    limit = rng.randint(3, min(12, n - 1))
    template = build(trial.folder / "template", texts, dream_cursor=consumed, cursor=n)
    junk = ['{"time": "2026-05-07T21:01:19", "user": "hi"}', '{"cursor": 3, "content": "torn li']
    with_junk = rng.random() < 0.5
    if with_junk:
        with (template / layout.HISTORY).open("a", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in junk)
    reference = trial.copy(template, "reference")
    sites, _ = trace_writes(lambda: trial.ops(reference).compact(dream_cursor=consumed, max_entries=limit))
    k = trial.choose_site(sites)
    ws = trial.copy(template, "ws")
    child = run_in_child(
        lambda say: trial.ops(ws).compact(dream_cursor=consumed, max_entries=limit),
        kill_at=k,
        log=trial.folder / "child.log",
    )
    trial.checks.expect(child.killed, "fault_landed", f"compaction was not killed at write {k} ({child.error})")
    foreign = junk if with_junk else []
    trial.checks.workspace("after kill", ws, appended=texts, foreign=foreign, settled=False)
    extra = f"- entry {tag}c-recovery"
    trial.checks.attempt("recovery append", lambda: trial.ops(ws).append(extra))
    trial.checks.attempt("recovery compaction", lambda: trial.ops(ws).compact(dream_cursor=consumed, max_entries=limit))
    trial.checks.workspace("after recovery", ws, appended=[*texts, extra], foreign=foreign)
    history = (ws / layout.HISTORY).read_text(encoding="utf-8")
    kept_lines = not with_junk or all(line in history.split("\n") for line in junk)
    trial.checks.expect(kept_lines, "lines_kept", "a foreign or malformed line left history.jsonl")
    moved = [e for e in read_ledger(ws).entries if e.cursor > consumed and e.source != layout.HISTORY]
    trial.checks.expect(
        not moved, "unconsumed_kept", f"{len(moved)} entries Dream had not consumed moved to the archive"
    )
    return Injected(1, f"SIGKILL before write {k} ({sites[k][0]}), {n} entries, {consumed} consumed, keep {limit}")


def trial_sigkill_consolidate(trial: Trial) -> Injected:
    """`dream consolidate` killed at a random write; the rerun must archive every slice once."""
    from dream_memory.testing.workspace import write_session

    rng, tag = trial.rng, trial.tag
    template = build(trial.folder / "template", history_texts(tag + "h", rng.randint(0, 3), rng))
    for s in range(rng.randint(1, 3)):
        write_session(template, f"cli:{tag}{s}", session_messages(f"{tag}{s}", rng.randint(2, 5), rng))
    reference = trial.copy(template, "reference")
    sites, _ = trace_writes(lambda: trial.ops(reference).consolidate())
    k = trial.choose_site(sites)
    ws = trial.copy(template, "ws")
    child = run_in_child(lambda say: trial.ops(ws).consolidate(), kill_at=k, log=trial.folder / "child.log")
    trial.checks.expect(child.killed, "fault_landed", f"consolidate was not killed at write {k} ({child.error})")
    wanted = _history_pairs(reference)
    trial.checks.workspace("after kill", ws, maybe=[c for c, _ in wanted], settled=False)
    trial.checks.attempt("recovery consolidate", lambda: trial.ops(ws).consolidate())
    got = _history_pairs(ws)
    extra, missing = sorted((got - wanted).elements())[:2], sorted((wanted - got).elements())[:2]
    trial.checks.expect(
        got == wanted,
        "history_exactly_once",
        f"history differs from an uninterrupted run: {extra} extra, {missing} missing",
    )
    trial.checks.workspace("after recovery", ws, appended=[c for c, _ in wanted])
    state = json.loads((ws / layout.CONSOLIDATION).read_text(encoding="utf-8"))
    ref_state = json.loads((reference / layout.CONSOLIDATION).read_text(encoding="utf-8"))
    progress = {k2: v.get("messages") for k2, v in state["sessions"].items()}
    trial.checks.expect(
        state.get("pending") is None, "consolidation_settled", "a pending slice is left after the rerun"
    )
    trial.checks.expect(
        progress == {k2: v.get("messages") for k2, v in ref_state["sessions"].items()},
        "consolidation_settled",
        "session progress differs from an uninterrupted run",
    )
    return Injected(1, f"SIGKILL before write {k} ({sites[k][0]}) of {len(sites)}")


def _dream_template(trial: Trial, name: str = "template") -> tuple[Path, list[str], int, Path | None]:
    rng, tag = trial.rng, trial.tag
    n = rng.randint(3, 14)
    texts = history_texts(tag, n, rng)
    root = build(trial.folder / name, texts)
    config = write_dream_config(root, maxHistoryEntries=10) if n > 10 else None
    return root, texts, rng.randint(1, 4), config


def trial_sigkill_dream(trial: Trial) -> Injected:
    """`dream run` killed at a random write: journal, ref, memory files, index, state, compaction."""
    template, texts, batch, config = _dream_template(trial)
    reference = trial.copy(template, "reference")
    sites, _ = trace_writes(lambda: trial.ops(reference, config and reference / config.name).dream(batch_size=batch))
    k = trial.choose_site(sites)
    ws = trial.copy(template, "ws")
    cfg = config and ws / config.name
    child = run_in_child(
        lambda say: trial.ops(ws, cfg).dream(batch_size=batch), kill_at=k, log=trial.folder / "child.log"
    )
    trial.checks.expect(child.killed, "fault_landed", f"dream was not killed at write {k} ({child.error})")
    trial.checks.workspace("after kill", ws, appended=texts, settled=False)
    trial.checks.attempt("recovery dream", lambda: trial.ops(ws, cfg).dream(batch_size=batch))
    trial.checks.workspace("after recovery", ws, appended=texts)
    _compare_files(trial.checks, content_files(ws), content_files(reference), "memory after the recovery run")
    trial.checks.expect(
        dream_cursor(ws) == dream_cursor(reference),
        "same_as_uninterrupted",
        f"cursor {dream_cursor(ws)} != {dream_cursor(reference)}",
    )
    return Injected(
        1, f"SIGKILL before write {k} ({sites[k][0]}) of {len(sites)}, {len(texts)} entries, batches of {batch}"
    )


def trial_sigkill_delay(trial: Trial) -> Injected:
    """A process killed after a random delay, wherever it is (dream, consolidate or appends)."""
    from dream_memory.testing.workspace import write_session

    rng, tag = trial.rng, trial.tag
    op = ("dream", "consolidate", "appends")[trial.index % 3]
    template, texts, batch, config = _dream_template(trial)
    if op == "consolidate":
        for s in range(2):
            write_session(template, f"cli:{tag}{s}", session_messages(f"{tag}{s}", rng.randint(2, 5), rng))
    extra = [f"- appended {tag}d{i}" for i in range(6)]

    def job(root: Path) -> Callable[[Callable[[str], None]], Any]:
        cfg = config and root / config.name

        def run(say: Callable[[str], None]) -> None:
            ops = trial.ops(root, cfg)
            if op == "dream":
                ops.dream(batch_size=batch)
            elif op == "consolidate":
                ops.consolidate()
            else:
                for i, text in enumerate(extra):
                    say(f"B{i}")
                    ops.append(text)
                    say(f"A{i}")
                    if i == 2:
                        ops.dream(batch_size=batch)

        return run

    reference = trial.copy(template, "reference")
    started = time.perf_counter()
    job(reference)(lambda text: None)
    duration = time.perf_counter() - started
    delay = rng.uniform(0.0, 1.0) * duration
    ws = trial.copy(template, "ws")
    child = run_in_child(job(ws), delay=delay, log=trial.folder / "child.log")
    done = {int(m[1:]) for m in child.messages if m.startswith("A")}
    begun = {int(m[1:]) for m in child.messages if m.startswith("B")}
    sure = texts + [extra[i] for i in sorted(done)]
    maybe = [extra[i] for i in sorted(begun - done)]
    if op == "consolidate":
        maybe += [c for c, _ in _history_pairs(reference) if c not in texts]
    trial.checks.workspace("after kill", ws, appended=sure, maybe=maybe, settled=False)
    cfg = config and ws / config.name
    stage = "recovery " + op
    if op == "consolidate":
        trial.checks.attempt(stage, lambda: trial.ops(ws, cfg).consolidate())
        trial.checks.expect(
            _history_pairs(ws) == _history_pairs(reference),
            "history_exactly_once",
            "consolidated history differs from an uninterrupted run",
        )
    else:
        trial.checks.attempt(stage, lambda: trial.ops(ws, cfg).dream(batch_size=batch))
    trial.checks.workspace("after recovery", ws, appended=sure, maybe=maybe)
    if op == "dream":
        _compare_files(trial.checks, content_files(ws), content_files(reference), "memory after the recovery run")
    return Injected(1, f"SIGKILL after a random delay of a {op} run")


# --- trial kinds: concurrency -------------------------------------------------------------------------------


def _appender(
    root: Path, texts: Sequence[str], pause: float, seed: int, env: dict[str, str]
) -> Callable[[Callable[[str], None]], None]:
    def run(say: Callable[[str], None]) -> None:
        rng = random.Random(seed)
        ops = Ops(root, env)
        for i, text in enumerate(texts):
            say(f"B{i}")
            ops.append(text)
            say(f"A{i}")
            time.sleep(rng.uniform(0, pause))

    return run


def _start_appenders(trial: Trial, root: Path, count: int, per: int) -> list[tuple[list[str], Child]]:
    """Fork ``count`` appender processes (from the main thread); returns (texts, child) pairs."""
    started = []
    for p in range(count):
        texts = [f"- [durable] User prefers tool {trial.tag}p{p}n{i} for job {i}." for i in range(per)]
        seed = trial.rng.randrange(2**31)
        child = start_child(_appender(root, texts, 0.03, seed, trial.env()), log=trial.folder / f"appender{p}.log")
        started.append((texts, child))
    return started


def _collect(checks: Checks, started: list[tuple[list[str], Child]]) -> tuple[list[str], list[str]]:
    sure: list[str] = []
    maybe: list[str] = []
    for texts, child in started:
        result = child.wait()
        done = {int(m[1:]) for m in result.messages if m.startswith("A")}
        begun = {int(m[1:]) for m in result.messages if m.startswith("B")}
        checks.expect(result.exit_code == 0, "appender_ok", f"an appender process failed: {result.error}")
        sure += [texts[i] for i in sorted(done)]
        maybe += [texts[i] for i in sorted(begun - done)]
    return sure, maybe


def trial_concurrent_dream(trial: Trial) -> Injected:
    """Appender processes write history while Dream runs (and compacts) again and again."""
    rng = trial.rng
    texts = history_texts(trial.tag, rng.randint(4, 10), rng)
    ws = build(trial.folder / "ws", texts)
    cfg = write_dream_config(ws, maxHistoryEntries=10)
    ops = trial.ops(ws, cfg)
    ops.init()
    count, per = rng.randint(2, 4), rng.randint(6, 14)
    started = _start_appenders(trial, ws, count, per)
    runs = 0
    while runs < 2 or any(child.running() for _, child in started):
        size = rng.randint(2, 6)
        trial.checks.attempt("dream during appends", functools.partial(ops.dream, batch_size=size), counted=False)
        runs += 1
        if runs > 40:
            break
    trial.checks.count += 1  # the runs above, as one check
    sure, maybe = _collect(trial.checks, started)
    trial.checks.attempt("final dream", ops.dream)
    appended = texts + sure
    trial.checks.workspace("after the appenders", ws, appended=appended, maybe=maybe)
    ledger = read_ledger(ws)
    top = max((e.cursor for e in ledger.entries), default=0)
    trial.checks.expect(dream_cursor(ws) == top, "all_consumed", f"dream cursor {dream_cursor(ws)}, last entry {top}")
    memory = committed_text(ws)
    missing = [t for t in sure if t.split("tool ")[1].split(" ")[0] not in memory]
    trial.checks.expect(
        not missing, "nothing_lost", f"{len(missing)} appended fact(s) never reached memory: {missing[:2]}"
    )
    return Injected(count * per, f"{count} appenders x {per} entries during {runs} Dream runs")


def trial_concurrent_compact(trial: Trial) -> Injected:
    """Appender processes write history while compaction rewrites it in a loop."""
    rng = trial.rng
    texts = [f"- entry {trial.tag}c{i}" for i in range(1, rng.randint(10, 30))]
    ws = build(trial.folder / "ws", texts, cursor=len(texts))
    ops = trial.ops(ws)
    count, per = rng.randint(2, 4), rng.randint(8, 20)
    started = _start_appenders(trial, ws, count, per)
    rounds = 0
    while any(child.running() for _, child in started) and rounds < 400:
        top = max((e.cursor for e in read_ledger(ws).entries), default=0)
        compact = functools.partial(ops.compact, dream_cursor=max(top - 3, 0), max_entries=5)
        trial.checks.attempt("compaction during appends", compact, counted=False)
        rounds += 1
    trial.checks.count += 1  # the loop above, as one check
    sure, maybe = _collect(trial.checks, started)
    trial.checks.attempt("final compaction", lambda: ops.compact(dream_cursor=10**9, max_entries=5))
    trial.checks.workspace("after the appenders", ws, appended=texts + sure, maybe=maybe)
    ledger = read_ledger(ws)
    cursors = [e.cursor for e in ledger.entries]
    trial.checks.expect(len(cursors) == len(set(cursors)), "history_exactly_once", "two entries share a cursor")
    return Injected(count * per, f"{count} appenders x {per} entries during compaction")


# --- trial kinds: a full disk ----------------------------------------------------------------------------------


DISK_FULL_OPS = ("append", "compact", "consolidate", "dream", "migrate", "init", "restore")
DISK_FULL_AFTER_MIGRATION = "- after the migration"


def _disk_full_template(op: str, root: Path, tag: str) -> Path:
    from dream_memory.testing.workspace import write_session

    rng = random.Random(f"disk-full:{op}")
    if op == "init":
        root.mkdir(parents=True)
        return root
    if op == "compact":
        return build(root, [f"- entry {tag}c{i}" for i in range(1, 25)], dream_cursor=20, cursor=24)
    if op == "consolidate":
        build(root, [])
        write_session(root, "cli:a", session_messages(f"{tag}a", 3, rng))
        write_session(root, "cli:b", session_messages(f"{tag}b", 2, rng))
        return root
    if op == "migrate":
        build(root, ["- [durable] User prefers tea."])
        (root / layout.LEGACY_HISTORY).write_text(
            f"[2026-03-09 21:04] Decided to use {tag} for the build\n\n[2026-03-10] User prefers short answers\n",
            encoding="utf-8",
        )
        return root
    texts = [fact(tag, i, rng) for i in range(1, 6)]
    build(root, texts)
    if op == "restore":
        Ops(root, {"HOME": str(root.parent)}).dream(batch_size=2)
    return root


def _disk_full_op(op: str, root: Path, ops_for: Callable[[Path], Ops]) -> Callable[[], Any]:
    ops = ops_for(root)
    if op == "append":
        return lambda: ops.append(DISK_FULL_APPENDED)
    if op == "compact":
        return lambda: ops.compact(dream_cursor=20, max_entries=8)
    if op == "consolidate":
        return ops.consolidate
    if op == "dream":
        return lambda: ops.dream(batch_size=2)
    if op == "migrate":
        return lambda: ops.append(DISK_FULL_AFTER_MIGRATION)
    if op == "init":
        return ops.init

    def restore() -> Any:
        # the template's latest Dream batch (restoring it again finds it already undone)
        log = git_cli(root, "log", "--format=%H %s").stdout.decode("utf-8").splitlines()
        target = next(line.split()[0] for line in log if line.split(" ", 1)[1].startswith("dream: 5.."))
        return ops.restore(target)

    return restore


DISK_FULL_APPENDED = "- [durable] User prefers the disk-full append."


def trial_disk_full(trial: Trial) -> Injected:
    """ENOSPC at one write site (every site of every operation in turn over the trials)."""
    pairs = trial.suite.disk_full_pairs()
    op, site = pairs[trial.index % len(pairs)]
    template = _disk_full_template(op, trial.folder / "template", "df")
    reference = trial.copy(template, "reference")
    sites, _ = trace_writes(_disk_full_op(op, reference, trial.ops))
    k = trial.rng.choice([i for i, (s, _) in enumerate(sites) if s == site])
    ws = trial.copy(template, "ws")
    with fault_hook(at_write(disk_full, nth=k + 1)):
        result, error = trial.checks.attempt(f"{op} on a full disk", _disk_full_op(op, ws, trial.ops))
    failed = error is not None or (isinstance(result, dict) and result.get("status") == "failed")
    # .cursor is only a floor for the next cursor: an append may succeed without rewriting it
    optional = site == "cursor.write"
    trial.checks.expect(failed or optional, "failure_reported", f"{op} with ENOSPC at {site} reported success")
    before = read_ledger(template).contents()
    wanted = read_ledger(reference).contents()
    new_text = {"append": DISK_FULL_APPENDED, "migrate": DISK_FULL_AFTER_MIGRATION}.get(op)
    landed = new_text is not None and new_text in read_ledger(ws).contents()
    if new_text is not None:
        trial.checks.expect(
            not (failed and landed),
            "failed_append_absent",
            f"{op} failed at {site} but its entry is stored",
        )
    maybe = [t for t in wanted if t not in before]
    trial.checks.workspace("after ENOSPC", ws, appended=before, maybe=maybe, settled=False)
    # The next run: the same command again (a caller retries what failed), or, when the failed
    # append is stored all the same, the next writing command.
    again = (lambda: trial.ops(ws).migrate()) if landed else _disk_full_op(op, ws, trial.ops)
    trial.checks.attempt(f"{op} again with space", again)
    trial.checks.workspace("after recovery", ws, appended=wanted)
    trial.checks.expect(
        _history_pairs(ws) == _history_pairs(reference),
        "same_as_uninterrupted",
        "history differs from an uninterrupted run",
    )
    _compare_files(trial.checks, content_files(ws), content_files(reference), "memory after the rerun")
    return Injected(1, f"ENOSPC at {op}:{site} (write {k} of {len(sites)})")


# --- trial kinds: a misbehaving model ------------------------------------------------------------------------

MODEL_FAULTS = (
    "garbage",
    "empty",
    "truncated",
    "error_text",
    "timeout",
    "tools_in_phase1",
    "bad_args",
    "loop",
    "secret_edit",
)


class FaultyModel:
    """A ChatModel that answers like the offline engine, except on the calls its plan names.

    ``plan`` maps a call number (0-based, over the model's whole life) to a fault; ``stubborn``
    makes every phase-1 call answer garbage (a batch that fails run after run). Every fault text
    carries ``marker``, which must never reach a commit."""

    def __init__(
        self,
        plan: Mapping[int, str],
        marker: str,
        secrets: Sequence[str],
        rng: random.Random,
        *,
        stubborn: bool = False,
    ):
        from dream_memory.adapters.offline import OfflineModel

        self.inner = OfflineModel()
        self.plan = dict(plan)
        self.marker = marker
        self.secrets = list(secrets)
        self.rng = rng
        self.stubborn = stubborn
        self.calls = 0
        self.injected = 0
        self.looping = False

    @property
    def name(self) -> str:
        return "faulty-offline"

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        from dream_memory.core.chat import ChatReply, ToolCall, Usage
        from dream_memory.errors import ModelError

        n = self.calls
        self.calls += 1
        if not tools:
            self.looping = False
        fault = self.plan.get(n)
        if self.stubborn and not tools:
            fault = "garbage"
        if self.looping and tools:
            self.injected += 1
            return ChatReply(
                None,
                (ToolCall(f"loop-{n}", "read_file", json.dumps({"path": layout.USER})),),
                "tool_calls",
                Usage(10, 5, 0.0, 1),
            )
        if fault is None:
            return self.inner.complete(messages, tools=tools, purpose=purpose)
        self.injected += 1
        usage = Usage(10, 5, 0.0, 1)
        m = self.marker
        if fault == "timeout":
            raise ModelError(f"model faulty-offline ({purpose}): timed out", kind="timeout", retryable=True)
        if fault == "garbage":
            return ChatReply(f"<html><body>{m} 502 upstream said no</body></html>", (), "stop", usage)
        if fault == "empty":
            return ChatReply("", (), "stop", usage)
        if fault == "truncated":
            return ChatReply(f"[USER] {m} prefers half a sen", (), "length", usage)
        if fault == "error_text":
            return ChatReply(f"Error: rate limit exceeded ({m})", (), "stop", usage)
        if fault == "tools_in_phase1" or not tools:
            call = ToolCall(f"t{n}", "write_file", json.dumps({"path": layout.USER, "content": m}))
            return ChatReply(None, (call,), "tool_calls", usage)
        if fault == "loop":
            self.looping = True
            return ChatReply(
                None, (ToolCall(f"loop-{n}", "read_file", json.dumps({"path": layout.USER})),), "tool_calls", usage
            )
        if fault == "secret_edit":
            body = "\n".join(f"- {s}" for s in self.secrets) or "- nothing"
            calls = (
                ToolCall(
                    f"s{n}a",
                    "write_file",
                    json.dumps({"path": f"entities/creds-{n}.md", "content": f"# Creds\n{body}\n"}),
                ),
                ToolCall(f"s{n}b", "write_file", json.dumps({"path": "observations.md", "content": f"- {body}\n"})),
            )
            return ChatReply(None, calls, "tool_calls", usage)
        return ChatReply(None, tuple(_bad_tool_calls(n, m, self.rng)), "tool_calls", usage)


def _bad_tool_calls(n: int, marker: str, rng: random.Random) -> list[Any]:
    from dream_memory.core.chat import ToolCall

    shapes = [
        ("edit_file", '{"path": "USER.md", "old_text": '),  # cut-off JSON
        ("edit_file", "[1, 2, 3]"),  # not an object
        ("edit_file", json.dumps({"path": 5, "old_text": None, "new_text": ["x"]})),
        ("write_file", json.dumps({"path": "memory/history.jsonl", "content": marker})),
        ("write_file", json.dumps({"path": "/etc/passwd", "content": marker})),
        ("edit_file", json.dumps({"path": "../../outside.md", "old_text": "", "new_text": marker})),
        ("delete_file", json.dumps({"path": "USER.md"})),
        ("edit_file", json.dumps({"path": "USER.md", "old_text": "#", "new_text": "#"})),
        ("edit_file", json.dumps({"path": "USER.md", "old_text": f"not there {marker}", "new_text": marker})),
        ("write_file", json.dumps({"path": "USER.md", "content": marker})),
        ("read_file", json.dumps({"path": "memory/.dream_cursor", "section": 7})),
        ("edit_file", json.dumps({"path": "memory/MEMORY.md", "old_text": "\n", "new_text": marker})),
        ("write_file", json.dumps({"path": "skills/" + "x" * 300 + "/SKILL.md", "content": marker})),
        ("edit_file", "{}"),
    ]
    picked = rng.sample(shapes, k=rng.randint(1, 4))
    return [ToolCall(f"bad-{n}-{i}", name, args) for i, (name, args) in enumerate(picked)]


def _secrets(count: int, rng: random.Random) -> list[Any]:
    from dream_memory.testing.canaries import CANARIES

    return rng.sample(CANARIES, k=count)


def trial_model_offline(trial: Trial) -> Injected:
    """A model (in-process) that answers garbage, nothing, half an answer, too late or with broken
    tool calls; three faulty runs, then one with a working model."""
    rng, tag = trial.rng, trial.tag
    canaries = _secrets(rng.randint(1, 3), rng)
    texts = history_texts(tag, rng.randint(3, 10), rng)
    texts += [f"- [durable] User noted: {c.text}" for c in canaries[:1]]
    ws = build(trial.folder / "ws", texts)
    batch = rng.randint(1, 5)
    stubborn = rng.random() < 0.2
    plan = {rng.randrange(0, 18): rng.choice(MODEL_FAULTS) for _ in range(rng.randint(1, 4))}
    marker = f"GARBLE{trial.index}Z"
    model = FaultyModel(plan, marker, [c.text for c in canaries], rng, stubborn=stubborn)
    ops = trial.ops(ws)
    max_calls_per_batch = 2 + 10 + 1
    for run in range(3):
        before_calls = model.calls
        state_before = _state(ws)
        report, _ = trial.checks.attempt(f"faulty run {run + 1}", lambda: ops.dream(batch_size=batch, model=model))
        if report is None:
            continue
        _check_dream_report(trial.checks, ws, report, state_before)
        spent = model.calls - before_calls
        trial.checks.expect(
            spent <= max(1, len(report["batches"])) * max_calls_per_batch,
            "bounded_calls",
            f"{spent} model calls for {len(report['batches'])} batch(es)",
        )
        trial.checks.workspace(
            f"after faulty run {run + 1}", ws, appended=texts, secrets=[marker, *(c.value for c in canaries)]
        )
    report, _ = trial.checks.attempt("recovery run", lambda: ops.dream(batch_size=batch))
    trial.checks.workspace("after recovery", ws, appended=texts, secrets=[marker, *(c.value for c in canaries)])
    top = max(e.cursor for e in read_ledger(ws).entries)
    trial.checks.expect(
        dream_cursor(ws) == top, "all_consumed", f"cursor {dream_cursor(ws)} of {top} after a run with a working model"
    )
    faults = model.injected
    what = "stubborn garbage, " if stubborn else ""
    return Injected(faults, f"{what}{sorted(set(plan.values()))} in batches of {batch}")


def _state(root: Path) -> dict[str, Any]:
    path = root / layout.DREAM_STATE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _failure_count(state: Mapping[str, Any]) -> int:
    failure = state.get("failure")
    return int(failure.get("count", 0)) if isinstance(failure, dict) else 0


def _check_dream_report(checks: Checks, root: Path, report: Mapping[str, Any], state_before: Mapping[str, Any]) -> None:
    """What a report of a run that met a misbehaving model must say."""
    statuses = {"ok", "nothing_to_do", "failed", "held", "budget_exhausted", "set_aside"}
    checks.expect(report.get("status") in statuses, "report_status", f"status {report.get('status')!r}")
    checks.expect(
        report.get("cursor_after") == dream_cursor(root),
        "cursor_reported",
        f"report says {report.get('cursor_after')}, disk {dream_cursor(root)}",
    )
    failed = [b for b in report.get("batches", []) if b.get("outcome") == "failed"]
    if report.get("status") == "failed":
        checks.expect(
            len(failed) == 1 and report["batches"][-1] is failed[-1] and dream_cursor(root) < failed[0]["cursor_from"],
            "failed_batch_not_passed",
            "the cursor passed a failed batch, or the run went on after it",
        )
        error = str(failed[-1].get("error") or "")
        state = _state(root)
        if error.startswith(("timeout", "connection", "server", "rate_limit")):
            checks.expect(
                _failure_count(state) <= _failure_count(state_before),
                "transient_not_counted",
                f"a transient failure counted against the batch ({error[:60]})",
            )
        elif error.startswith("content"):
            checks.expect(_failure_count(state) >= 1, "content_failure_counted", "a content failure was not counted")


# --- trial kinds: a misbehaving model over HTTP ------------------------------------------------------------

HTTP_FAULTS = ("hang", "garbage_body", "empty", "truncated", "bad_args", "drop", "server_error", "garbage_text")


class FaultyResponder:
    """The scripted server's responder: the offline engine, except request number ``at``
    (0-based, while ``faulty``) which gets ``fault``."""

    def __init__(self, fault: str, at: int, marker: str) -> None:
        from dream_memory.adapters.offline import OfflineModel
        from dream_memory.testing.llm_server import from_chat_model

        self.offline = from_chat_model(OfflineModel())
        self.fault, self.at, self.marker = fault, at, marker
        self.count = 0
        self.injected = 0
        self.faulty = True

    def __call__(self, request: dict[str, Any]) -> Any:
        from dream_memory.testing.llm_server import Drop, Fail, Garbage, Hang, Reply, ScriptedToolCall

        number = self.count
        self.count += 1
        if number != self.at or not self.faulty:
            return self.offline(request)
        self.injected += 1
        m, fault = self.marker, self.fault
        if fault == "hang":
            return Hang(1.5, then=self.offline(request))
        if fault == "garbage_body":
            return Garbage(f"<html>{m}</html>", content_type="text/html")
        if fault == "empty":
            return Reply("")
        if fault == "truncated":
            return Reply(f"[USER] {m} prefers half a sen", finish_reason="length")
        if fault == "drop":
            return Drop()
        if fault == "server_error":
            return Fail(503, f"overloaded {m}")
        if fault == "garbage_text":
            return Reply(f"I cannot help with that {m}.")
        if request.get("tools"):
            calls = (
                ScriptedToolCall("edit_file", '{"path": "USER.md", "old_'),
                ScriptedToolCall("write_file", json.dumps({"path": "memory/.cursor", "content": m})),
            )
            return Reply(None, tool_calls=calls)
        return Reply(None, tool_calls=(ScriptedToolCall("read_file", '{"path": "USER.md"}'),))


def trial_model_http(trial: Trial) -> Injected:
    """The same, through litellm and a real HTTP server on 127.0.0.1 (the scripted server)."""
    from dream_memory.testing.llm_server import ScriptedLLMServer
    from dream_memory.testing.workspace import write_session

    rng, tag = trial.rng, trial.tag
    fault = HTTP_FAULTS[trial.index % len(HTTP_FAULTS)]
    consolidate = trial.index % 5 == 4
    # every dream run asks at least twice (analysis, edits); a consolidation once per slice
    responder = FaultyResponder(fault, 0 if consolidate else rng.randint(0, 1), f"HTTPGARBLE{trial.index}Z")
    with ScriptedLLMServer(responder=responder) as server:
        ws = trial.folder / "ws"
        texts = history_texts(tag, rng.randint(2, 6), rng)
        build(ws, texts)
        if consolidate:
            write_session(ws, f"cli:{tag}", session_messages(tag, 3, rng))
        preset = {
            "model": "openai/scripted-model",
            "apiBase": server.base_url,
            "apiKeyEnv": "SCRIPTED_API_KEY",
            "maxRetries": 1,
            "retryBaseSeconds": 0.01,
            "timeout": 0.5,
        }
        config = trial.folder / "dream.json"
        config.write_text(
            json.dumps({"agents": {"defaults": {"model": "scripted"}}, "modelPresets": {"scripted": preset}}),
            encoding="utf-8",
        )
        ops = Ops(ws, {**trial.env(), "SCRIPTED_API_KEY": "test-key-not-secret"}, config)
        state_before = _state(ws)
        if consolidate:
            report, _ = trial.checks.attempt(
                "consolidate with a faulty model", lambda: ops.consolidate(model="scripted")
            )
            if report is not None:
                trial.checks.expect(
                    report["status"] in ("ok", "nothing_to_do"),
                    "report_status",
                    f"consolidate status {report['status']}",
                )
        else:
            report, _ = trial.checks.attempt(
                "dream with a faulty model", lambda: ops.dream(batch_size=2, model="scripted")
            )
            if report is not None:
                _check_dream_report(trial.checks, ws, report, state_before)
        calls = len(server.completion_requests())
        maybe = [c for c, _ in _history_pairs(ws) if c not in texts]
        trial.checks.workspace("after the faulty model", ws, appended=texts, maybe=maybe, secrets=[responder.marker])
        responder.faulty = False
        if consolidate:
            trial.checks.attempt("consolidate again", lambda: ops.consolidate(model="scripted"))
        trial.checks.attempt("dream again", lambda: ops.dream(batch_size=2, model="scripted"))
        trial.checks.workspace("after recovery", ws, appended=texts, maybe=maybe, secrets=[responder.marker])
        top = max(e.cursor for e in read_ledger(ws).entries)
        trial.checks.expect(dream_cursor(ws) == top, "all_consumed", f"cursor {dream_cursor(ws)} of {top}")
        trial.checks.expect(calls <= 40, "bounded_calls", f"{calls} requests for one faulty run")
    return Injected(
        responder.injected, f"{fault} at request {responder.at} ({'consolidate' if consolidate else 'dream'})"
    )


# --- trial kinds: random inputs ------------------------------------------------------------------------------

_FUZZ_TARGETS = ("history", "session", "index", "config", "tool_args")


def random_text(rng: random.Random, size: int = 40) -> str:
    alphabet = string.printable + 'ÄéλжЖ中文🙂\u2028\x85\ufeff\x00\udcff{}[]":,\\|-#'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, size)))


def random_json(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(8 if depth < 3 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 1, 2**63, 2**64 + 1, 3.5, 10**30, rng.randint(-1000, 10**6)])
    if choice in (3, 4):
        return random_text(rng, 20)
    if choice == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["cursor", "content", "timestamp", "session_key", "role", "tool_calls", "path", "model", random_text(rng, 6)]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def random_line(rng: random.Random, valid: str) -> str:
    """A line a careless writer could leave: junk, a valid line mutated, glued or torn."""
    kind = rng.randrange(6)
    if kind == 0:
        return random_text(rng, 80)
    if kind == 1:
        return json.dumps(random_json(rng), ensure_ascii=rng.random() < 0.5)
    if kind == 2:
        return valid[: rng.randint(0, len(valid))]
    if kind == 3:
        return valid + valid
    if kind == 4:
        i = rng.randrange(len(valid) + 1)
        return valid[:i] + rng.choice(['"', "{", "}", "\\", ",", "\x00", "é"]) + valid[i:]
    return "[" * rng.randint(1, 3000)


def trial_fuzz(trial: Trial) -> Injected:
    """Random history lines, session lines, index.md, config files and tool arguments."""
    target = _FUZZ_TARGETS[trial.index % len(_FUZZ_TARGETS)]
    return {
        "history": _fuzz_history,
        "session": _fuzz_session,
        "index": _fuzz_index,
        "config": _fuzz_config,
        "tool_args": _fuzz_tool_args,
    }[target](trial)


def _fuzz_history(trial: Trial) -> Injected:
    rng, tag = trial.rng, trial.tag
    texts = history_texts(tag, rng.randint(1, 6), rng)
    ws = build(trial.folder / "ws", texts)
    sample = json.dumps(
        {"cursor": rng.randint(1, 40), "timestamp": "2026-04-03T10:00:00", "content": f"another writer {tag}"}
    )
    junk = [random_line(rng, sample).replace("\n", " ").replace("\r", " ") for _ in range(rng.randint(1, 8))]
    with (ws / layout.HISTORY).open("a", encoding="utf-8", errors="surrogatepass") as handle:
        handle.writelines(line + "\n" for line in junk)
    ops = trial.ops(ws)
    extra = f"- [durable] User prefers fuzz survival {tag}."
    trial.checks.attempt("append beside junk", lambda: ops.append(extra))
    trial.checks.attempt("dream beside junk", ops.dream)
    trial.checks.attempt("status beside junk", lambda: _status(ops))
    on_disk = (ws / layout.HISTORY).read_bytes().decode("utf-8", "surrogateescape")
    lost = [j for j in junk if j.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape") not in on_disk]
    trial.checks.expect(not lost, "lines_kept", f"{len(lost)} line(s) of another writer left history.jsonl")
    ledger = read_ledger(ws)
    # The other writer's lines may repeat entries or reuse cursors; ours must still be unique.
    ours = [e for e in ledger.entries if e.content in (*texts, extra)]
    trial.checks.expect(
        Counter(e.content for e in ours) == Counter([*texts, extra]),
        "history_exactly_once",
        "an entry of ours is lost or doubled",
    )
    appended = [e.cursor for e in ledger.entries if e.content == extra]
    clash = [e for e in ledger.entries if appended and e.cursor == appended[0] and e.content != extra]
    trial.checks.expect(not clash, "history_exactly_once", "the new entry's cursor is already used by another line")
    trial.checks.add("after junk", check_git_fsck(ws) + check_memory_committed(ws), checks=2)
    return Injected(len(junk), f"{len(junk)} random history lines")


def _status(ops: Ops) -> dict[str, Any]:
    from dream_memory.app.history import status

    return status(ops.rt()).to_json()


def _fuzz_session(trial: Trial) -> Injected:
    from dream_memory.testing.workspace import write_session

    rng, tag = trial.rng, trial.tag
    ws = build(trial.folder / "ws", [])
    path = write_session(ws, f"cli:{tag}", session_messages(tag, rng.randint(1, 4), rng))
    lines = path.read_text(encoding="utf-8").splitlines()
    count = rng.randint(1, 6)
    for _ in range(count):
        lines.insert(rng.randint(1, len(lines)), random_line(rng, rng.choice(lines)).replace("\n", " "))
    body = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
    path.write_bytes(body.encode("utf-8", "surrogatepass"))
    before = path.read_bytes()
    _report, _ = trial.checks.attempt("consolidate random session lines", lambda: trial.ops(ws).consolidate())
    trial.checks.expect(path.read_bytes() == before, "session_untouched", "the session file changed")
    trial.checks.expect(
        not read_ledger(ws).unreadable, "history_written_whole", "the product wrote an unreadable history line"
    )
    trial.checks.workspace("after consolidation", ws, appended=[])
    return Injected(count, f"{count} random session lines")


def _fuzz_index(trial: Trial) -> Injected:
    from dream_memory.app.read import read_entity, resolve_path, search_store
    from dream_memory.core.index_table import parse_index

    rng = trial.rng
    store = trial.folder / "store"
    (store / "entities").mkdir(parents=True)
    rows = ["| Entity | File | Repos |", "|---|---|---|"]
    names = []
    for i in range(rng.randint(0, 6)):
        name = rng.choice(["api", "job", random_text(rng, 8).replace("|", "")]) + str(i)
        names.append(name)
        repos = ", ".join(
            rng.choice(["/home/u/src/a", "/srv/b (was c)", random_text(rng, 12), "~/x", "/"])
            for _ in range(rng.randint(0, 3))
        )
        file = rng.choice([f"entities/e{i}.md", "../../etc/passwd", random_text(rng, 10), ""])
        rows.append(f"| {name} | {file} | {repos} |")
        if rng.random() < 0.5:
            (store / "entities" / f"e{i}.md").write_text(
                f"# e{i}\n{random_text(rng)}\n", encoding="utf-8", errors="surrogatepass"
            )
    for _ in range(rng.randint(0, 4)):
        rows.insert(rng.randint(0, len(rows)), random_text(rng, 60))
    text = "\n".join(rows)
    (store / "index.md").write_bytes(text.encode("utf-8", "surrogatepass"))
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    trial.checks.attempt("parse index.md", lambda: parse_index(text))
    queries = [rng.choice(["/home/u/src/a/x", "/srv/b/y", "/", random_text(rng, 20) or "/z"]) for _ in range(3)]
    for query in queries:
        trial.checks.attempt("resolve", functools.partial(resolve_path, store, query))
    for name in [*names[:3], random_text(rng, 10) or "x"]:
        trial.checks.attempt("entity", functools.partial(read_entity, store, name))
    query = rng.choice(["api", random_text(rng, 8) or "q"])
    undecodable = any(0xD800 <= ord(ch) <= 0xDFFF for ch in query)  # from bytes argv cannot decode
    bug = "search-undecodable-query" if undecodable else None
    trial.checks.attempt("search", functools.partial(search_store, store, query), known=bug)
    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and not p.name.startswith(".")}
    trial.checks.expect(
        all(after.get(p) == data for p, data in before.items()), "read_only", "the read side changed the store"
    )
    return Injected(len(rows), f"index.md of {len(rows)} random rows")


def _fuzz_config(trial: Trial) -> Injected:
    import warnings

    from dream_memory.settings.loading import parse_config

    rng = trial.rng
    count = 0
    for _ in range(6):
        data = random_json(rng)
        if not isinstance(data, dict) or rng.random() < 0.7:
            dream = {
                rng.choice(
                    [
                        "maxBatchSize",
                        "max_batch_size",
                        "maxIterations",
                        "deletionGuard",
                        "secretAllowlist",
                        "gitAuthor",
                        "cron",
                        "intervalH",
                        random_text(rng, 5),
                    ]
                ): random_json(rng)
                for _ in range(rng.randint(0, 4))
            }
            presets = {
                random_text(rng, 5): {
                    rng.choice(["model", "apiBase", "maxTokens", "timeout", "maxRetries"]): random_json(rng)
                    for _ in range(3)
                }
            }
            data = {
                "agents": {"defaults": {"model": random_json(rng), "dream": dream}},
                "modelPresets": rng.choice([presets, random_json(rng)]),
            }
        count += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trial.checks.attempt("parse_config", functools.partial(parse_config, data, "fuzz.json"))
            path = trial.folder / f"config{count}.json"
            path.write_text(
                json.dumps(data) if rng.random() < 0.9 else random_text(rng), encoding="utf-8", errors="surrogatepass"
            )
            try:
                path.read_bytes().decode("utf-8")
                bug = None
            except UnicodeDecodeError:
                bug = "config-not-utf8"
            trial.checks.attempt(
                "load a config file",
                functools.partial(_settings_model, trial.folder / "ws", path, trial.env()),
                known=bug,
            )
    return Injected(count, f"{count} random config files")


def _settings_model(workspace: Path, config: Path, env: dict[str, str]) -> Any:
    """What every command does with a config file first: load it, then resolve the model."""
    from dream_memory.settings import load_settings

    return load_settings(workspace, config, env).model(None)


def _fuzz_tool_args(trial: Trial) -> Injected:
    from dream_memory.adapters.secrets import SecretScanner
    from dream_memory.adapters.staging import StagingWorkspace
    from dream_memory.core.agent_loop import ToolOutcome

    rng = trial.rng
    ws = build(trial.folder / "ws", [])
    (trial.folder / "outside.md").write_text("outside\n", encoding="utf-8")
    before = {p: p.read_bytes() for p in trial.folder.rglob("*") if p.is_file()}
    staging = StagingWorkspace(
        ws, count_tokens=lambda text: len(text) // 4, file_budget_tokens=2000, redactor=SecretScanner()
    )
    count = rng.randint(5, 15)
    for _ in range(count):
        name = rng.choice(["read_file", "edit_file", "write_file", random_text(rng, 8)])
        arguments: dict[str, object] = {}
        for key in rng.sample(
            ["path", "old_text", "new_text", "content", "section", random_text(rng, 5)], k=rng.randint(0, 4)
        ):
            arguments[key] = rng.choice(
                [
                    random_json(rng),
                    random_text(rng),
                    "USER.md",
                    "../outside.md",
                    "/etc/passwd",
                    "memory/history.jsonl",
                    "skills/x/SKILL.md",
                    "USER.md/",
                    "./SOUL.md",
                    "entities/../USER.md",
                ]
            )
        outcome, _ = trial.checks.attempt("tool call", functools.partial(staging.execute, name, arguments))
        trial.checks.expect(
            isinstance(outcome, ToolOutcome), "tool_result", f"{name} did not return a result for the model"
        )
    after = {p: p.read_bytes() for p in trial.folder.rglob("*") if p.is_file()}
    trial.checks.expect(after == before, "staging_only", "a tool call wrote to disk")
    return Injected(count, f"{count} random tool calls")


# --- the suite ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    weight: float
    run: Callable[[Trial], Injected]
    doc: str


KINDS: tuple[Kind, ...] = (
    Kind("sigkill-append", 7, trial_sigkill_append, "dream append killed at a write site"),
    Kind("sigkill-compact", 7, trial_sigkill_compact, "compaction killed at a write site"),
    Kind("sigkill-consolidate", 9, trial_sigkill_consolidate, "dream consolidate killed at a write site"),
    Kind("sigkill-dream", 13, trial_sigkill_dream, "dream run killed at a write site"),
    Kind("sigkill-delay", 7, trial_sigkill_delay, "a process killed after a random delay"),
    Kind("concurrent-dream", 4, trial_concurrent_dream, "appender processes during Dream runs"),
    Kind("concurrent-compact", 4, trial_concurrent_compact, "appender processes during compaction"),
    Kind("disk-full", 18, trial_disk_full, "ENOSPC at each write site in turn"),
    Kind("model", 13, trial_model_offline, "garbage / empty / cut-off / late / broken tool calls (in-process)"),
    Kind("model-http", 0, trial_model_http, "the same through litellm and HTTP on 127.0.0.1"),
    Kind("fuzz", 11, trial_fuzz, "random history, session, index.md, config, tool arguments"),
)
KIND_NAMES = tuple(k.name for k in KINDS)


def allocate(trials: int, kinds: Sequence[str]) -> dict[str, int]:
    """How many trials each kind gets: model-http a fixed share (20 from 200 trials on), the rest
    by weight (largest remainder)."""
    selected = [k for k in KINDS if k.name in kinds]
    counts = {k.name: 0 for k in selected}
    rest = trials
    if "model-http" in counts:
        others = [k for k in selected if k.name != "model-http"]
        counts["model-http"] = rest if not others else min(HTTP_TRIALS, max(1, trials // 10))
        rest -= counts["model-http"]
    weighted = [k for k in selected if k.name != "model-http"]
    total = sum(k.weight for k in weighted)
    if weighted and rest > 0:
        shares = {k.name: rest * k.weight / total for k in weighted}
        for name, share in shares.items():
            counts[name] = int(share)
        left = rest - sum(counts[k.name] for k in weighted)
        for name in sorted(shares, key=lambda n: (-(shares[n] - int(shares[n])), KIND_NAMES.index(n)))[:left]:
            counts[name] += 1
    return counts


@dataclass
class Suite:
    seed: int
    trials: int
    kinds: tuple[str, ...]
    work: Path
    strict: bool = False
    shard: tuple[int, int] = (1, 1)
    progress: Callable[[str], None] | None = None
    outcomes: list[TrialOutcome] = field(default_factory=list)
    _pairs: list[tuple[str, str]] | None = None

    @property
    def home(self) -> Path:
        path = self.work / "home"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def disk_full_pairs(self) -> list[tuple[str, str]]:
        """Every (operation, write site) pair, from one uninterrupted run of each operation."""
        if self._pairs is None:
            pairs: list[tuple[str, str]] = []
            folder = self.work / "disk-full-sites"
            for op in DISK_FULL_OPS:
                root = _disk_full_template(op, folder / op, "df")
                sites, _ = trace_writes(_disk_full_op(op, root, lambda r: Ops(r, {"HOME": str(self.home)})))
                for site, _path in sites:
                    if (op, site) not in pairs:
                        pairs.append((op, site))
            shutil.rmtree(folder, ignore_errors=True)
            self._pairs = pairs
        return self._pairs

    def plan(self) -> list[tuple[Kind, int]]:
        """Every trial of the run, in order (this shard's share of them)."""
        counts = allocate(self.trials, self.kinds)
        planned = [(kind, index) for kind in KINDS for index in range(counts.get(kind.name, 0))]
        number, total = self.shard
        return [item for position, item in enumerate(planned) if position % total == number - 1]

    def run(self) -> list[TrialOutcome]:
        for kind, index in self.plan():
            self.outcomes.append(self.run_one(kind, index))
        return self.outcomes

    def run_one(self, kind: Kind, index: int) -> TrialOutcome:
        folder = self.work / f"{kind.name}-{index:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        checks = Checks(self.strict)
        trial = Trial(kind.name, index, random.Random(f"{self.seed}:{kind.name}:{index}"), folder, checks, self)
        outcome = TrialOutcome(kind.name, index, folder=str(folder))
        started = time.perf_counter()
        try:
            injected = kind.run(trial)
            outcome.faults, outcome.detail = injected.faults, injected.detail
        except Exception as exc:  # the trial itself broke: that is a finding too
            checks.violations.append(f"trial_crashed: {type(exc).__name__}: {_short(str(exc))}")
            outcome.detail = "".join(traceback.format_exception(exc))[-2000:]
        outcome.seconds = time.perf_counter() - started
        outcome.checks, outcome.violations, outcome.known = checks.count, checks.violations, checks.known
        if not outcome.violations:
            shutil.rmtree(folder, ignore_errors=True)
        if self.progress is not None:
            mark = "FAIL" if outcome.violations else "ok"
            self.progress(f"{kind.name} #{index}: {mark} {outcome.detail[:100]}")
            for line in outcome.violations:
                self.progress(f"    violation: {line}")
        return outcome


# --- figures ---------------------------------------------------------------------------------------------


def figures(outcomes: Sequence[TrialOutcome]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for kind in KINDS:
        mine = [o for o in outcomes if o.kind == kind.name]
        if not mine:
            continue
        rows.append(
            {
                "kind": kind.name,
                "what": kind.doc,
                "trials": len(mine),
                "faults": sum(o.faults for o in mine),
                "checks": sum(o.checks for o in mine),
                "violations": sum(len(o.violations) for o in mine),
                "known": sum(len(o.known) for o in mine),
                "seconds": round(sum(o.seconds for o in mine), 1),
            }
        )
    rows.append(
        {
            "kind": "total",
            "what": "",
            "trials": sum(r["trials"] for r in rows),
            "faults": sum(r["faults"] for r in rows),
            "checks": sum(r["checks"] for r in rows),
            "violations": sum(r["violations"] for r in rows),
            "known": sum(r["known"] for r in rows),
            "seconds": round(sum(r["seconds"] for r in rows), 1),
        }
    )
    return rows


def render_text(rows: Sequence[Mapping[str, Any]], seed: int, trials: int) -> str:
    lines = [f"dream-memory fault suite: {trials} trials, seed {seed}", ""]
    lines.append(f"{'kind':<22}{'trials':>7}{'faults':>8}{'checks':>8}{'violations':>12}{'known':>7}{'seconds':>9}")
    for r in rows:
        lines.append(
            f"{r['kind']:<22}{r['trials']:>7}{r['faults']:>8}{r['checks']:>8}{r['violations']:>12}{r['known']:>7}{r['seconds']:>9}"
        )
    return "\n".join(lines)


def render_markdown(rows: Sequence[Mapping[str, Any]], seed: int, trials: int, command: str) -> str:
    """The figures table for docs/reliability.md; the wall time is on its own line, outside the table."""
    lines = [
        f"`{command}`",
        "",
        "| kind | what is injected | trials | faults | checks | violations | known bugs |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        name = f"**{r['kind']}**" if r["kind"] == "total" else f"`{r['kind']}`"
        numbers = " | ".join(str(r[key]) for key in ("trials", "faults", "checks", "violations", "known"))
        lines.append(f"| {name} | {r['what']} | {numbers} |")
    total = rows[-1]
    lines += ["", f"Wall time: {total['seconds']} s of trials (not part of the figures; it depends on the machine)."]
    return "\n".join(lines)


def _fast_tmp() -> str | None:
    """A memory-backed folder when there is one: the trials kill processes, not the machine, so
    fsync buys nothing here and costs most of the time on a real disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        return None
    # a container's /dev/shm may be tiny (64 MB by default): a real full disk would be a false alarm
    stats = os.statvfs(shm)
    return str(shm) if stats.f_bavail * stats.f_frsize >= 512 * 2**20 else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tests/faults/soak/run.py",
        description="Inject crashes, full disks, concurrent writers, misbehaving models and random inputs into "
        "real workspaces, and check dream-memory's invariants after every trial. Exit 1 on any violation.",
    )
    parser.add_argument("--trials", type=int, default=100, help="number of trials (default 100)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the figures depend only on this and --trials")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KIND_NAMES,
        default=list(KIND_NAMES),
        metavar="KIND",
        help="trial kinds to run: " + ", ".join(KIND_NAMES),
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the figures and every trial as JSON")
    out.add_argument(
        "--markdown", action="store_true", help="print the figures as the markdown table of docs/reliability.md"
    )
    parser.add_argument("--strict", action="store_true", help="count known bugs as violations")
    parser.add_argument(
        "--shard",
        default="1/1",
        metavar="I/N",
        help="run every N-th trial of the plan starting at the I-th (the figures of shards 1/N..N/N add up "
        "to those of the whole run: for running on several cores)",
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="work in this folder and keep the failed trials' workspaces there"
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per trial on stderr")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    try:
        number, total = (int(part) for part in args.shard.split("/"))
    except ValueError:
        parser.error("--shard takes I/N, e.g. 1/2")
    if not 1 <= number <= total:
        parser.error("--shard I/N needs 1 <= I <= N")
    work = args.keep or Path(tempfile.mkdtemp(prefix="dream-faults-", dir=_fast_tmp()))
    work.mkdir(parents=True, exist_ok=True)
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None
    suite = Suite(
        args.seed, args.trials, tuple(args.kinds), work, strict=args.strict, shard=(number, total), progress=progress
    )
    try:
        outcomes = suite.run()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    rows = figures(outcomes)
    violations = rows[-1]["violations"]
    if args.json:
        known = {bug: {"summary": b.summary, "test": b.test} for bug, b in KNOWN_BUGS.items()}
        print(
            json.dumps(
                {
                    "seed": args.seed,
                    "trials": args.trials,
                    "figures": rows,
                    "known_bugs": known,
                    "outcomes": [o.to_json() for o in outcomes],
                },
                indent=1,
            )
        )
    elif args.markdown:
        kinds = "" if tuple(args.kinds) == KIND_NAMES else " --kinds " + " ".join(args.kinds)
        command = (
            f".venv/bin/python tests/faults/soak/run.py --trials {args.trials} --seed {args.seed}{kinds} --markdown"
        )
        print(render_markdown(rows, args.seed, args.trials, command))
    else:
        print(render_text(rows, args.seed, args.trials))
        for o in outcomes:
            for line in o.violations:
                print(f"VIOLATION {o.kind} #{o.index} ({o.detail[:80]}): {line}")
        if rows[-1]["known"]:
            print(f"\n{rows[-1]['known']} observation(s) of known bugs (see --json, or --strict to count them):")
            for bug, b in KNOWN_BUGS.items():
                print(f"  {bug}: {b.summary}\n    {b.test}")
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
