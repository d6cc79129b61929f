"""``dream run --report FILE``: the report file, checked before any work and written after.

Written in place, not by rename: FILE may be /dev/stderr, a pipe or a symlink a CI step reads,
which a rename would replace instead of writing into.
"""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.errors import UsageError


def check_report_file(path: Path) -> Path:
    """A run must not commit batches and then fail on a report it could never write: opening for
    append creates the file and keeps what is there."""
    try:
        fsutil.touch_for_append(path)
    except OSError as exc:
        error = fsutil.os_error(exc, "write the report to", path)
        raise UsageError(f"--report: {error.message}", hint=error.hint) from exc
    return path


def write_report_file(path: Path, text: str) -> str | None:
    """Write the report; the reason when that failed (the report is on stdout anyway)."""
    try:
        fsutil.checkpoint("report.write", path)
        fsutil.write_in_place(path, text + "\n")
    except OSError as exc:
        return fsutil.os_error(exc, "write the report to", path).message
    return None
