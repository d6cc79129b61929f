"""The workspace files as git sees them: which versioned files exist, their blob ids (trusting
the index's stat cache as git does, racy files hashed), the index brought in step with a commit
for the paths we committed (every other entry written back as it was), and the memory files
written after a commit lands.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from dulwich.file import FileLocked
from dulwich.objects import Blob

from dream_memory.adapters import fsutil
from dream_memory.adapters.git.base import git_errors, oid
from dream_memory.adapters.git.checks import Checks
from dream_memory.core import layout
from dream_memory.core.paths import path_problem
from dream_memory.errors import VersionStoreError

if TYPE_CHECKING:
    # imported where the index is read or written: `dream log` never touches it
    from dulwich.index import Index, IndexEntry

_RACY_SECONDS = 2.0


class Worktree(Checks):
    """The workspace's versioned files on disk, and the git index beside them."""

    # Set by a caller that knows what a file held when its change was computed
    # (app/onto_edits.py): ``write_files`` hands it each file first, and writes only those it
    # declines (False), so a file edited since is merged onto rather than written over.
    careful: Callable[[str, bytes | None], bool] | None = None

    def worktree_paths(self, tops: Sequence[str] | None = None) -> list[str]:
        """Tracked paths that exist as regular files in the workspace (``tops``: only below these
        top-level names): no symlink is followed (a file beyond a symlinked folder is not in the
        workspace), and a name no commit may hold (control characters, a .git folder) is never
        versioned."""
        found: list[str] = []
        for top in layout.tracked_roots() if tops is None else tops:
            st = self.fs.lstat(top)
            if st is None:
                continue
            if stat.S_ISREG(st.st_mode):
                if self.is_versioned(top):
                    found.append(top)
            elif stat.S_ISDIR(st.st_mode):
                found += [r for r in self.fs.walk_files(top) if path_problem(r) is None and self.is_versioned(r)]
        if tops is None and self.created and self.fs.is_file(".gitignore"):
            found.append(".gitignore")
        return sorted(set(found))

    def read_file(self, rel: str) -> bytes | None:
        """The bytes of a workspace file as a commit would take them: None when missing, not a
        regular file, a symlink or beyond a symlinked folder."""
        return self.fs.read(rel)

    @git_errors
    def worktree_state(self, paths: Iterable[str] | None = None) -> dict[str, bytes | None]:
        """Blob ids of tracked files as they are on disk (None: missing, or not a regular file
        in the workspace itself: a symlink, or a file beyond a symlinked folder)."""
        wanted = self.worktree_paths() if paths is None else list(paths)
        index = self._open_index()
        state: dict[str, bytes | None] = {}
        for rel in wanted:
            st = self.fs.lstat(rel) if path_problem(rel) is None else None
            if st is None or not stat.S_ISREG(st.st_mode):
                state[rel] = None
                continue
            entry = _index_entry(index, self.repo_path(rel))
            if entry is not None and _stat_matches(entry, st):
                state[rel] = entry.sha
            else:
                data = self.fs.read(rel)
                state[rel] = None if data is None else Blob.from_string(data).id
        return state

    @git_errors
    def dirty(self, *, only: Iterable[str] | None = None, dream_owned: bool = False) -> list[str]:
        """Versioned paths whose content on disk differs from HEAD (added, changed or removed);
        ``only``: among those paths (then neither the work tree nor HEAD's tree is walked).

        Dream's own bookkeeping (memory/.dream_state.json, written without a commit when a batch
        fails; the cursor; held changes) is no one's unsaved edit: left out unless ``dream_owned``
        or named in ``only``."""
        if only is not None:
            candidates = {p for p in only if self.is_versioned(p)}
            head_files = self.entries_at(self.head(), candidates)
        else:
            head_files = self.files_at(self.head())
            candidates = set(self.worktree_paths()) | {p for p in head_files if self.is_versioned(p)}
            if not dream_owned:
                candidates = {p for p in candidates if not layout.is_dream_owned(p)}
        state = self.worktree_state(sorted(candidates))
        return sorted(p for p in candidates if state.get(p) != (head_files[p][1] if p in head_files else None))

    def symlink_on_the_way(self, rel: str) -> str | None:
        """The first part of ``rel`` (itself included) that is a symbolic link on disk, or None:
        what lies beyond one is not in the workspace, as git sees it."""
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            st = self.fs.lstat("/".join(parts[:depth]))
            if st is None:
                return None
            if stat.S_ISLNK(st.st_mode):
                return "/".join(parts[:depth])
        return None

    def linked_files(self, paths: Iterable[str]) -> dict[str, tuple[int, int]]:
        """The device and inode of each of ``paths`` that is a regular file with another name
        (a hard link); a symlink is not one (what lies beyond it is not in the workspace)."""
        found: dict[str, tuple[int, int]] = {}
        for rel in paths:
            st = self.fs.lstat(rel)
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                found[rel] = (st.st_dev, st.st_ino)
        return found

    @git_errors
    def tracked_in_head(self, patterns: Sequence[str]) -> list[str]:
        """Paths matching ``patterns`` that HEAD already tracks (for carried memory files)."""
        head_files = self.files_at(self.head())
        return sorted(p for p in head_files if layout.matches_any(p, tuple(patterns)))

    @git_errors
    def sync_index(self, paths: Iterable[str], sha: str) -> None:
        """Make the index agree with commit ``sha`` for ``paths`` (and only those): every other
        entry, staged or not, is written back exactly as it was."""
        from dulwich.index import Index, index_entry_from_stat

        index = self._open_index()
        self._forget_index()  # changed below: no later reader may take it for the file on disk
        if index is None:
            if self._index_file().exists():
                return  # unreadable (build_commit refused before); never replace it
            index = Index(self._index_file(), read=False)
        paths = list(paths)
        files = self.entries_at(sha, paths)
        for rel in paths:
            key = self.repo_path(rel)
            st = self.fs.lstat(rel) if rel in files else None
            data = self.fs.read(rel) if st is not None and stat.S_ISREG(st.st_mode) else None
            if rel in files and st is not None and data is not None:
                mode, blob_id = files[rel]
                entry = index_entry_from_stat(st, oid(blob_id), mode)
                if Blob.from_string(data).id != blob_id:
                    # The file moved on since the commit (an append to a carried history.jsonl,
                    # an edit): recording its stat would make git trust it as unchanged. A size
                    # of 0 never matches, so git hashes it and shows the change.
                    entry = dataclasses.replace(entry, size=0, mtime=(0, 0))
                index[key] = entry
            elif key in index:
                del index[key]
        fsutil.checkpoint("git.index", self._index_file())
        try:
            self._write_index(index)
        except FileLocked as exc:
            raise VersionStoreError(
                f"the git index of {self.root} is locked (index.lock): another git command is running",
                hint="the commit is made; run the command again to bring the index in step",
            ) from exc

    def write_files(self, contents: dict[str, bytes | None]) -> None:
        """Write (or delete) workspace files durably; used after a commit lands.

        Every path is checked first (nothing is written when one is refused), and each is
        reached without following a symlink (``adapters.rooted``): a symlinked folder on the
        way is an error, never a door out of the workspace."""
        self.check_paths(contents)
        written: list[str] = []
        for rel, data in contents.items():
            if self.careful is not None and self.careful(rel, data):
                written.append(rel)
            elif data is None:
                self.fs.remove(rel, site="memory.remove")
            else:
                # Each file is fsynced, one after the other: written at once, a kill during one
                # would leave the others' temp files behind, in folders no ignore rule covers.
                self.fs.write(rel, data, site="memory.write", sync_folder=False)
                written.append(rel)
        # Then their folders once each, at once (a busy disk makes one sync wait instead of one
        # per folder), all before the caller goes on: the journal that can redo these writes is
        # removed only after.
        folders = {rel.rpartition("/")[0]: rel for rel in written}
        together([functools.partial(self.fs.sync_folders, [rel]) for rel in folders.values()])


