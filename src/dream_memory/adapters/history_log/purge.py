"""``dream forget`` over history.jsonl and memory/archive/: each line holding the value is
rewritten in place (the value replaced inside its strings), under the history lock, so every
entry keeps its cursor and its place and the cursors stay consecutive. Each file is one atomic
rewrite and a rerun finds nothing left to change, so a crash between two files is finished by
running the same purge again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.base import _read_from
from dream_memory.adapters.history_log.log import HistoryLog
from dream_memory.core import layout
from dream_memory.core.forget import TextChange
from dream_memory.core.history import parse_line, split_physical_lines
from dream_memory.errors import HistoryError

LinePurge = Callable[[str], TextChange]


@dataclass
class HistoryPurge:
    """What the purge changed (or, in a dry run, would change) in the history files."""

    files: dict[str, list[int]] = field(default_factory=dict)  # file -> 1-based lines changed
    cursors: list[int] = field(default_factory=list)  # entries whose content changed
    # The value is in history.jsonl's last line, which has no newline (yet): left as it is.
    in_unterminated_tail: bool = False

    @property
    def lines(self) -> int:
        return sum(len(v) for v in self.files.values())


def _cursors(text: str, lines: tuple[int, ...]) -> list[int]:
    physical = split_physical_lines(text)
    found: list[int] = []
    for number in lines:
        if number <= len(physical):
            found += [e.cursor for e in parse_line(physical[number - 1], number).entries]
    return found


def purge_history(log: HistoryLog, purge: LinePurge, *, dry_run: bool) -> HistoryPurge:
    """Rewrite (or, ``dry_run``, only find) the lines of history.jsonl and the archive that hold
    the value. ``purge`` turns a file's text into its purged text (``core.forget.purge_jsonl``)."""
    result = HistoryPurge()
    with log.lock():
        try:
            if not dry_run:
                log._recover_locked()
            with log._snapshot() as snap:
                if snap.fd is not None:
                    # A snapshot holds complete lines only: a last line without a newline may be a
                    # writer's line half written (its rest would then land after a rewrite, cut
                    # off from it). So it is never rewritten, and a value in it is reported.
                    tail = _read_from(snap.fd, snap.end)
                    tail = tail[tail.rfind(b"\n") + 1 :]
                    result.in_unterminated_tail = bool(purge(tail.decode("utf-8", errors="surrogateescape")).lines)
                text = snap.data.decode("utf-8", errors="surrogateescape")
                change = purge(text)
                if change.lines:
                    result.files[layout.HISTORY] = list(change.lines)
                    result.cursors += _cursors(text, change.lines)
                    if not dry_run:
                        log._rewrite_locked(snap, change.text.encode("utf-8", errors="surrogateescape"))
            for path in log.archive_files():
                _purge_file(path, purge, result, dry_run=dry_run)
        except OSError as exc:
            raise HistoryError(f"purging {layout.HISTORY} failed: {fsutil.describe_os_error(exc)}") from exc
    return result


def _purge_file(path: Path, purge: LinePurge, result: HistoryPurge, *, dry_run: bool) -> None:
    data = path.read_bytes()
    text = data.decode("utf-8", errors="surrogateescape")
    change = purge(text)
    if not change.lines:
        return
    rel = f"{layout.ARCHIVE_DIR}/{path.name}"
    result.files[rel] = list(change.lines)
    result.cursors += _cursors(text, change.lines)
    if not dry_run:
        fsutil.atomic_write(path, change.text.encode("utf-8", errors="surrogateescape"), site="forget.archive")
