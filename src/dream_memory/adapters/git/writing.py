"""Writing commits at the object level: blobs, trees and a commit object for the paths we name
(never ``porcelain.commit``: no hooks, no gpg, nothing else the user staged), then a
compare-and-set of the branch ref, then the index for those paths. Stale locks a killed writer
left behind are cleared here too.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dulwich.file import FileLocked
from dulwich.object_store import BaseObjectStore, DiskObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree, hex_to_filename
from dulwich.refs import Ref

from dream_memory.adapters import fsutil
from dream_memory.adapters.git import packing
from dream_memory.adapters.git.base import DAMAGE, EXEC_MODE, FILE_MODE, git_errors, message_bytes, oid
from dream_memory.adapters.git.worktree import Worktree, together
from dream_memory.errors import VersionStoreError

_STALE_LOCK_WAIT_SECONDS = 2.0
# How long after its journal was last written an interrupted commit may still have been writing
# its index and ref: a lock younger than that is someone else's (a `git commit` waiting on its
# editor), whoever it blocks.
_STALE_LOCK_WINDOW_SECONDS = 30.0

TreeChange = tuple[list[bytes], int, ObjectID | None]  # path parts, mode, blob (None deletes)


class Writing(Worktree):
    """Commits made from contents we name, and the locks a killed commit left behind."""

    def _signature(self) -> tuple[int, int]:
        now = self.clock.now()
        offset = now.utcoffset()
        return int(now.timestamp()), int(offset.total_seconds()) if offset else 0

    def _objects_dir(self) -> str:
        store = self.repo.object_store
        return os.fspath(getattr(store, "path", Path(self.repo.commondir()) / "objects"))

    def _add(self, obj: ShaFile, unsynced: list[bytes] | None = None) -> None:
        """Store one object. A process killed while dulwich wrote this very object leaves its
        ``objects/xx/<id>.lock``, on which dulwich would fail for ever: objects are named by
        their content, so the object is written here the way git writes it (a temp file renamed
        into place) and the dead writer's lock is removed.

        ``unsynced``: the object is written without its own fsync and its id appended there, for
        ``_sync_objects`` to make durable together with the others of the commit."""
        store = self.repo.object_store
        try:
            if unsynced is not None and hasattr(store, "fsync_object_files"):
                store.fsync_object_files = False
                try:
                    store.add_object(obj)
                finally:
                    store.fsync_object_files = True
                unsynced.append(obj.id)
            else:
                store.add_object(obj)
            return
        except FileLocked:
            pass
        path = Path(os.fsdecode(hex_to_filename(self._objects_dir(), obj.id)))
        if not path.exists():
            data = b"".join(obj.as_legacy_object_chunks())
            fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.chmod(tmp, 0o444)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + ".lock").unlink()

    def _sync_objects(self, ids: list[bytes]) -> None:
        """fsync the loose objects of one commit all at once, one thread each, before anything
        refers to them: the file system commits its journal once for all of them instead of
        once per object (at a load average of 6, six small fsyncs took 8-22 ms one after the
        other and 3-9 ms together). An object dulwich did not write loose (it was in a pack
        already) is durable as it is."""
        objects = self._objects_dir()
        fds: list[int] = []
        try:
            for sha in dict.fromkeys(ids):
                try:
                    fds.append(os.open(os.fsdecode(hex_to_filename(objects, ObjectID(sha))), os.O_RDONLY))
                except FileNotFoundError:
                    continue
            if fds:
                packing.fsync_together(fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _store_objects(self, objects: list[ShaFile]) -> None:
        """Store the new objects of one commit durably: as one pack (``packing``: three fsyncs
        whatever their number) in a repository on disk, else loose, fsynced together. The small
        packs earlier commits left are merged first once there are many."""
        store = self.repo.object_store
        loose = objects
        if isinstance(store, DiskObjectStore):
            with contextlib.suppress(OSError, *DAMAGE):
                # opportunistic: a merge that fails leaves the small packs, all still valid
                if packing.merge_small_packs(store):
                    store.packs  # noqa: B018 - forget the removed packs now, not on a later miss
            # An object whose loose write a killed process left locked is written loose (``_add``
            # removes that lock, which `git fsck` would report); one stat each.
            objects_dir = self._objects_dir()
            locked = {obj.id for obj in objects if os.path.exists(hex_to_filename(objects_dir, obj.id) + ".lock")}
            try:
                packing.write_objects_pack(store, [obj for obj in objects if obj.id not in locked])
                loose = [obj for obj in objects if obj.id in locked]
            except FileLocked:
                pass  # a killed writer's lock of this very pack: all written loose instead
        unsynced: list[bytes] = []
        for obj in loose:
            self._add(obj, unsynced)
        if unsynced:
            self._sync_objects(unsynced)

    @git_errors
    def build_commit(
        self,
        changes: dict[str, bytes | None],
        message: str,
        *,
        alongside: Callable[[str, str | None], None] | None = None,
    ) -> tuple[str, str | None]:
        """Write blobs, trees and a commit object for ``changes`` on top of HEAD; the ref is not
        moved yet. Returns (new sha, base sha).

        ``alongside(sha, base)`` (the caller's journal) runs in a thread while the objects are
        written, so the two wait on the disk once instead of one after the other."""
        self.check_paths(changes)
        self.check_can_commit()
        self._check_index()
        base = self.head()
        store = self.repo.object_store
        new_objects: list[ShaFile] = []
        add = new_objects.append

        tree_changes: list[TreeChange] = []
        for rel, data in sorted(changes.items()):
            parts = self.repo_path(rel).split(b"/")
            if data is None:
                tree_changes.append((parts, 0, None))
            else:
                blob = Blob.from_string(data)
                add(blob)
                st = self.fs.lstat(rel)
                executable = st is not None and stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o100)
                tree_changes.append((parts, EXEC_MODE if executable else FILE_MODE, blob.id))
        base_tree = self._commit(base).tree if base is not None else None
        tree_id = _apply_tree_changes(store, base_tree, tree_changes, add)
        if tree_id is None:
            # Every file deleted: a commit still needs a tree, and this one is reachable.
            empty = Tree()
            add(empty)
            tree_id = empty.id
        commit = Commit()
        commit.tree = tree_id
        commit.parents = [oid(base)] if base else []
        commit.author = commit.committer = self.author
        when, offset = self._signature()
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = offset
        commit.message = message_bytes(message.rstrip("\n") + "\n")
        add(commit)
        # Durable before the ref (or anything else) can point at them.
        sha = commit.id.decode("ascii")
        if alongside is None:
            self._store_objects(new_objects)
        else:
            together([lambda: self._store_objects(new_objects), lambda: alongside(sha, base)])
        return commit.id.decode("ascii"), base

    @git_errors
    def move_head(self, new: str, base: str | None, subject: str) -> None:
        """Point the checked-out branch (or a detached HEAD) at ``new`` if it still is at ``base``."""
        chain, _ = self.repo.refs.follow(Ref(b"HEAD"))
        ref = chain[-1] if chain else Ref(b"HEAD")
        message = message_bytes("commit: " + subject)
        when, offset = self._signature()
        fsutil.checkpoint("git.ref", Path(self.repo.controldir()) / ref.decode("utf-8", "replace"))
        try:
            if base is None:
                ok = self.repo.refs.add_if_new(
                    ref, oid(new), committer=self.author, timestamp=when, timezone=offset, message=message
                )
            else:
                ok = self.repo.refs.set_if_equals(
                    ref, oid(base), oid(new), committer=self.author, timestamp=when, timezone=offset, message=message
                )
        except FileLocked:
            ok = False
        if not ok:
            raise VersionStoreError(
                f"{ref.decode()} moved while committing; nothing was changed",
                hint="another process committed to this repository at the same time; run again",
            )

    @git_errors
    def effective_changes(self, changes: dict[str, bytes | None]) -> dict[str, bytes | None]:
        """The part of ``changes`` that differs from HEAD."""
        head_files = self.entries_at(self.head(), changes)

        def differs(rel: str, data: bytes | None) -> bool:
            new = None if data is None else Blob.from_string(data).id
            return new != (head_files[rel][1] if rel in head_files else None)

        return {rel: data for rel, data in changes.items() if differs(rel, data)}

    def clear_stale_locks(self, *, since: float, wait: float = _STALE_LOCK_WAIT_SECONDS) -> list[str]:
        """Remove index.lock and the checked-out branch's ref lock when a process killed while
        writing them left them behind (they would block every later commit, as they block git).

        Only for a change known to be interrupted (its journal, written at ``since``, outlived
        its writer): a lock older than that is not judged, nor one made more than
        ``_STALE_LOCK_WINDOW_SECONDS`` after it (a person's `git commit` holds index.lock while
        its editor is open: removing it failed their commit), and the rest are first given
        ``wait`` seconds to go away, as a live git's would within milliseconds.
        """
        control = Path(self.repo.controldir())
        candidates = [Path(os.fsdecode(self.repo.index_path()) + ".lock"), control / "HEAD.lock"]
        chain, _ = self.repo.refs.follow(Ref(b"HEAD"))
        if chain and chain[-1] != b"HEAD":
            candidates.append(control / (os.fsdecode(chain[-1]) + ".lock"))
        removed: list[str] = []
        for lock in candidates:
            try:
                if not since - 1 <= lock.stat().st_mtime <= since + _STALE_LOCK_WINDOW_SECONDS:
                    continue
            except FileNotFoundError:
                continue
            deadline = time.monotonic() + wait
            while lock.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if lock.exists():
                fsutil.remove(lock, site="git.stale_lock")
                removed.append(lock.relative_to(control).as_posix())
        return removed

    def clear_stale_object_locks(self, *, wait: float = 0.5) -> list[str]:
        """Remove ``objects/xx/<id>.lock`` files a killed writer left behind, and in
        ``objects/pack`` the locks and index-less packs of a pack write it did not finish.

        Only dulwich makes these (git writes objects through ``tmp_obj_*`` files), and a live
        write lasts milliseconds, so a lock still there after ``wait`` seconds is dead. Left in
        place it fails ``git fsck`` and, were that object written again, every later commit.
        Callers hold the Dream lock, so no other Dream run is writing objects meanwhile.
        """
        objects = Path(os.fspath(getattr(self.repo.object_store, "path", Path(self.repo.commondir()) / "objects")))
        store = self.repo.object_store
        packs = packing.clear_stale_packs(store, wait=wait) if isinstance(store, DiskObjectStore) else []
        locks = [p for p in objects.glob("[0-9a-f][0-9a-f]/*.lock") if p.is_file()]
        if not locks:
            return packs
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(p.exists() for p in locks):
            time.sleep(0.05)
        removed: list[str] = []
        for lock in locks:
            if lock.exists():
                fsutil.remove(lock, site="git.stale_lock")
                removed.append(lock.relative_to(objects).as_posix())
        return packs + removed

    @git_errors
    def commit(self, changes: dict[str, bytes | None], message: str) -> str | None:
        """Commit the given contents (None deletes) as they already are on disk; None if no change."""
        self.check_paths(changes)
        effective = self.effective_changes(changes)
        if not effective:
            return None
        sha, base = self.build_commit(effective, message)
        self.move_head(sha, base, message.split("\n", 1)[0])
        self.sync_index(effective, sha)
        return sha


def _apply_tree_changes(
    store: BaseObjectStore,
    tree_id: bytes | None,
    changes: list[TreeChange],
    add: Callable[[ShaFile], None],
) -> ObjectID | None:
    """The tree ``tree_id`` with ``changes`` (path parts, mode, blob; None deletes) applied.

    Returns None for an empty tree and stores only non-empty trees: dulwich's
    ``commit_tree_changes`` stores the emptied subtree of a deleted folder, which
    ``git fsck`` then reports as a dangling object.
    """
    tree = Tree()
    if tree_id is not None:
        old = store[oid(tree_id)]
        assert isinstance(old, Tree)
        for item in old.iteritems():
            tree[item.path] = (item.mode, item.sha)
    for name, sub in _apply_here(tree, changes).items():
        present = name in tree
        mode, sha = tree[name] if present else (0, None)
        sub_id = _apply_tree_changes(store, sha if stat.S_ISDIR(mode) else None, sub, add)
        if sub_id is not None:
            tree[name] = (stat.S_IFDIR, sub_id)
        elif present:
            del tree[name]
    if not len(tree):
        return None
    add(tree)
    return tree.id


def _apply_here(tree: Tree, changes: list[TreeChange]) -> dict[bytes, list[TreeChange]]:
    """Apply the changes to this tree's own entries; return the rest by subfolder name."""
    nested: dict[bytes, list[TreeChange]] = {}
    for parts, mode, sha in changes:
        name = parts[0]
        if len(parts) > 1:
            nested.setdefault(name, []).append((parts[1:], mode, sha))
        elif sha is not None:
            tree[name] = (mode, sha)
        elif name in tree:
            del tree[name]
    return nested
