"""Start-of-run check: can this process write the workspace? (``dream run``'s first step.)

Without it, a workspace this process cannot write (a volume whose driver ignores Kubernetes'
``fsGroup``, a host folder mounted into a container that runs as another uid, ``docker run
--user`` not matching the owner, a read-only mount) fails deep inside the run with a
PermissionError on ``memory/.dream.lock``: exit 1, which schedulers retry, three pods in a row.
Retrying never helps, so this is a configuration error (exit 2) raised before any lock or work,
naming the path, its owner, this process's uid and the fixes.

It looks only where Dream writes: the workspace folder, the folders Dream creates files in, the
lock files it opens in place, and the git folders its commits land in. Everything else Dream
replaces by writing a temporary file and renaming it, which needs the folder, not the file.

``DREAM_UMASK`` (octal, e.g. ``0002``) sets the process umask first (every writing command's first
step: app/runtime.py), so that an agent and Dream
running under different uids with a shared group can both write what the other created
(docs/deploy-kubernetes.md, sharing a volume).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from dream_memory.core import layout
from dream_memory.errors import ConfigError

UMASK_ENV = "DREAM_UMASK"
# Folders Dream creates or replaces files in, when they exist (relative to the workspace).
_FOLDERS = ("memory", layout.DREAM_HELD_DIR, "entities", "sections", "skills", "prompts", ".git", ".git/refs/heads")
# Files Dream opens for writing in place (locks), when they exist.
_IN_PLACE = (layout.DREAM_LOCK, layout.HISTORY_LOCK, layout.CONSOLIDATION_LOCK)
_GIT_OBJECTS = ".git/objects"


class WorkspaceNotWritable(ConfigError):
    """This process cannot write a path Dream has to write (exit 2: retrying will not help)."""

    def __init__(self, message: str, *, hint: str, path: Path) -> None:
        super().__init__(message, hint=hint)
        self.path = path


# The umask is the process's, not a call's: library calls running at once (threads, one Workspace
# or several) share one record of the host's own umask, taken when the first begins and given
# back when the last ends. Saved per call, a second call saved the first's DREAM_UMASK as the
# host's (left for good), and the first to end took DREAM_UMASK from the other mid-run.
class _HostUmask:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.value = 0


_HOST_UMASK = _HostUmask()


@contextlib.contextmanager
def host_umask_kept() -> Iterator[None]:
    """Within the block ``apply_umask`` may change the umask; when no such block is left open in
    the process, the umask it had before the first one began is set back."""
    host = _HOST_UMASK
    with host.lock:
        if host.holders == 0:
            host.value = os.umask(0o077)
            os.umask(host.value)
        host.holders += 1
    try:
        yield
    finally:
        with host.lock:
            host.holders -= 1
            if host.holders == 0:
                os.umask(host.value)


def apply_umask(env: Mapping[str, str]) -> None:
    """Set the umask from ``DREAM_UMASK`` when it is set (``host_umask_kept`` gives the host's
    back to a library's host)."""
    raw = env.get(UMASK_ENV, "").strip()
    if not raw:
        return
    try:
        value = int(raw, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o777:
        raise ConfigError(
            f"{UMASK_ENV}={raw!r} is not an octal umask",
            hint="use e.g. 0002 (new files group-writable) or 0022 (the usual default)",
        )
    if value & 0o700:
        # Every file and folder made afterwards would deny its own owner: a lock file nobody can
        # open again, a memory folder nobody can enter; the workspace is unusable until chmod.
        raise ConfigError(
            f"{UMASK_ENV}={raw!r} takes permissions away from the files' own owner "
            "(the files and folders Dream creates would be unreadable or unwritable by this user)",
            hint="use e.g. 0002 (new files group-writable) or 0022 (the usual default)",
        )
    os.umask(value)


def check_workspace_writable(root: Path, *, lock_only: bool = False) -> None:
    """Raise WorkspaceNotWritable for the first path Dream needs to write and cannot.

    ``lock_only`` (a dry run) checks only what taking the Dream lock needs.
    """
    for path, is_dir in _targets(root, lock_only=lock_only):
        _check(root, path, is_dir)


def _targets(root: Path, *, lock_only: bool) -> Iterator[tuple[Path, bool]]:
    if not root.exists():
        # Dream creates the workspace: the nearest folder that exists has to take it.
        parent = root.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        yield parent, True
        return
    if lock_only:
        lock = root / layout.DREAM_LOCK
        if lock.exists():
            yield lock, False
        else:
            yield (root / "memory", True) if (root / "memory").is_dir() else (root, True)
        return
    yield root, True
    for rel in _FOLDERS:
        if (root / rel).is_dir():
            yield root / rel, True
    objects = root / _GIT_OBJECTS
    if objects.is_dir():
        yield objects, True
        # A new object lands in objects/<first two hex digits>/: each existing one must take it.
        with os.scandir(objects) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if len(entry.name) == 2 and entry.is_dir(follow_symlinks=False):
                    yield Path(entry.path), True
    for rel in _IN_PLACE:
        if (root / rel).is_file():
            yield root / rel, False


def _check(root: Path, path: Path, is_dir: bool) -> None:
    needed = os.W_OK | os.X_OK if is_dir else os.W_OK
    if os.access(path, needed):
        return
    shown = path if path == root or not path.is_relative_to(root) else path.relative_to(root)
    where = f"{shown} in {root}" if shown != path else str(path)
    if _read_only_fs(path):
        raise WorkspaceNotWritable(
            f"cannot write the workspace: {where} is on a read-only file system",
            hint="mount the workspace read-write (docker -v HOST:/workspace without :ro; Kubernetes "
            "volumeMounts readOnly: false); `dream run --dry-run` only needs the lock file to be writable",
            path=path,
        )
    info = path.stat()
    uid, gid = os.getuid(), os.getgid()
    groups = sorted(set(os.getgroups()) - {gid})
    in_groups = f", groups {','.join(map(str, groups))}" if groups else ""
    kind = "folder" if is_dir else "file"
    owner, group = info.st_uid, info.st_gid
    raise WorkspaceNotWritable(
        f"cannot write the workspace (permission denied): the {kind} {where} is owned by uid {owner} "
        f"(gid {group}, mode {stat.filemode(info.st_mode)}) and this process runs as uid {uid} (gid {gid}{in_groups})",
        hint=f"run as uid {owner} (docker run --user {owner}:{group}; Kubernetes securityContext.runAsUser: "
        f"{owner}), or share its group: set fsGroup: {group} (docker run --group-add {group}) and make the "
        f"workspace group-writable (chmod -R g+rwX), or chown -R {uid}:{gid} {root} once; "
        "docs/deploy-docker.md, file ownership",
        path=path,
    )


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
