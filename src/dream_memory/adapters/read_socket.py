"""The resident reader's unix socket: one JSON request, one JSON answer, same user only
(docs/read-side.md#the-resident-reader).

The socket lives outside the store (the read side writes nothing there): in
``$XDG_RUNTIME_DIR/dream-memory/read-<hash of the store's real path>/socket``, else under the
search cache's base (``$XDG_CACHE_HOME``, else ``~/.cache``). The folder is 0700, the socket
0600. Who may talk to it, checked on both sides:

- the client opens the folder without following a symlink, checks on that open descriptor that
  it is a folder owned by this user with no access for group or others, checks that the socket
  in it is a socket owned by this user, and connects through ``/proc/self/fd/N/socket`` (so the
  folder checked is the folder connected through, and a long path does not hit the socket path
  limit of 107 bytes);
- the server checks the peer's uid (``SO_PEERCRED``) equals its own, else it closes unanswered.

One server per folder: a server holds an exclusive ``flock`` on ``lock`` beside the socket for
its whole life; only the holder removes or replaces the socket. A second server finds the lock
taken and does not serve; a server that died (SIGKILL) leaves a socket nobody listens on, which
a client finds refused (it falls back) and the next server replaces.

Standard library only: the client half runs on ``dream search``'s fast path, before click.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

try:  # hashlib would load OpenSSL first (3 ms of the fast path); blake2 is built in
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the builtin module
    from hashlib import blake2b

SOCKET_NAME = "socket"
LOCK_NAME = "lock"
MAX_MESSAGE = 4 << 20  # an answer holds at most 50 sources of three lines each; far below this
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def _read_all(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_MESSAGE:
            raise ValueError("message too long")
        chunks.append(chunk)


def identity(path: str | os.PathLike[str]) -> tuple[int, int]:
    """A folder's device and inode: the same store whatever path names it."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def server_folder(store: str, env: Mapping[str, str]) -> str | None:
    """The socket folder of ``store`` as seen with ``env``; None without an absolute base."""
    base = env.get("XDG_RUNTIME_DIR") or ""
    if not os.path.isabs(base):
        base = env.get("XDG_CACHE_HOME") or (os.path.join(env["HOME"], ".cache") if env.get("HOME") else "")
    if not os.path.isabs(base):
        return None
    key = blake2b(os.fsencode(os.path.realpath(store)), digest_size=12).hexdigest()
    return os.path.join(base, "dream-memory", f"read-{key}")


# --- the client ---------------------------------------------------------------------------------


def _owned_private_dir(fd: int) -> bool:
    st = os.fstat(fd)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def ask(folder: str, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """The server's answer to ``request``, or None when no trusted server answers in time (no
    socket, a folder or socket not this user's own or open to others, refused, timed out, closed
    mid-answer, a malformed answer): the caller then does the work itself."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _owned_private_dir(fd):
            return None
        st = os.stat(SOCKET_NAME, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(f"/proc/self/fd/{fd}/{SOCKET_NAME}")
            conn.sendall(json.dumps(request).encode())
            conn.shutdown(socket.SHUT_WR)
            answer = json.loads(_read_all(conn))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return answer if isinstance(answer, dict) else None


# --- the server ---------------------------------------------------------------------------------


class SocketServer:
    """Serves ``handler`` on the store's socket from a daemon thread, one connection at a time
    (a search takes milliseconds; a client waits at most its timeout, then does the work itself)."""

    def __init__(self, folder: int, lock: int, listener: socket.socket, handler: Handler, timeout: float) -> None:
        self._folder = folder
        self._lock = lock
        self._listener = listener
        self._handler = handler
        self._timeout = timeout
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dream-read-socket", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(self._timeout)
            _, uid, _ = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
            if uid != os.geteuid():
                return
            request = json.loads(_read_all(conn))
            answer = self._handler(request) if isinstance(request, dict) else {"fallback": "not a request"}
            conn.sendall(json.dumps(answer).encode())
        except (OSError, ValueError, RecursionError):
            return  # the client gave up or sent garbage: it does the work itself

    def close(self) -> None:
        """Stop serving and remove the socket (this server holds the lock: it is ours to remove)."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            os.unlink(SOCKET_NAME, dir_fd=self._folder)
        os.close(self._lock)  # releases the flock
        os.close(self._folder)


def serve(path: str, handler: Handler, *, timeout: float = 5.0) -> SocketServer | None:
    """Start serving ``handler`` on the socket in folder ``path`` (it and its parent created
    0700; the base above, ``$XDG_RUNTIME_DIR`` or the cache folder, must exist: a server makes no
    home folder on the way); None when the folder cannot be made, is not this user's own private
    folder, or another live server holds its lock."""
    try:
        for made in (os.path.dirname(path), path):
            with contextlib.suppress(FileExistsError):
                os.mkdir(made, 0o700)
    except OSError:
        return None
    try:
        folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    lock = -1
    try:
        if not _owned_private_dir(folder):
            raise OSError("socket folder not private")
        lock = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SOCKET_NAME, dir_fd=folder)  # left by a server that died: ours now, under the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(f"/proc/self/fd/{folder}/{SOCKET_NAME}")
        # Not through umask (process-wide: other threads create files). Until this chmod the
        # socket is reachable only through the 0700 folder, i.e. by this user alone.
        os.chmod(SOCKET_NAME, 0o600, dir_fd=folder)
        listener.listen(16)
    except OSError:
        if lock >= 0:
            os.close(lock)
        os.close(folder)
        return None
    return SocketServer(folder, lock, listener, handler, timeout)
