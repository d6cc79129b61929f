"""``memory/.forgotten.json``: the audit record of ``dream forget`` and what the secret guard checks
later writes against (docs/forget.md).

The record never holds a purged value. Each purge is named by a keyed hash of the value
(BLAKE2b with a random 32-byte key kept in the same file) and its length; the guard slides a
window of that length over a text and compares hashes, so it can refuse the value without
knowing it. The file is untracked (outside every commit, like the locks): a hash of a short value
committed to a public repository could be reversed by trying every phone number, whereas the key
never leaves the machine. Copy the file along with the workspace to keep the guard (docs/forget.md).

The purge journal ``memory/.forget_journal.json`` (an interrupted purge, finished by a rerun)
lives here too.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_memory.adapters import fsutil
from dream_memory.adapters.rooted import RootedDir
from dream_memory.core import jsontext, layout
from dream_memory.errors import InputError

RECORD = layout.FORGOTTEN_RECORD
JOURNAL = layout.FORGET_JOURNAL
MARK = "[REDACTED:forgotten]"


def _digest(key: bytes, value: str) -> str:
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=key, digest_size=32).hexdigest()


# A rolling (Rabin-Karp) hash over code points picks the windows worth the keyed digest: a text
# of 50,000 characters with two purged values took 148 ms with a digest per window, 62 ms with
# this in front (one idle core; pure Python either way).
# Its base comes from the key, and it tells whoever holds the file nothing the digest beside it
# does not (both need the key, which is in the same file).
_RK_MOD = (1 << 31) - 1  # small ints: the sliding loop runs in Python


def fold(text: str) -> str:
    """Lower case, one character for one (a character whose lower case is longer stays): what a
    forgotten entity's name is matched by, so positions in the folded text are the text's."""
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _rk_base(key: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(b"rolling", key=key, digest_size=8).digest(), "big") % _RK_MOD or 257


def _rolling(base: int, value: str) -> int:
    h = 0
    for ch in value:
        h = (h * base + ord(ch)) % _RK_MOD
    return h


@dataclass
class Record:
    key: bytes
    purges: list[dict[str, Any]] = field(default_factory=list)

    def digest(self, value: str) -> str:
        return _digest(self.key, value)

    def rolling(self, value: str) -> int:
        return _rolling(_rk_base(self.key), value)

    def has(self, purge_id: str) -> bool:
        return any(p.get("id") == purge_id for p in self.purges)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "key": self.key.hex(), "purges": self.purges}


def _path(workspace: Path) -> Path:
    return workspace / RECORD


def load(workspace: Path) -> Record | None:
    """The record, or None when nothing was ever purged here. A damaged file is an error
    (exit 2): silently ignoring it would let purged values back in."""
    text = fsutil.read_text(_path(workspace))
    if text is None:
        return None
    try:
        data = jsontext.loads(text)
        key = bytes.fromhex(data["key"])
        purges = [p for p in data.get("purges", []) if isinstance(p, dict)]
        if len(key) < 16:
            raise ValueError("key too short")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{RECORD} is damaged ({exc}); the purged values it guards cannot be checked",
            hint="restore it from a backup of the workspace; deleting it lifts the guard on purged values",
        ) from exc
    return Record(key, purges)


def load_or_create(workspace: Path) -> Record:
    """The record, created with a fresh key when there is none (before anything is purged)."""
    record = load(workspace)
    if record is None:
        record = Record(secrets.token_bytes(32))
        save(workspace, record)
    return record


def save(workspace: Path, record: Record) -> None:
    fsutil.atomic_write(_path(workspace), json.dumps(record.to_json(), indent=2) + "\n", site="forget.record")


def read_journal(workspace: Path) -> dict[str, Any] | None:
    text = fsutil.read_text(workspace / JOURNAL)
    if text is None:
        return None
    try:
        data = jsontext.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def write_journal(workspace: Path, data: dict[str, Any]) -> None:
    fsutil.atomic_write(workspace / JOURNAL, json.dumps(data), site="forget.journal")


def remove_journal(workspace: Path) -> None:
    fsutil.remove(workspace / JOURNAL, site="forget.journal")


@dataclass(frozen=True)
class PurgedValues:
    """The values purged from a workspace, known only by keyed hash and length."""

    key: bytes
    by_length: dict[int, frozenset[str]]
    rolling: dict[int, frozenset[int]]  # per length: the rolling hashes (a length missing: none recorded)
    # Forgotten entities' names, matched in any case (``fold``): recorded by the digest of their
    # folded form. Before, only the exact spelling was refused, and `ZephyrCorp` came back after
    # `zephyrcorp` was forgotten.
    folded: dict[int, frozenset[str]] = field(default_factory=dict)
    folded_rolling: dict[int, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record | None) -> PurgedValues | None:
        if record is None:
            return None
        lengths: dict[int, set[str]] = {}
        rolling: dict[int, set[int]] = {}
        folded: dict[int, set[str]] = {}
        folded_rolling: dict[int, set[int]] = {}
        unfiltered: set[int] = set()
        for purge in record.purges:
            length, digest, rk = purge.get("length"), purge.get("digest"), purge.get("rolling")
            if isinstance(length, int) and length > 0 and isinstance(purge.get("folded"), str):
                folded.setdefault(length, set()).add(purge["folded"])
                folded_rolling.setdefault(length, set()).add(int(purge.get("folded_rolling", 0)))
            if isinstance(length, int) and length > 0 and isinstance(digest, str):
                lengths.setdefault(length, set()).add(digest)
                if isinstance(rk, int):
                    rolling.setdefault(length, set()).add(rk)
                else:
                    unfiltered.add(length)
        if not lengths and not folded:
            return None
        return cls(
            record.key,
            {n: frozenset(d) for n, d in lengths.items()},
            {n: frozenset(r) for n, r in rolling.items() if n not in unfiltered},
            {n: frozenset(d) for n, d in folded.items()},
            {n: frozenset(r) for n, r in folded_rolling.items()},
        )

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where purged values occur in ``text`` (non-overlapping, in order)."""
        found: list[tuple[int, int]] = []
        for length, digests in self.by_length.items():
            starts = (
                self._candidates(text, length, self.rolling[length])
                if length in self.rolling
                else range(len(text) - length + 1)
            )
            for start in starts:
                if _digest(self.key, text[start : start + length]) in digests:
                    found.append((start, start + length))
        if self.folded:
            low = fold(text)
            for length, digests in self.folded.items():
                for start in self._candidates(low, length, self.folded_rolling[length]):
                    if _digest(self.key, low[start : start + length]) in digests:
                        found.append((start, start + length))
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def _candidates(self, text: str, length: int, wanted: frozenset[int]) -> list[int]:
        """Window starts whose rolling hash is a purged value's."""
        if len(text) < length:
            return []
        base = _rk_base(self.key)
        top = pow(base, length - 1, _RK_MOD)
        codes = [ord(ch) for ch in text]
        mod = _RK_MOD
        h = 0
        for code in codes[:length]:
            h = (h * base + code) % mod
        starts = [0] if h in wanted else []
        for start, (out, new) in enumerate(zip(codes, codes[length:], strict=False), start=1):
            h = ((h - out * top) * base + new) % mod
            if h in wanted:
                starts.append(start)
        return starts

    def scrub(self, text: str) -> tuple[str, int]:
        """``text`` with every purged value replaced by ``[REDACTED:forgotten]``."""
        spans = self.spans(text)
        if not spans:
            return text, 0
        out: list[str] = []
        last = 0
        for start, end in spans:
            out += [text[last:start], MARK]
            last = end
        out.append(text[last:])
        return "".join(out), len(spans)


