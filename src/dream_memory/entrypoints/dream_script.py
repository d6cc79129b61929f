"""The ``dream`` console script: ``dream search`` asks the store's resident reader first
(docs/read-side.md#the-resident-reader); everything else, and any search no server answers, is
the click command group (``entrypoints.cli``).

This module is the fast path, so it imports only the standard library and the socket client:
not click, pydantic, dulwich or the read service (``python -X importtime -m
dream_memory.entrypoints.dream_script search x`` shows it). Which store's socket to ask is a guess
from the same precedence the settings use (``--store`` > ``DREAM_MEMORY_STORE`` > ``--workspace``
> ``DREAM_WORKSPACE`` > ``~/.nanoinfra/workspaces/default``); the server derives the store again
with the real code and declines a request for another one, so a wrong guess costs only the
fallback. Relative or ``~`` paths are not guessed (the server has another current folder).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# Long enough for a warm search of a large store; a slower server (busy, stopped, building its
# index) is not waited for: the client searches itself.
TIMEOUT_S = 2.0


def _options(argv: Sequence[str]) -> dict[str, str]:
    """``--store`` and ``--workspace``/``-w`` as given (last one wins, as in click)."""
    found: dict[str, str] = {}
    names = {"--store": "store", "--workspace": "workspace", "-w": "workspace"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in names and name != "-w" and eq:
            found[names[name]] = value
        elif arg in names and i + 1 < len(argv):
            found[names[arg]] = argv[i + 1]
            i += 1
        elif arg.startswith("-w") and not arg.startswith("--") and len(arg) > 2:
            found["workspace"] = arg[2:]
        i += 1
    return found


def guess_store(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    given = _options(argv)
    store = given.get("store") or (None if "store" in given else env.get("DREAM_MEMORY_STORE") or None)
    if store is None:
        store = given.get("workspace") or env.get("DREAM_WORKSPACE") or None
    if store is None:
        home = env.get("HOME") or ""
        store = os.path.join(home, ".nanoinfra", "workspaces", "default") if home else None
    if store is None or not os.path.isabs(store):
        return None
    return store


def served_search(argv: list[str], env: Mapping[str, str]) -> int | None:
    """Print a resident reader's answer to ``dream search ARGV`` and return its exit code; None
    when no trusted server answered (nothing printed then)."""
    store = guess_store(argv, env)
    if store is None:
        return None
    from dream_memory.app.search_client import ask_resident

    answer = ask_resident(store, argv, env, TIMEOUT_S)
    if answer is None:
        return None
    code, out, err = answer
    try:
        sys.stderr.write(err)
        sys.stderr.flush()
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        # As the one-shot command: no message, exit 141 (stdout pointed at /dev/null so that
        # Python's flush at exit does not complain).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


def main() -> None:
    if sys.argv[1:2] == ["search"]:
        code = served_search(sys.argv[2:], os.environ)
        if code is not None:
            raise SystemExit(code)
    from dream_memory.entrypoints.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
