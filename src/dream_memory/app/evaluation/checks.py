"""The checks on a workspace after a scenario, deterministic, with no model in the loop: the memory
files, every version in git, the runs, and the history texts kept outside git."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dream_memory.adapters import eval_files
from dream_memory.app.evaluation.report import Item, Run
from dream_memory.app.evaluation.scenarios import FILES, Scenario
from dream_memory.core import layout
from dream_memory.core.bounded import split_lines

if TYPE_CHECKING:
    from dream_memory.adapters.git import GitStore

# Opens a workspace's repository to read its commits; None when it has none.
OpenGit = Callable[[Path], "GitStore | None"]

_FINISHED = {"consolidate": ("ok", "nothing_to_do"), "dream": ("ok", "nothing_to_do")}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.casefold()).strip()


def _contains(text: str, value: str) -> bool:
    return _norm(value) in _norm(text)


def memory_files(root: Path) -> dict[str, str]:
    """Workspace-relative path -> text of every memory content file on disk (tracked, not Dream's own)."""
    return eval_files.memory_files(root)


@dataclass
class GitHistory:
    """Every version of every memory file in any commit, and every commit message."""

    memory_versions: list[tuple[str, str, str]]  # (commit, path, text) for content files
    all_blobs: list[tuple[str, str, bytes]]  # (commit, path, data) for every file
    messages: list[tuple[str, str]]  # (commit, message)

    @classmethod
    def read(cls, root: Path, open_git: OpenGit) -> GitHistory:
        git = open_git(root)
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
        for n, line in enumerate(split_lines(text), 1)
        if _contains(line, value)
    ]


def _where(files: dict[str, str], value: str) -> list[str]:
    return [rel for rel, text in files.items() if _contains(text, value)]


def check_workspace(
    scenario: Scenario,
    root: Path,
    runs: Sequence[Run],
    secrets: dict[str, str],
    *,
    open_git: OpenGit | None = None,
) -> list[Item]:
    """The checks of the module docstring, one Item per (check, subject). ``open_git`` opens the
    workspace's repository to read it (default: ``adapters.eval_files.open_repository``)."""
    opener = open_git or eval_files.open_repository
    history = GitHistory.read(root, opener)
    items = check_memory(
        scenario, memory_files(root), history, runs=runs, secrets=secrets, stored=eval_files.stored_history(root)
    )
    return items + provenance_items(root, opener)


def provenance_items(root: Path, open_git: OpenGit) -> list[Item]:
    """Per line Dream wrote (not blank, not a heading) in USER.md, SOUL.md and memory/MEMORY.md:
    ``provenance_coverage``, it resolves to at least one history entry; ``provenance_precision``,
    the entries it cites hold at least one of its key words (docs/provenance.md)."""
    from dream_memory.app.provenance import blame_file
    from dream_memory.core.provenance import KIND_DREAM, key_words

    git = open_git(root)
    if git is None:
        return []
    items: list[Item] = []
    with git:
        head = git.head()
        committed = set(git.files_at(head)) if head else set()
        for rel in FILES:
            if rel not in committed:
                continue
            for line in blame_file(git, root, rel):
                text = line.text.strip()
                if line.kind != KIND_DREAM or not text or text.startswith(("#", "---")):
                    continue
                subject = f"{rel}:{line.line}"
                covered = bool(line.sources)
                items.append(Item("provenance_coverage", subject, covered, "" if covered else line.note or "no source"))
                if covered:
                    cited = " ".join(s.content or "" for s in line.sources)
                    shared = key_words(text) & key_words(cited)
                    detail = (
                        "" if shared else f"entries {', '.join(str(s.cursor) for s in line.sources)} share no key word"
                    )
                    items.append(Item("provenance_precision", subject, bool(shared), detail))
    return items


def baseline_items(scenario: Scenario, runs: Sequence[Run], secrets: dict[str, str]) -> list[Item]:
    """The score of a model that keeps nothing: every run finished and memory is the templates.

    Shown beside each score: a model that stores nothing still passes "noise left out",
    "superseded values gone" and "no secret", so a raw score alone cannot tell "kept nothing"
    from "kept half" (Qwen2.5-Coder-1.5B scored exactly this baseline on `personal`).
    """
    templates = eval_files.template_files(FILES)
    history = GitHistory([("init", rel, text) for rel, text in templates.items()], [], [("init", "memory: init")])
    finished = [Run(r.date, r.step, "ok") for r in runs]
    return check_memory(scenario, templates, history, runs=finished, secrets=secrets, stored={})


def check_memory(
    scenario: Scenario,
    files: dict[str, str],
    history: GitHistory,
    *,
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
