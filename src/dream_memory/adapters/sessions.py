"""Session files and the Consolidator's own state on disk.

- Session files are read, never written, except for ``--update-sessions``: then only their
  metadata line changes (the watermark the agent reads: ``last_archived`` and/or
  ``last_consolidated``), under ``sessions/<file>.lock``, or, in nanobot 0.3.5's session store,
  under that store's own ``.session-files.lock``.
- nanobot 0.3.5 keeps a workspace's sessions outside it: ``<data dir>/sessions/<workspace-id>/``,
  the id read from ``<workspace>/.nanobot/workspace-id`` (``find_nanobot_sessions``).
- ``memory/.consolidation.json`` holds each session's progress and, while a slice's entries are
  being appended, the pending record that lets the next run finish an interrupted append.
- ``memory/.consolidation.lock`` keeps two consolidations of one workspace from archiving the
  same slice twice.

Every write goes through ``fsutil`` (temp + fsync + rename), at the sites ``consolidation.pending``,
``consolidation.progress`` and ``session.metadata``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dream_memory.adapters import fsutil, locks
from dream_memory.core import jsontext, layout
from dream_memory.core.consolidation import EntryOrigin, Pending, Progress
from dream_memory.core.history import max_cursor_bound
from dream_memory.core.sessions import ParsedSession, keys_to_write, parse_session, session_text, with_progress
from dream_memory.core.surrogates import json_dumps_utf8
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
    return SessionSnapshot(path, signature, parse_session(session_text(data)))


def consolidated_prefix(parsed: ParsedSession, messages: int) -> str | None:
    """What a session's first ``messages`` messages hold (their ``identity``, so a save that only
    re-serialises them keeps it); None when it holds fewer."""
    if messages > parsed.message_count:
        return None
    digest = hashlib.sha256()
    for record in parsed.records[: parsed.index_after_messages(messages)]:
        digest.update(record.identity.encode("ascii"))
    return digest.hexdigest()[:16]


# --- memory/.consolidation.json --------------------------------------------------------------------


@dataclass
class ConsolidationState:
    sessions: dict[str, Progress] = field(default_factory=dict)
    pending: Pending | None = None
    # cursor -> the session file and messages the entry summarises (for `dream why`); saved with
    # the progress that moved past them, so it is exactly as durable.
    origins: dict[int, EntryOrigin] = field(default_factory=dict)

    def to_json(self) -> str:
        data: dict[str, object] = {
            "version": STATE_VERSION,
            "sessions": {path: progress.to_json() for path, progress in sorted(self.sessions.items())},
            "pending": self.pending.to_json() if self.pending is not None else None,
        }
        if self.origins:
            data["entries"] = {str(cursor): self.origins[cursor].to_json() for cursor in sorted(self.origins)}
        # A pending entry may quote a lone surrogate (an emoji cut in half in a session, a byte
        # of an unreadable line): UTF-8 cannot encode it, its escape round-trips unchanged.
        return json_dumps_utf8(data, indent=1) + "\n"


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
        entries = data.get("entries", {})
        for cursor, item in entries.items() if isinstance(entries, dict) else ():
            origin = EntryOrigin.from_json(item)
            if origin is None or not str(cursor).isdigit():
                raise InputError(f"{layout.CONSOLIDATION}: the origin of entry {cursor} is unreadable", hint=hint)
            state.origins[int(cursor)] = origin
        if data.get("pending") is not None:
            state.pending = Pending.from_json(data["pending"])
            if state.pending is None:
                raise InputError(f"{layout.CONSOLIDATION}: the pending slice record is unreadable", hint=hint)
        return state

    def save(self, state: ConsolidationState, *, site: str) -> None:
        try:
            fsutil.atomic_write(self.path, state.to_json(), site=site)
        except OSError as exc:
            raise fsutil.os_error(exc, "write", self.path) from exc  # exit 2 when the workspace must be fixed


@contextlib.contextmanager
def consolidation_lock(root: Path, *, timeout: float = 0.0) -> Iterator[None]:
    """One consolidation per workspace at a time; another one finds it busy (exit 75)."""
    path = root / CONSOLIDATION_LOCK

    def busy() -> LockBusy:
        return LockBusy(
            f"another dream consolidate is running on this workspace ({CONSOLIDATION_LOCK} is held)",
            hint="nothing was done; the next run picks the sessions up",
        )

    with locks.exclusive(path, timeout=timeout, busy=busy, doing="take the consolidation lock"):
        yield


def history_cursor_bound(history_path: Path) -> int:
    """Every cursor in history.jsonl is at most this (new entries will be above it)."""
    try:
        return max_cursor_bound(history_path.read_bytes())
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise WorkspaceError(f"cannot read {history_path}: {fsutil.describe_os_error(exc)}") from exc


# --- nanobot 0.3.5's session store ---------------------------------------------------------------

NANOBOT_WORKSPACE_ID = ".nanobot/workspace-id"
NANOBOT_FILES_LOCK = ".session-files.lock"
NANOBOT_WORKSPACE_MARKER = ".workspace"
NANOBOT_CHECKPOINT_SUFFIX = ".checkpoint.json"  # session/manager.py _RUNTIME_CHECKPOINT_SUFFIX
_WORKSPACE_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class NanobotStore:
    """Where nanobot 0.3.5 keeps this workspace's sessions, or why none was found."""

    folder: Path | None
    detail: str