def purged_values(workspace: Path) -> PurgedValues | None:
    return PurgedValues.of(load(workspace))


# --- the files a purge looks at besides the memory files ---------------------------------------------


def files_below(fs: RootedDir, tops: Iterable[str], scope: Callable[[str], bool]) -> list[str]:
    """Workspace files under ``tops`` (files or folders, never through a symlink) in ``scope``."""
    found: list[str] = []
    for top in tops:
        if fs.lstat(top) is None:
            continue
        path = fs.root / top
        if path.is_dir() and not path.is_symlink():
            found += [rel for rel in fs.walk_files(top) if scope(rel)]
        elif scope(top):
            found.append(top)
    return sorted(set(found))


# A report is a few KiB to a few MiB; a larger file in the top folder (a backup image, a database)
# is named as not searched rather than read into memory whole.
TOP_FILE_CAP = 64 * 1024 * 1024


@dataclass(frozen=True)
class TopFile:
    """One regular file directly in the workspace folder: its bytes, or why they were not read."""

    name: str
    data: bytes | None
    problem: str = ""


def top_files(root: Path, cap: int = TOP_FILE_CAP) -> list[TopFile]:
    """The regular files (symlinks left out) directly in the workspace folder, each read whole
    when it is at most ``cap`` bytes. Never raises for one file: any name (an Office lock file
    ``~$plan.docx``, bytes that are not UTF-8) is opened as the folder lists it, and a file that
    cannot be read (another user's 0600 file) says why. Nothing here is ever written through
    these names: the caller writes only reports, whose names it checks."""
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []
    found: list[TopFile] = []
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries if entry.is_file(follow_symlinks=False))
        for name in names:
            found.append(_read_top_file(folder, name, cap))
    except OSError:
        pass
    finally:
        os.close(folder)
    return found


