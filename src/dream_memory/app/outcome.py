"""A report's status and the exit code it means: the one table (docs/reference/exit-codes.md is
generated from it and from the error classes).

Every face asks ``exit_code(...)``: the CLI turns it into the process's exit code, the API
exposes it as ``report.exit_code``, the MCP server reports ``isError`` for anything but 0. An
error is its ``DreamError.exit_code`` (2 bad input, 75 locked, 1 the rest).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final, Protocol

from dream_memory.errors import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, DreamError, InputError


class Status(StrEnum):
    OK = "ok"
    NOTHING_TO_DO = "nothing_to_do"
    DRY_RUN = "dry_run"
    HELD = "held"
    SET_ASIDE = "set_aside"
    BUDGET_EXHAUSTED = "budget_exhausted"
    FAILED = "failed"
    LOCKED = "locked"
    INTERRUPTED = "interrupted"


# Exit codes of a run stopped by a signal: the shell's 128 + the signal's number.
EXIT_SIGNAL_BASE: Final = 128
SIGINT: Final = 2  # signal.SIGINT on every POSIX system (written out: app imports no system module)
SIGTERM: Final = 15
EXIT_INTERRUPTED: Final = EXIT_SIGNAL_BASE + SIGINT  # 130: Ctrl-C, GitHub's first cancel step
SIGPIPE: Final = 13
# stdout closed early (`dream log | head -1`): a silent exit with the code git's own death by
# SIGPIPE shows in the shell.
EXIT_BROKEN_PIPE: Final = EXIT_SIGNAL_BASE + SIGPIPE  # 141

EXIT_FOR_STATUS: Final[Mapping[Status, int]] = {
    Status.OK: EXIT_OK,
    Status.NOTHING_TO_DO: EXIT_OK,
    Status.DRY_RUN: EXIT_OK,
    Status.HELD: EXIT_OK,
    Status.SET_ASIDE: EXIT_OK,
    Status.BUDGET_EXHAUSTED: EXIT_OK,
    Status.FAILED: EXIT_FAILED,
    Status.LOCKED: EXIT_LOCKED,
    Status.INTERRUPTED: EXIT_INTERRUPTED,
}

# What each status means, for the generated reference page.
MEANING: Final[Mapping[Status, str]] = {
    Status.OK: "the work was done",
    Status.NOTHING_TO_DO: "there was nothing new to do",
    Status.DRY_RUN: "a dry run: nothing was changed",
    Status.HELD: "changes wait for a person (dream review); the rest of their batches landed",
    Status.SET_ASIDE: "entries were set aside and recorded; the run went on",
    Status.BUDGET_EXHAUSTED: "a token, cost or time budget stopped the run between batches",
    Status.FAILED: "a batch, a session or a scenario failed; nothing of it was committed",
    Status.LOCKED: "another run holds the workspace; nothing was done",
    Status.INTERRUPTED: "stopped by a signal (128 + its number: 130 SIGINT, 143 SIGTERM)",
}
# Which reports carry each status.
REPORTED_BY: Final[Mapping[Status, str]] = {
    Status.OK: "run, consolidate, eval",
    Status.NOTHING_TO_DO: "run, consolidate",
    Status.DRY_RUN: "run, consolidate",
    Status.HELD: "run",
    Status.SET_ASIDE: "run",
    Status.BUDGET_EXHAUSTED: "run",
    Status.FAILED: "run, consolidate, eval",
    Status.LOCKED: "run, consolidate",
    Status.INTERRUPTED: "run, consolidate, eval (the signal's own exit code)",
}


class HasStatus(Protocol):
    @property
    def status(self) -> str: ...


def exit_for_signal(signum: int) -> int:
    return EXIT_SIGNAL_BASE + int(signum)


def exit_code(outcome: HasStatus | DreamError | None) -> int:
    """The exit code of a finished use case: a report's status, an error's kind, 0 for a report
    without a status (init, status, log, restore, context, ...)."""
    if outcome is None:
        return EXIT_OK
    if isinstance(outcome, DreamError):
        return outcome.exit_code
    status = getattr(outcome, "status", None)
    if status is None:
        return EXIT_OK
    if status == Status.FAILED:
        # A run refused for bad input (a crafted tree, a merge in progress) failed with exit 2.
        return int(getattr(outcome, "failed_exit", EXIT_FAILED))
    if status == Status.INTERRUPTED:  # the signal's own code: 143 for SIGTERM, 130 for SIGINT
        return exit_for_signal(getattr(outcome, "stopped_by", None) or SIGINT)
    return EXIT_FOR_STATUS[Status(status)]


def as_error(exc: DreamError | OSError | RecursionError) -> DreamError:
    """What ended a command, as the package's error (message, hint, the exit code of the one
    table): the CLI's last line and the failed report of a run that could not go on say the same."""
    if isinstance(exc, DreamError):
        return exc
    if isinstance(exc, OSError):
        return os_error(exc)
    return InputError(
        "the input is nested too deeply to be read (JSON thousands of levels deep?)",
        hint="check the config file and the workspace's JSON files (memory/.dream_state.json, ...)",
    )


def os_error(exc: OSError) -> DreamError:
    """An OSError no adapter wrapped (a permission or a full disk met somewhere else) as the
    package's error: one message naming the path, never a traceback."""
    from dream_memory.adapters.fsutil import os_error as wrap

    return wrap(exc, "use")
