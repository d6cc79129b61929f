"""The client half of the resident reader: ask the store's server to run ``dream search``
(docs/read-side.md#the-resident-reader; the server half is ``app.read.resident``).

Kept out of the ``app.read`` package on purpose: importing that package loads the whole read
service, and this module is on the fast path of ``dream search``, before click.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dream_memory.adapters.read_socket import ask, server_folder

PROTOCOL = 1


def ask_resident(
    store: str, argv: Sequence[str], env: Mapping[str, str], timeout: float
) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) of ``dream search ARGV`` run with ``env``, as the store's
    resident reader ran it; None when no trusted server answered or it declined."""
    folder = server_folder(store, env)
    if folder is None:
        return None
    answer = ask(folder, {"v": PROTOCOL, "argv": list(argv), "env": dict(env)}, timeout)
    if answer is None:
        return None
    code, out, err = answer.get("code"), answer.get("stdout"), answer.get("stderr")
    if not isinstance(code, int) or not isinstance(out, str) or not isinstance(err, str):
        return None  # declined ("fallback") or not understood
    return code, out, err