def _read_top_file(folder: int, name: str, cap: int) -> TopFile:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError as exc:
        return TopFile(name, None, f"cannot be read ({fsutil.describe_os_error(exc)})")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced since it was listed
            return TopFile(name, None, "is no longer a regular file")
        if info.st_size > cap:
            return TopFile(name, None, f"is {info.st_size:,} bytes, more than the {cap:,} searched")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return TopFile(name, handle.read(cap + 1))
    except OSError as exc:
        return TopFile(name, None, f"cannot be read ({fsutil.describe_os_error(exc)})")
    finally:
        os.close(fd)


def remove_search_indexes(cache: Path, stores: Iterable[Path], *, dry_run: bool, warnings: list[str]) -> bool:
    """Remove the search index of each store (True when there was one). Removed whole: SQLite's
    free pages would keep the old text; the next search builds it again.

    Only in a folder the user's searches would use (``search_index.trust``): one of the user's
    own that others may write is made private and emptied (what a search does to it; a dry run
    only looks), one of another user's is never deleted in. An index left there is never served
    to the user's searches either, so the forgotten text cannot come back from it; it is named in
    ``warnings``, since it may still hold the text."""
    from dream_memory.adapters.search_index import trust
    from dream_memory.adapters.search_index.location import SearchIndex

    found = False
    for store in dict.fromkeys(os.path.realpath(s) for s in stores):
        index = SearchIndex.for_store(cache, store)
        if index is None:
            continue
        there = os.path.lexists(index.path)  # before ``refused``, which may remove it
        problem = trust.unfixable_problem(str(index.path.parent)) if dry_run else index.refused
        if problem is not None:
            if there:
                warnings.append(
                    f"the search index {index.path} {'would not be' if dry_run else 'was not'} removed: {problem}; "
                    "no search of yours uses it, "
                    "but it may still hold the text: remove it (or have the folder's owner remove it)"
                )
            continue
        warnings.extend(index.warnings)  # (its folder made private: the index files in it went too)
        if there:
            found = True
            if not dry_run:
                index.remove()
    return found


def files_holding(folder: Path, holds: Callable[[bytes], bool]) -> list[str]:
    """Names of the .jsonl files in ``folder`` whose bytes ``holds`` says hold the value."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.jsonl") if p.is_file() and holds(p.read_bytes()))
