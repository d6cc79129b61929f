"""Session files and the Consolidator's own state on disk.

- Session files are read, never written, except for ``--update-sessions``: then only their
  metadata line changes (``last_consolidated``), under ``sessions/<file>.lock``.
- ``memory/.consolidation.json`` holds each session's progress and, while a slice's entries are
  being appended, the pending record that lets the next run finish an interrupted append.
- ``memory/.consolidation.lock`` keeps two consolidations of one workspace from archiving the
  same slice twice.

Every write goes through ``fsutil`` (temp + fsync + rename), at the sites ``consolidation.pending``,
``consolidation.progress`` and ``session.metadata``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import filelock

from dream_memory.adapters import fsutil
from dream_memory.core import jsontext, layout
from dream_memory.core.consolidation import Pending, Progress
from dream_memory.core.history import max_cursor_bound
from dream_memory.core.sessions import ParsedSession, parse_session, with_last_consolidated
from dream_memory.errors import InputError, LockBusy, WorkspaceError

CONSOLIDATION_LOCK = layout.CONSOLIDATION_LOCK
STATE_VERSION = 1
SESSION_LOCK_TIMEOUT = 10.0
SITE_PENDING = "consolidation.pending"
SITE_PROGRESS = "consolidation.progress"
SITE_SESSION = "session.metadata"


# --- reading a session -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileSignature:
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileSignature:
        st = path.stat()
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass(frozen=True)
class SessionSnapshot:
    path: Path
    signature: FileSignature
    parsed: ParsedSession


def read_session(path: Path) -> SessionSnapshot:
    """One read of the whole file. A live agent may append during it: parse_session counts only
    lines that end in a newline, so a half-written last line waits for the next run."""
    try:
        signature = FileSignature.of(path)
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkspaceError(f"session file {path} disappeared") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a folder, not a session file") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot read session file {path}: {fsutil.describe_os_error(exc)}") from exc
    return SessionSnapshot(path, signature, parse_session(data.decode("utf-8", errors="replace")))


# --- memory/.consolidation.json --------------------------------------------------------------------


@dataclass
class ConsolidationState:
    sessions: dict[str, Progress] = field(default_factory=dict)
    pending: Pending | None = None

    def to_json(self) -> str:
        data = {
            "version": STATE_VERSION,
            "sessions": {path: progress.to_json() for path, progress in sorted(self.sessions.items())},
            "pending": self.pending.to_json() if self.pending is not None else None,
        }
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


class ConsolidationStore:
    def __init__(self, root: Path) -> None:
        self.path = root / layout.CONSOLIDATION

    def load(self) -> ConsolidationState:
        """The state on disk (empty when the file is missing).

        A file that cannot be read as our state is refused, not reset: starting over would archive
        every session again from its own last_consolidated.
        """
        text = fsutil.read_text(self.path)
        if text is None or not text.strip():
            return ConsolidationState()
        hint = (
            "fix it, or move it aside to start every session over from its own last_consolidated "
            "(slices consolidated since would be archived again)"
        )
        try:
            data = jsontext.loads(text)
        except ValueError as exc:
            raise InputError(f"{layout.CONSOLIDATION} is not valid JSON ({exc})", hint=hint) from None
        if not isinstance(data, dict) or not isinstance(data.get("sessions", {}), dict):
            raise InputError(f"{layout.CONSOLIDATION} does not hold the Consolidator's state", hint=hint)
        state = ConsolidationState()
        for path, item in data.get("sessions", {}).items():
            progress = Progress.from_json(item)
            if progress is None:
                raise InputError(f"{layout.CONSOLIDATION}: the progress of {path} is unreadable", hint=hint)
            state.sessions[str(path)] = progress
        if data.get("pending") is not None:
            state.pending = Pending.from_json(data["pending"])
            if state.pending is None:
                raise InputError(f"{layout.CONSOLIDATION}: the pending slice record is unreadable", hint=hint)
        return state

    def save(self, state: ConsolidationState, *, site: str) -> None:
        try:
            fsutil.atomic_write(self.path, state.to_json(), site=site)
        except OSError as exc:
            raise WorkspaceError(f"cannot write {layout.CONSOLIDATION}: {fsutil.describe_os_error(exc)}") from exc


@contextlib.contextmanager
def consolidation_lock(root: Path, *, timeout: float = 0.0) -> Iterator[None]:
    """One consolidation per workspace at a time; another one finds it busy (exit 75)."""
    path = root / CONSOLIDATION_LOCK
    lock = filelock.FileLock(str(path), timeout=timeout)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except filelock.Timeout:  # before OSError: filelock's Timeout is a TimeoutError
        raise LockBusy(
            f"another dream consolidate is running on this workspace ({CONSOLIDATION_LOCK} is held)",
            hint="nothing was done; the next run picks the sessions up",
        ) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot take {CONSOLIDATION_LOCK}: {fsutil.describe_os_error(exc)}") from exc
    try:
        yield
    finally:
        lock.release()


def history_cursor_bound(history_path: Path) -> int:
    """Every cursor in history.jsonl is at most this (new entries will be above it)."""
    try:
        return max_cursor_bound(history_path.read_bytes())
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise WorkspaceError(f"cannot read {history_path}: {fsutil.describe_os_error(exc)}") from exc


# --- --update-sessions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataUpdate:
    status: str  # "written" | "unchanged" | "skipped"
    detail: str = ""


def session_lock_path(path: Path) -> Path:
    """``sessions/<file>.lock``: agents that honour it never write the session while it is held."""
    return path.with_name(path.name + ".lock")


def update_last_consolidated(path: Path, value: int, *, timeout: float = SESSION_LOCK_TIMEOUT) -> MetadataUpdate:
    """Write ``last_consolidated = value`` into the session file's metadata line.

    Only the digits of that value change (or the key is added at the end of the line); every
    other byte and line stays as it was. Done under ``sessions/<file>.lock``. The file is replaced
    atomically; it is re-read if it changed between the read and the write (a writer that does
    not honour the lock), so a message appended meanwhile is never dropped. A value that would
    move ``last_consolidated`` backwards is not written.
    """
    lock = filelock.FileLock(str(session_lock_path(path)), timeout=timeout)
    try:
        lock.acquire()
    except filelock.Timeout:  # before OSError: filelock's Timeout is a TimeoutError
        return MetadataUpdate("skipped", f"{session_lock_path(path).name} was held for more than {timeout:g} s")
    except OSError as exc:
        return MetadataUpdate("skipped", f"cannot take {session_lock_path(path).name}: {fsutil.describe_os_error(exc)}")
    try:
        for _ in range(5):
            try:
                before = FileSignature.of(path)
                data = path.read_bytes()
            except OSError as exc:
                raise WorkspaceError(f"cannot read session file {path}: {fsutil.describe_os_error(exc)}") from exc
            end = data.find(b"\n")
            if end < 0:
                return MetadataUpdate("skipped", "the file has no complete metadata line")
            try:
                line = data[:end].decode("utf-8")
            except UnicodeDecodeError:
                return MetadataUpdate("skipped", "the metadata line is not UTF-8")
            current = _current_value(line)
            if current is None:
                return MetadataUpdate("skipped", "the first line is not a metadata line")
            if current >= value:
                return MetadataUpdate("unchanged", f"last_consolidated is already {current}")
            updated = with_last_consolidated(line, value)
            if updated is None:
                return MetadataUpdate("skipped", "last_consolidated cannot be set without rewriting other fields")
            try:
                if FileSignature.of(path) != before:
                    continue
                fsutil.atomic_write(path, updated.encode("utf-8") + data[end:], site=SITE_SESSION)
            except OSError as exc:
                raise WorkspaceError(f"cannot write session file {path}: {fsutil.describe_os_error(exc)}") from exc
            return MetadataUpdate("written", f"last_consolidated {current} -> {value}")
        return MetadataUpdate("skipped", "the file kept changing while it was updated (a writer ignores the lock)")
    finally:
        lock.release()


def _current_value(line: str) -> int | None:
    """last_consolidated of a metadata line (0 when absent), None when it is no metadata line."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("_type") != "metadata":
        return None
    value = obj.get("last_consolidated", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def progress_key(root: Path, path: Path) -> str:
    """How a session file is named in memory/.consolidation.json: relative to the workspace when
    inside it (so the workspace can move), else absolute."""
    resolved = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    try:
        return resolved.relative_to(base).as_posix()
    except ValueError:
        return resolved.as_posix()
