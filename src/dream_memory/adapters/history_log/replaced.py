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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class WaitingLines:
    """Lines a killed rewrite left only in its kept file, until the next writer carries them."""

    file: str  # memory/.history.replaced.<offset>
    lines: int
    cursors: tuple[int, ...]  # of the entries among them (a line may hold none, or several)

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "lines": self.lines, "cursors": list(self.cursors)}


def _cursors(lines: list[ParsedLine]) -> str:
    return ", ".join(str(e.cursor) for line in lines for e in line.entries) or "none"


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
            found = self._late_lines(name)
            if found is None:
                continue
            kept, missing = found
            if missing:
                self._carry(raw_bytes(line.raw for line in missing))
                message = (
                    f"carried {len(missing)} line(s) (cursors {_cursors(missing)}) into "
                    f"{layout.HISTORY} that another writer appended while an interrupted rewrite replaced it "
                    f"(kept as memory/{name})"
                )
                self.rewrite_notes.append(message)
                self._note(message)
            fsutil.remove(kept, site=SITE)

    def waiting_replaced(self) -> list[WaitingLines]:
        """Reads only: each name a killed rewrite left with lines the next writer will carry
        (``dream status``, ``dream doctor``); a name with nothing left to carry is not listed."""
        try:
            names = os.listdir(self.path.parent)
        except FileNotFoundError:
            return []
        waiting = []
        for name in sorted(names):
            found = self._late_lines(name, read_only=True)
            if found is not None and found[1]:
                missing = found[1]
                cursors = tuple(e.cursor for line in missing for e in line.entries)
                waiting.append(WaitingLines(f"{Path(layout.HISTORY_REPLACED).parent}/{name}", len(missing), cursors))
        return waiting

    def _late_lines(self, name: str, *, read_only: bool = False) -> tuple[Path, list[ParsedLine]] | None:
        """The kept file ``name`` is, with its lines past the offset that history.jsonl and the
        archive do not hold; None when ``name`` is no such file. A name still on history.jsonl
        itself (killed before the rename: nothing was replaced) is removed, or, ``read_only``,
        given with nothing to carry."""
        offset = _offset(name)
        if offset is None:
            return None
        kept = self.path.parent / name
        try:
            fd = os.open(kept, os.O_RDONLY | fsutil.NOFOLLOW)
        except FileNotFoundError:
            return None
        try:
            ours = os.fstat(fd)
            with contextlib.suppress(FileNotFoundError):
                now = os.stat(self.path)
                if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):
                    if read_only:
                        return kept, []
                    fsutil.remove(kept, site=SITE)
                    return None
            late = [line for line in _lines_of(_read_from(fd, offset)) if not line.is_blank]
        finally:
            os.close(fd)
        return kept, self._not_held(late)

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