def _names_workspace(namespace: Path, workspace: Path) -> bool | None:
    """Whether ``namespace/.workspace`` names ``workspace`` (None: it names no existing folder)."""
    try:
        recorded = Path(namespace.joinpath(NANOBOT_WORKSPACE_MARKER).read_text(encoding="utf-8").strip()).expanduser()
    except (OSError, UnicodeError):
        return None
    if not str(recorded).strip():
        return None
    resolved = Path(os.path.realpath(recorded))
    if resolved == workspace:
        return True
    try:
        return recorded.samefile(workspace) if recorded.exists() else None
    except OSError:
        return None


def find_nanobot_sessions(workspace: Path, roots: Sequence[Path]) -> NanobotStore:
    """This workspace's folder in nanobot 0.3.5's session store, found as nanobot finds it.

    nanobot (session/manager.py, ``JsonlSessionStore``) names the folder after a random id kept in
    ``<workspace>/.nanobot/workspace-id`` and records the workspace's path in the folder's
    ``.workspace``; without the id file it looks for a folder whose ``.workspace`` names the
    workspace. ``roots`` are the candidate ``<nanobot data dir>/sessions`` folders (beside the
    nanobot config.json in use, and ``~/.nanobot/sessions``). A folder whose ``.workspace`` names
    another existing folder belongs to that one (this workspace is a copy): it is not used.
    """
    ws = Path(os.path.realpath(workspace))
    marker = ws / NANOBOT_WORKSPACE_ID
    workspace_id: str | None = None
    if marker.is_file() and not marker.is_symlink():
        with contextlib.suppress(OSError, UnicodeError):
            value = marker.read_text(encoding="utf-8").strip()
            workspace_id = value if _WORKSPACE_ID.fullmatch(value) else None
        if workspace_id is None:
            return NanobotStore(None, f"{NANOBOT_WORKSPACE_ID} does not hold a 32-character id")
    searched: list[str] = []
    for root in dict.fromkeys(Path(os.path.abspath(r)) for r in roots):
        if not root.is_dir():
            continue
        searched.append(str(root))
        if workspace_id is not None:
            folder = root / workspace_id
            if not folder.is_dir() or folder.is_symlink():
                continue
            owner = _names_workspace(folder, ws)
            if owner is False:
                return NanobotStore(
                    None,
                    f"{folder} belongs to another workspace (its .workspace names another folder): "
                    "this workspace is a copy, and nanobot gives it a store of its own on its next start",
                )
            return NanobotStore(folder, f"nanobot 0.3.5 session store {folder} ({NANOBOT_WORKSPACE_ID})")
        matches = [
            folder
            for folder in sorted(root.iterdir())
            if _WORKSPACE_ID.fullmatch(folder.name) and folder.is_dir() and _names_workspace(folder, ws)
        ]
        if len(matches) == 1:
            return NanobotStore(matches[0], f"nanobot 0.3.5 session store {matches[0]} (its .workspace names this one)")
        if len(matches) > 1:
            return NanobotStore(None, f"several folders of {root} claim this workspace; nanobot refuses to start so")
    where = ", ".join(searched) if searched else "no nanobot session store on this machine"
    return NanobotStore(None, f"no nanobot 0.3.5 sessions for this workspace ({where})")


