"""What must hold in a workspace whatever happened to it: the fault suite's checks, for anyone.

Each check reads a workspace from the outside (the files, and git through the ``git`` command
line, never through dream-memory's own git code) and returns a list of ``Violation`` values;
an empty list means the invariant holds. Use them after a crash, a full disk or a misbehaving
model, or in your own tests of a deployment::

    from dream_memory.testing.invariants import check_workspace

    problems = check_workspace(Path("ws"), appended=["- User prefers dark mode"])
    assert not problems, problems

The invariants (docs/reliability.md explains why each one matters):

- ``git_fsck``: ``git fsck --strict`` finds no error (dangling objects are fine: a rolled-back
  change leaves its unreferenced commit behind).
- ``history_exactly_once``: every entry known to be appended is in history.jsonl or
  memory/archive/ exactly once, whole; an entry whose append failed or was killed is there at
  most once; no two different entries share a cursor; no line is half written (lines another
  program wrote can be named as ``foreign``).
- ``failed_append_absent``: an append reported as failed left no entry behind (a caller that
  retries it would otherwise store it twice).
- ``head_on_branch``: the workspace's own repository has HEAD on a branch (a detached HEAD
  means Dream's commits are on no branch: a push or a checkout loses them).
- ``cursor_not_ahead``: ``memory/.dream_cursor`` on disk is never ahead of the one in HEAD.
- ``memory_committed``: every versioned memory file on disk equals HEAD, or (while an
  interrupted change waits in ``memory/.dream_journal.json``) the content the next run finishes
  writing; once settled, it equals HEAD and no journal or marker is left.
- ``no_manual_edits``: no ``memory: manual edits`` commit exists (for workspaces nobody edited
  by hand: an interrupted batch must never be committed as one).
- ``no_secrets``: none of the given secret values appears in any commit (``git log -p --all``),
  in any versioned file on disk, or in the extra files named.

``memory/.dream_state.json`` is exempt from ``memory_committed``: Dream records a failed batch's
failure count there without a commit, and the next commit carries it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dream_memory.core import layout
from dream_memory.core.bounded import split_lines

MANUAL_EDITS_SUBJECT = "memory: manual edits"
# Files only present while a change is in flight; once settled, none may be left.
IN_FLIGHT_MARKERS: tuple[str, ...] = (
    layout.DREAM_JOURNAL,
    layout.MIGRATION_MARKER,
    f"{layout.ARCHIVE_DIR}/.pending.json",
)
# Versioned, but written without a commit on purpose (a failed batch's count).
EXEMPT_FROM_HEAD: frozenset[str] = frozenset({layout.DREAM_STATE})


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


# --- git, from the outside ---------------------------------------------------------------------


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    return env


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run the git command line in ``root`` (bytes out); raises RuntimeError without git."""
    exe = shutil.which("git")
    if exe is None:
        raise RuntimeError("dream_memory.testing.invariants needs the git command line")
    done = subprocess.run([exe, "-C", str(root), *args], capture_output=True, env=_git_env(), check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {root}: {done.stderr.decode('utf-8', 'replace').strip()}")
    return done


def _repo_prefix(root: Path) -> str | None:
    """The workspace's path inside its repository ('' at the root), None when not in one."""
    done = git(root, "rev-parse", "--show-prefix", check=False)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8").strip()


def head_sha(root: Path) -> str | None:
    done = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    return done.stdout.decode("ascii").strip() if done.returncode == 0 else None


def tree_blobs(root: Path, rev: str | None) -> dict[str, str]:
    """Workspace-relative path -> blob id of the workspace's files in commit ``rev``."""
    prefix = _repo_prefix(root)
    if rev is None or prefix is None:
        return {}
    done = git(root, "ls-tree", "-r", "-z", "--full-tree", rev)
    found: dict[str, str] = {}
    for item in done.stdout.split(b"\0"):
        if not item:
            continue
        meta, _, path_bytes = item.partition(b"\t")
        _mode, kind, sha = meta.decode("ascii").split()
        path = path_bytes.decode("utf-8", "surrogateescape")
        if kind == "blob" and path.startswith(prefix):
            found[path[len(prefix) :]] = sha
    return found


def read_blob(root: Path, sha: str) -> bytes:
    return git(root, "cat-file", "blob", sha).stdout


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def commit_subjects(root: Path) -> list[str]:
    """Subjects of every commit reachable from any ref, newest first."""
    if head_sha(root) is None:
        return []
    return split_lines(git(root, "log", "--all", "--format=%s").stdout.decode("utf-8", "replace"))


def versioned_on_disk(root: Path) -> dict[str, bytes]:
    """Versioned memory files present in the workspace (docs/reference/files.md), with their bytes."""
    found: dict[str, bytes] = {}
    for top in layout.tracked_roots():
        base = root / top
        if base.is_file() and layout.is_tracked(top):
            found[top] = base.read_bytes()
        elif base.is_dir():
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = [d for d in dirnames if d != ".git"]
                for name in filenames:
                    full = Path(dirpath) / name
                    rel = full.relative_to(root).as_posix()
                    if layout.is_tracked(rel) and full.is_file() and not full.is_symlink():
                        found[rel] = full.read_bytes()
    return found


# --- history, read on its own terms ------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    source: str  # "memory/history.jsonl" or "memory/archive/<file>"
    line_no: int
    cursor: int
    content: str
    session_key: str | None


@dataclass
class Ledger:
    """Every entry in history.jsonl and memory/archive/, and every line that held none."""

    entries: list[LedgerEntry] = field(default_factory=list)
    unreadable: list[tuple[str, int, str]] = field(default_factory=list)  # (source, line, raw)

    def contents(self) -> list[str]:
        return [e.content for e in self.entries]


_DECODER = json.JSONDecoder()


def _objects(line: str) -> list[object] | None:
    """The JSON values on one line (several when glued), None when it is not only JSON."""
    text, pos, found = line.strip(), 0, []
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        found.append(value)
        pos = end
        while pos < len(text) and text[pos] in " \t\r":
            pos += 1
    return found


def _read_file_entries(path: Path, source: str, ledger: Ledger) -> None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for number, raw in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
        if not raw.strip():
            continue
        objects = _objects(raw)
        entries = [
            o
            for o in objects or []
            if isinstance(o, dict)
            and isinstance(o.get("cursor"), int)
            and not isinstance(o.get("cursor"), bool)
            and isinstance(o.get("content"), str)
        ]
        if not entries:
            ledger.unreadable.append((source, number, raw))
            continue
        for obj in entries:
            key = obj.get("session_key")
            ledger.entries.append(
                LedgerEntry(
                    source, number, int(obj["cursor"]), str(obj["content"]), key if isinstance(key, str) else None
                )
            )


def read_ledger(root: Path) -> Ledger:
    """Everything history.jsonl and memory/archive/history-*.jsonl hold, in file order."""
    ledger = Ledger()
    _read_file_entries(root / layout.HISTORY, layout.HISTORY, ledger)
    archive = root / layout.ARCHIVE_DIR
    if archive.is_dir():
        for path in sorted(archive.glob("history-*.jsonl")):
            _read_file_entries(path, f"{layout.ARCHIVE_DIR}/{path.name}", ledger)
    return ledger


# --- the checks -----------------------------------------------------------------------------------


def check_git_fsck(root: Path, *, settled: bool = True) -> list[Violation]:
    """``git fsck --strict`` reports no error (dangling objects are not errors). Unsettled, a
    repository whose creation was interrupted (no HEAD yet) and the lock file of an object a
    killed process was writing are left for the next run to clear."""
    if head_sha(root) is None and not (root / ".git").exists():
        return []
    if not settled and (root / ".git").is_dir() and not (root / ".git" / "HEAD").is_file():
        return []
    done = git(root, "fsck", "--strict", "--no-progress", check=False)
    lines = split_lines((done.stdout + done.stderr).decode("utf-8", "replace"))
    bad = [line for line in lines if line.strip() and not line.startswith(("dangling ", "Checking ", "notice: "))]
    if not settled:
        # the lock file of an object a killed writer was writing: debris the next run clears
        bad = [line for line in bad if not (line.startswith("bad sha1 file: ") and line.endswith(".lock"))]
    if done.returncode != 0 or bad:
        return [Violation("git_fsck", f"exit {done.returncode}: " + "; ".join(bad[:5]))]
    return []


def check_history_exactly_once(
    root: Path,
    *,
    appended: Iterable[str] = (),
    maybe: Iterable[str] = (),
    foreign: Iterable[str] = (),
    settled: bool = True,
    ledger: Ledger | None = None,
) -> list[Violation]:
    """Every text in ``appended`` is the content of exactly one entry across history.jsonl and
    the archive; every text in ``maybe`` (an append that failed or was killed) of at most one.
    Every line holds whole entries, except the ``foreign`` lines another program wrote: a line
    nothing can read is a half-written entry.

    Unsettled (right after a crash), an entry may sit in both history.jsonl and the archive
    while a compaction waits to be finished; the next writer removes the copy.
    """
    ledger = ledger or read_ledger(root)
    problems: list[Violation] = []
    by_content: dict[str, list[LedgerEntry]] = {}
    for entry in ledger.entries:
        by_content.setdefault(entry.content, []).append(entry)

    def copies(text: str) -> list[LedgerEntry]:
        found = by_content.get(text, [])
        if settled:
            return found
        # the same line in history.jsonl and the archive is one entry mid-compaction
        return list({(e.cursor, e.content, e.session_key): e for e in found}.values())

    for text in dict.fromkeys(appended):
        n = len(copies(text))
        if n != 1:
            problems.append(Violation("history_exactly_once", f"{n} copies of an appended entry: {text[:80]!r}"))
    for text in dict.fromkeys(maybe):
        n = len(copies(text))
        if n > 1:
            problems.append(Violation("history_exactly_once", f"{n} copies of an interrupted append: {text[:80]!r}"))
    by_cursor: dict[int, set[tuple[str, str | None]]] = {}
    for entry in ledger.entries:
        by_cursor.setdefault(entry.cursor, set()).add((entry.content, entry.session_key))
    shared = sorted(c for c, values in by_cursor.items() if len(values) > 1)
    if shared:
        problems.append(Violation("history_exactly_once", f"different entries share cursor(s) {shared[:5]}"))
    allowed = set(foreign)
    torn = [(source, number) for source, number, raw in ledger.unreadable if raw not in allowed]
    if torn:
        where = ", ".join(f"{source} line {number}" for source, number in torn[:3])
        problems.append(Violation("history_exactly_once", f"{len(torn)} unreadable line(s): {where}"))
    return problems


def check_failed_appends_absent(root: Path, failed: Iterable[str], *, ledger: Ledger | None = None) -> list[Violation]:
    """An append that reported failure (an error, not a kill) left no entry behind."""
    ledger = ledger or read_ledger(root)
    present = set(ledger.contents())
    return [
        Violation("failed_append_absent", f"an append reported as failed is in history: {text[:80]!r}")
        for text in dict.fromkeys(failed)
        if text in present
    ]


def check_head_on_branch(root: Path, *, settled: bool = True) -> list[Violation]:
    """In the workspace's own repository (``.git`` at its root), HEAD names a branch."""
    git_dir = root / ".git"
    if not git_dir.is_dir() or (not settled and not (git_dir / "HEAD").is_file()):
        return []
    done = git(root, "symbolic-ref", "-q", "HEAD", check=False)
    if done.returncode != 0:
        state = "detached" if head_sha(root) else "missing or unreadable"
        return [Violation("head_on_branch", f"HEAD is {state}, not a branch")]
    return []


def _cursor_value(data: bytes | None) -> int:
    if data is None:
        return 0
    text = data.decode("utf-8", "replace").strip()
    return int(text) if text.isdigit() else 0


def check_cursor_not_ahead(root: Path) -> list[Violation]:
    """``.dream_cursor`` on disk is at most the one committed in HEAD."""
    path = root / layout.DREAM_CURSOR
    on_disk = _cursor_value(path.read_bytes() if path.is_file() else None)
    head = head_sha(root)
    if on_disk == 0 or head is None:
        return []  # nothing committed yet: there is no committed cursor to compare with
    blobs = tree_blobs(root, head)
    committed = _cursor_value(read_blob(root, blobs[layout.DREAM_CURSOR])) if layout.DREAM_CURSOR in blobs else 0
    if on_disk > committed:
        return [Violation("cursor_not_ahead", f".dream_cursor is {on_disk} on disk but {committed} in HEAD")]
    return []


def _journal(root: Path) -> dict[str, object] | None:
    path = root / layout.DREAM_JOURNAL
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def check_memory_committed(root: Path, *, settled: bool = True) -> list[Violation]:
    """Versioned memory files equal HEAD (or, unsettled, what an interrupted change's next run
    completes: the journal's commit is HEAD and the file still holds its base content)."""
    head = head_sha(root)
    if head is None:
        return []
    problems: list[Violation] = []
    committed = tree_blobs(root, head)
    disk = {rel: blob_id(data) for rel, data in versioned_on_disk(root).items()}
    journal = None if settled else _journal(root)
    base: dict[str, str] | None = None
    if journal is not None and journal.get("commit") == head:
        base_rev = journal.get("base")
        base = tree_blobs(root, str(base_rev)) if isinstance(base_rev, str) else {}
    paths = (set(committed) | set(disk)) - EXEMPT_FROM_HEAD
    for rel in sorted(p for p in paths if layout.is_tracked(p)):
        if disk.get(rel) == committed.get(rel):
            continue
        if base is not None and disk.get(rel) == base.get(rel):
            continue  # not written yet: the next run finishes the interrupted change
        state = "missing" if rel not in disk else "absent from HEAD" if rel not in committed else "differs from HEAD"
        problems.append(Violation("memory_committed", f"{rel} {state}"))
    if settled:
        replaced = root / layout.HISTORY_REPLACED  # history.jsonl kept by name while a rewrite drains it
        kept = [f"memory/{p.name}" for p in replaced.parent.glob(f"{replaced.name}.*")]
        for rel in [*IN_FLIGHT_MARKERS, *kept]:
            if (root / rel).exists():
                problems.append(Violation("memory_committed", f"{rel} is left after the change settled"))
    return problems


def check_no_manual_edits(root: Path) -> list[Violation]:
    subjects = [s for s in commit_subjects(root) if s.startswith(MANUAL_EDITS_SUBJECT)]
    if subjects:
        return [
            Violation(
                "no_manual_edits", f"{len(subjects)} '{MANUAL_EDITS_SUBJECT}' commit(s) in a workspace nobody edited"
            )
        ]
    return []


def check_no_secrets(root: Path, values: Iterable[str], *, extra_files: Sequence[Path] = ()) -> list[Violation]:
    """No secret value in any commit (``git log -p --all``), versioned file or ``extra_files``."""
    wanted = [v for v in dict.fromkeys(values) if v]
    if not wanted:
        return []
    places: list[tuple[str, str]] = []
    if head_sha(root) is not None:
        log = git(root, "log", "-p", "--all", "--format=commit %H%n%B", "--no-color", "--no-ext-diff")
        places.append(("git log -p --all", log.stdout.decode("utf-8", "replace")))
    for rel, data in versioned_on_disk(root).items():
        places.append((rel, data.decode("utf-8", "replace")))
    for path in extra_files:
        if path.is_file():
            places.append((str(path), path.read_bytes().decode("utf-8", "replace")))
        elif path.is_dir():
            for inner in sorted(p for p in path.rglob("*") if p.is_file()):
                places.append((str(inner), inner.read_bytes().decode("utf-8", "replace")))
    problems = []
    for where, text in places:
        leaked = sum(1 for value in wanted if value in text)
        if leaked:
            problems.append(Violation("no_secrets", f"{leaked} secret value(s) in {where}"))
    return problems


def check_workspace(
    root: Path,
    *,
    appended: Iterable[str] = (),
    maybe: Iterable[str] = (),
    failed: Iterable[str] = (),
    foreign: Iterable[str] = (),
    secrets: Iterable[str] = (),
    settled: bool = True,
    edited_by_hand: bool = False,
) -> list[Violation]:
    """All the invariants above, for one workspace. ``settled``: the next normal command has run
    since the last fault (right after a crash, pass False)."""
    ledger = read_ledger(root)
    problems = check_git_fsck(root, settled=settled)
    problems += check_head_on_branch(root, settled=settled)
    problems += check_history_exactly_once(
        root, appended=appended, maybe=maybe, foreign=foreign, settled=settled, ledger=ledger
    )
    problems += check_failed_appends_absent(root, failed, ledger=ledger)
    problems += check_cursor_not_ahead(root)
    problems += check_memory_committed(root, settled=settled)
    if not edited_by_hand:
        problems += check_no_manual_edits(root)
    problems += check_no_secrets(root, secrets)
    return problems


INVARIANTS: tuple[str, ...] = (
    "git_fsck",
    "head_on_branch",
    "history_exactly_once",
    "failed_append_absent",
    "cursor_not_ahead",
    "memory_committed",
    "no_manual_edits",
    "no_secrets",
)
