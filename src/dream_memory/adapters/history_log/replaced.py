"""The replaced history.jsonl, kept under a name of its own until what other writers appended to it
is safe in the new file.

A rewrite renames a new history.jsonl over the old one, then drains into it what a writer without
the lock (nanobot) still appends to the old one (base.py, ``_drain``). Until the drain is done,
those lines exist only in the old file; had only our open descriptor kept it, a rewrite killed
during the drain (an OOM kill, a pod eviction) would have taken them with it, unreported. So the
old file first gets a second name, ``memory/.history.replaced.<offset>`` (``<offset>``: the byte
up to which the new file already holds its text), removed once the drain is over; and the next
writer finds a name left behind and carries what is still missing (``ReplacedFiles``).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.adapters.history_log.base import LogBase, _lines_of, _read_from, raw_bytes
from dream_memory.core import layout
from dream_memory.core.history import HistoryEntry, ParsedLine

_PREFIX = Path(layout.HISTORY_REPLACED).name + "."
SITE = "history.replaced"
# Filesystems that give a file no second name: the rewrite goes on as it did before (the drain
# still runs; only a kill during it can lose what it had not carried yet).
_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV)


def _keep(path: Path, fd: int, offset: int) -> Path | None:
    kept = path.with_name(f"{_PREFIX}{offset}")
    made = True
    try:
        fsutil.link(path, kept, site=SITE)
    except FileExistsError:
        made = False  # kept already, if it is the same file (below)
    except OSError as exc:
        if exc.errno in _NO_LINKS:
            return None
        raise
    theirs, ours = os.lstat(kept), os.fstat(fd)
    if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
        # history.jsonl is no longer the file read (another program replaced it), or a name a
        # recovery has not carried yet is in the way: neither may be removed by this rewrite.
        if made:
            fsutil.remove(kept, site=SITE)
        return None
    return kept


def _offset(name: str) -> int | None:
    tail = name[len(_PREFIX) :]
    return int(tail) if name.startswith(_PREFIX) and tail.isascii() and tail.isdigit() else None


class ReplacedFiles(LogBase):
    """HistoryLog's replaced history.jsonl: kept by name during a rewrite, carried from after a
    killed one."""

    def _keep_replaced(self, fd: int, offset: int) -> Path | None:
        """Give the file behind ``fd`` (history.jsonl, about to be replaced) the name that keeps it,
        durably; None where this filesystem has no hard links, or history.jsonl is no longer it."""
        return _keep(self.path, fd, offset)

    def _carry_replaced(self, names: list[str]) -> None:
        """Carry into history.jsonl every line of a kept file past its offset that history.jsonl
        and the archive do not hold yet, then remove the name. ``names``: memory/'s listing.

        Only what lies past the offset: the text before it went into the rewrite, which may have
        left lines out on purpose (archived, forgotten, a superseded copy). A line counts as held
        when each of its entries (cursor and text) is in history.jsonl or the archive, and a line
        without an entry when history.jsonl has it as it is: the drain may have carried part of it
        before the kill, and a line is carried once.
        """
        for name in sorted(names):
            offset = _offset(name)
            if offset is None:
                continue
            kept = self.path.parent / name
            try:
                fd = os.open(kept, os.O_RDONLY | fsutil.NOFOLLOW)
            except FileNotFoundError:
                continue
            try:
                ours = os.fstat(fd)
                with contextlib.suppress(FileNotFoundError):
                    now = os.stat(self.path)
                    if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):
                        fsutil.remove(kept, site=SITE)  # killed before the rename: nothing was replaced
                        continue
                late = [line for line in _lines_of(_read_from(fd, offset)) if not line.is_blank]
            finally:
                os.close(fd)
            missing = self._not_held(late)
            if missing:
                self._carry(raw_bytes(line.raw for line in missing))
                cursors = [e.cursor for line in missing for e in line.entries]
                message = (
                    f"carried {len(missing)} line(s) (cursors {', '.join(map(str, cursors)) or 'none'}) into "
                    f"{layout.HISTORY} that another writer appended while an interrupted rewrite replaced it "
                    f"(kept as memory/{name})"
                )
                self.rewrite_notes.append(message)
                self._note(message)
            fsutil.remove(kept, site=SITE)

    def _not_held(self, lines: list[ParsedLine]) -> list[ParsedLine]:
        if not lines:
            return []
        try:
            current = _lines_of(fsutil.read_own(self.path))
        except FileNotFoundError:
            current = []
        held: set[HistoryEntry] = {e for line in current for e in line.entries}
        raws = {line.raw for line in current}
        if any(line.entries for line in lines):
            held.update(self.archive_entries())
        return [
            line
            for line in lines
            if (any(e not in held for e in line.entries) if line.entries else line.raw not in raws)
        ]