def is_in_nanobot_store(path: Path) -> bool:
    """A session file in nanobot 0.3.5's store (its folder holds the store's marker or lock)."""
    folder = path.parent
    return _WORKSPACE_ID.fullmatch(folder.name) is not None and (
        (folder / NANOBOT_WORKSPACE_MARKER).is_file() or (folder / NANOBOT_FILES_LOCK).exists()
    )


# --- --update-sessions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataUpdate:
    status: str  # "written" | "unchanged" | "skipped" | "replaced"
    detail: str = ""


def session_lock_path(path: Path) -> Path:
    """The lock a session's writer honours: nanobot 0.3.5's ``.session-files.lock`` in its store,
    else ``sessions/<file>.lock`` (agents that honour it never write the session while held)."""
    if is_in_nanobot_store(path):
        return path.parent / NANOBOT_FILES_LOCK
    return path.with_name(path.name + ".lock")


def update_last_consolidated(
    path: Path, value: int, *, prefix: str | None = None, timeout: float = SESSION_LOCK_TIMEOUT
) -> MetadataUpdate:
    """Write the consolidated-message count ``value`` into the session file's metadata line, under
    the field(s) the agent reads (``keys_to_write``: nanobot 0.3.5 reads ``last_archived``).

    Only the digits of those values change (or a key is added at the end of the line); every
    other byte and line stays as it was. Done under ``session_lock_path``. The file is replaced
    atomically; it is re-read if it changed between the read and the write (a writer that does
    not honour the lock), so a message appended meanwhile is never dropped. A value that would
    move the watermark backwards is not written. ``prefix`` (``consolidated_prefix`` of the
    session as consolidated): the value is written only while the file's first ``value`` messages
    are still those; a session reset meanwhile (a new file, other messages) is left alone, status
    ``replaced``, or its first messages would count as consolidated and never reach history.
    """
    # The agent's own lock, taken with the library nanobot takes it with (it defines the lock).
    import filelock

    lock_path = session_lock_path(path)
    lock = filelock.FileLock(str(lock_path), timeout=timeout)
    try:
        lock.acquire()
    except filelock.Timeout:  # before OSError: filelock's Timeout is a TimeoutError
        return MetadataUpdate("skipped", f"{lock_path.name} was held for more than {timeout:g} s")
    except OSError as exc:
        return MetadataUpdate("skipped", f"cannot take {lock_path.name}: {fsutil.describe_os_error(exc)}")
    try:
        for _ in range(5):
            update = _try_update(path, value, prefix)
            if update is not None:
                return update
        return MetadataUpdate("skipped", "the file kept changing while it was updated (a writer ignores the lock)")
    finally:
        lock.release()


