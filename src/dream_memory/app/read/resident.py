"""The resident reader: a long-lived process (``dream mcp``) also answers ``dream search`` over
its store's unix socket (docs/read-side.md#the-resident-reader).

The process lends two things and nothing else: its imports, already done, and a ``StoreWatch``
on its store, which spares the per-file ``lstat`` that proves the search index fresh. Everything
that shapes an answer (arguments, environment, store root, excludes, scope, cache folder) is
derived again for each request from what the client sent, by the same code the one-shot
``dream search`` runs; so no configuration of the server can leak into an answer. A request
that resolves to another store than the one watched, or that the face cannot answer exactly as
the one-shot command would (an error, a usage problem, a history search needing the config
file), is answered with ``fallback``: the client then runs the one-shot command itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dream_memory.adapters import read_socket
from dream_memory.adapters.store_watch import StoreWatch
from dream_memory.app.search_client import PROTOCOL


class NotThisStore(Exception):
    """The request's store is not the one this reader watches: the client searches itself."""


# (argv, env, the watch for a store root) -> (exit code, stdout, stderr), or None: fall back
Answer = Callable[[list[str], dict[str, str], Callable[[Path], StoreWatch]], "tuple[int, str, str] | None"]


class ResidentReader:
    """Serves searches of ``root`` on its socket (where ``env`` puts it) while open; ``serving``
    is False when another live server already holds the socket, or no socket folder can be made."""

    def __init__(self, root: Path, answer: Answer, env: Mapping[str, str]) -> None:
        self._root = Path(root)
        self._identity = read_socket.identity(self._root)
        self._answer = answer
        self._watch: StoreWatch | None = None
        self._guard = threading.Lock()
        folder = read_socket.server_folder(str(self._root), env)
        self._server = read_socket.serve(folder, self._handle) if folder is not None else None

    @property
    def serving(self) -> bool:
        return self._server is not None

    def _watch_for(self, store: Path) -> StoreWatch:
        if read_socket.identity(store) != self._identity:
            raise NotThisStore(str(store))
        with self._guard:
            if self._watch is None:
                self._watch = StoreWatch(str(self._root))
            return self._watch

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        argv, env = request.get("argv"), request.get("env")
        if request.get("v") != PROTOCOL or not _strings(argv) or not isinstance(env, dict) or not _strings(env):
            return {"fallback": "not a request of this version"}
        assert isinstance(argv, list)
        try:
            done = self._answer(argv, env, self._watch_for)
        except NotThisStore:
            return {"fallback": "another store"}
        if done is None:
            return {"fallback": "not answered here"}
        code, out, err = done
        return {"code": code, "stdout": out, "stderr": err}

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with self._guard:
            if self._watch is not None:
                self._watch.close()
                self._watch = None

    def __enter__(self) -> ResidentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _strings(value: object) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return False