_AT_ONCE = 8  # threads per group: a commit of a hundred files does not start a hundred


def together(steps: list[Callable[[], None]]) -> None:
    """Run ``steps`` at once, ``_AT_ONCE`` at a time (one in this thread, the others in
    threads); the first error raised is raised here once all have ended."""
    if len(steps) > _AT_ONCE:
        for start in range(0, len(steps), _AT_ONCE):
            together(steps[start : start + _AT_ONCE])
        return
    failures: list[BaseException] = []

    def run(step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as exc:  # re-raised below, in the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(step,)) for step in steps[1:]]
    for thread in threads:
        thread.start()
    if steps:
        run(steps[0])
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _index_entry(index: Index | None, key: bytes) -> IndexEntry | None:
    if index is None:
        return None
    from dulwich.index import ConflictedIndexEntry  # loaded with the index already

    try:
        entry = index[key]
    except KeyError:
        return None
    return None if isinstance(entry, ConflictedIndexEntry) else entry


def _stat_matches(entry: IndexEntry, st: os.stat_result) -> bool:
    """True when the index's stat data proves the file unchanged (git's stat cache).

    A file modified within the last moments is hashed anyway: timestamps are coarse, and an edit
    of the same size right after a commit would otherwise look clean ("racy git").
    """
    size = entry.size
    mtime = entry.mtime
    ino = entry.ino
    if size != st.st_size or (ino and ino != st.st_ino):
        return False
    if st.st_mtime > time.time() - _RACY_SECONDS:
        return False
    if isinstance(mtime, tuple):
        seconds, nanos = mtime
        return bool(seconds == int(st.st_mtime) and nanos == st.st_mtime_ns % 1_000_000_000)
    return bool(int(mtime) == int(st.st_mtime))