def _try_update(path: Path, value: int, prefix: str | None) -> MetadataUpdate | None:
    """One read and write of the metadata line; None when the file changed in between (so the
    caller reads it again)."""
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
    if prefix is not None and consolidated_prefix(parse_session(session_text(data)), value) != prefix:
        return MetadataUpdate(
            "replaced",
            f"the file no longer holds the {value} message(s) consolidated (the session was reset or replaced)",
        )
    keys = keys_to_write(line, nanobot_store=is_in_nanobot_store(path))
    if current >= value and all(_key_value(line, k) == current for k in keys):
        return MetadataUpdate("unchanged", f"{' and '.join(keys)} already {current}")
    if current > value:
        return MetadataUpdate("unchanged", f"{keys[0]} is already {current}")
    updated = with_progress(line, value, keys)
    if updated is None:
        return MetadataUpdate("skipped", f"{' and '.join(keys)} cannot be set without rewriting other fields")
    sidecar = runtime_checkpoint(path)
    if sidecar is not None:
        # nanobot 0.3.5 drops a checkpoint older than its session file unread (the turn is lost).
        return MetadataUpdate(
            "skipped",
            f"{sidecar.name} holds a turn nanobot has not finished (its gateway is in that turn, or "
            "stopped in it); writing the session file now would make nanobot discard it: a later "
            "run writes the value once nanobot has finished that turn",
        )
    try:
        if FileSignature.of(path) != before:
            return None
        fsutil.atomic_write(path, updated.encode("utf-8") + data[end:], site=SITE_SESSION)
    except OSError as exc:
        raise WorkspaceError(f"cannot write session file {path}: {fsutil.describe_os_error(exc)}") from exc
    return MetadataUpdate("written", f"{' and '.join(keys)} {current} -> {value}")


def runtime_checkpoint(path: Path) -> Path | None:
    """nanobot 0.3.5's sidecar ``<name>.checkpoint.json`` of the session file ``path``, where a
    gateway keeps the turn it is in until that turn is finished; None when there is none."""
    if not path.name.endswith(".jsonl"):
        return None
    sidecar = path.with_name(path.name.removesuffix(".jsonl") + NANOBOT_CHECKPOINT_SUFFIX)
    return sidecar if os.path.lexists(sidecar) else None


def _key_value(line: str, key: str) -> int | None:
    with contextlib.suppress(ValueError):
        obj = json.loads(line)
        value = obj.get(key) if isinstance(obj, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _current_value(line: str) -> int | None:
    """The watermark nanobot reads from a metadata line (``last_archived``, else
    ``last_consolidated``; 0 when neither), None when it is no metadata line."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("_type") != "metadata":
        return None
    for key in ("last_archived", "last_consolidated"):
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def progress_key(root: Path, path: Path) -> str:
    """How a session file is named in memory/.consolidation.json: relative to the workspace when
    inside it (so the workspace can move), else absolute."""
    resolved = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    try:
        return resolved.relative_to(base).as_posix()
    except ValueError:
        return resolved.as_posix()


def locate_session(raw: str, places: Sequence[Path]) -> Path:
    """A ``--session`` argument as a session file: the path itself when absolute, else the first
    of ``places`` that holds it. InputError when there is none, or it is not a file."""
    candidate = Path(raw).expanduser()
    options = [candidate] if candidate.is_absolute() else [place / candidate for place in places]
    found = next((p for p in options if p.exists()), None)
    if found is None:
        where = "" if candidate.is_absolute() else f" (looked in {', '.join(map(str, places))})"
        raise InputError(f"session file {raw} does not exist{where}")
    if not found.is_file():
        raise InputError(f"{found} is not a session file")
    return found


def session_files(folder: Path | None) -> tuple[list[Path], list[str]]:
    """The ``*.jsonl`` files of a sessions folder, sorted (none when there is no such folder), and
    what was passed over: a ``*.jsonl`` name that is a link to nothing or not a file, said in
    words, so a session that cannot be read is a warning rather than missing from the count."""
    if folder is None or not folder.is_dir():
        return [], []
    files: list[Path] = []
    passed_over: list[str] = []
    for path in sorted(folder.glob("*.jsonl")):
        if path.is_file():
            files.append(path)
        elif path.is_symlink() and not path.exists():
            passed_over.append(f"{path} is a link that leads to no file ({os.readlink(path)}): not read")
        else:
            passed_over.append(f"{path} is not a file: not read")
    return files, passed_over


def session_file_gone(root: Path, rel: str) -> bool:
    """Whether the session file recorded as ``rel`` (workspace-relative, or absolute) is gone."""
    return not (root / rel).exists() and not Path(rel).exists()
