"""Git notes on Dream's own ref (``refs/notes/dream``): a record beside a commit, never inside the
memory files, that ``git notes --ref dream show <sha>`` reads too.

The notes tree is read and updated with dulwich's ``NotesTree`` (its fan-out included); the
notes commit is made here like every other commit of ours (our author and clock, its objects
written together by ``GitStore._store_objects`` before the ref names them, the ref moved by
compare-and-set), so a concurrent writer is an error, never a lost note.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from dulwich.file import FileLocked
from dulwich.notes import NotesTree
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, ShaFile, Tree
from dulwich.refs import Ref

from dream_memory.adapters import fsutil
from dream_memory.adapters.git.base import git_errors, message_bytes, oid
from dream_memory.adapters.git.store import GitStore
from dream_memory.errors import VersionStoreError

NOTES_REF = "refs/notes/dream"


def _notes_tree(store: GitStore, ref: str) -> tuple[bytes | None, Tree | None]:
    """(the notes commit, its tree); (None, None) before the first note."""
    try:
        head = store.repo.refs[Ref(ref.encode("ascii"))]
    except KeyError:
        return None, None
    commit = store.repo[head]
    if not isinstance(commit, Commit):
        raise VersionStoreError(f"{ref} does not point at a commit", hint=f"`git update-ref -d {ref}` removes it")
    tree = store.repo[commit.tree]
    assert isinstance(tree, Tree)
    return bytes(head), tree


class _Collecting:
    """The object store as NotesTree sees it: what it adds is kept here (to be written together),
    what it reads comes from what was added, then from the store."""

    def __init__(self, store: BaseObjectStore) -> None:
        self.store = store
        self.added: dict[bytes, ShaFile] = {}

    @property
    def object_format(self) -> object:
        return self.store.object_format

    def add_object(self, obj: ShaFile) -> None:
        self.added[bytes(obj.id)] = obj

    def reachable(self, root: bytes) -> list[ShaFile]:
        """What was added that ``root`` reaches: dulwich's move to a fanned-out tree builds
        trees it then replaces, which written would lie dangling (`git fsck` lists them)."""
        by_id = {bytes(obj.id): obj for obj in self.added.values()}  # ids as they are now
        found: dict[bytes, ShaFile] = {}
        todo = [root]
        while todo:
            sha = todo.pop()
            obj = by_id.get(sha)
            if obj is None or sha in found:
                continue
            found[sha] = obj
            if isinstance(obj, Commit):
                todo.append(bytes(obj.tree))
            elif isinstance(obj, Tree):
                todo += [bytes(entry.sha) for entry in obj.iteritems()]
        return list(found.values())

    def __getitem__(self, sha: bytes) -> ShaFile:
        return self.added[sha] if sha in self.added else self.store[ObjectID(sha)]


@git_errors
def read_note(store: GitStore, sha: str, ref: str = NOTES_REF) -> bytes | None:
    """The note on commit ``sha`` under ``ref``, or None."""
    _, tree = _notes_tree(store, ref)
    if tree is None:
        return None
    return NotesTree(tree, store.repo.object_store).get_note(oid(sha))


# A live ref update holds its lock for milliseconds; one still there after this is a dead writer's.
_STALE_LOCK_WAIT = 0.5


def _clear_stale_lock(store: GitStore, ref: str) -> None:
    """Remove ``<ref>.lock`` left by a process killed while moving the notes ref. Every note is
    written under the Dream lock, so no other Dream process is moving it; left in place, the
    lock would refuse every later note."""
    lock = Path(os.fsdecode(store.repo.commondir())) / (ref + ".lock")
    deadline = time.monotonic() + _STALE_LOCK_WAIT
    while lock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if lock.exists():
        fsutil.remove(lock, site="git.stale_lock")


def write_note(store: GitStore, sha: str, content: bytes, message: str, ref: str = NOTES_REF) -> str:
    """Attach ``content`` to commit ``sha`` (replacing its note); returns the notes commit.
    The caller holds the Dream lock.

    A write that fails (a full disk, a read-only ``.git``) is the package's error naming the
    repository and the cause (``fsutil.os_error``): the commit the note is for has landed, so the
    caller reports the note as missing instead of failing the batch on a raw OSError."""
    try:
        return _write_note(store, sha, content, message, ref)
    except OSError as exc:
        where = Path(os.fsdecode(store.repo.commondir()))
        raise fsutil.os_error(exc, f"write the provenance note of commit {sha[:10]} into", where) from exc


@git_errors
def _write_note(store: GitStore, sha: str, content: bytes, message: str, ref: str) -> str:
    _clear_stale_lock(store, ref)
    objects = store.repo.object_store
    head, tree = _notes_tree(store, ref)
    if tree is None:
        # In memory only: dulwich's create_notes_tree stores the empty tree, which no commit
        # then reaches, and `git fsck --strict` reports it dangling.
        tree = Tree()
    collected = _Collecting(objects)
    new_tree = NotesTree(tree, collected).set_note(oid(sha), content)  # type: ignore[arg-type]
    collected.add_object(new_tree)
    commit = Commit()
    commit.tree = new_tree.id
    commit.parents = [oid(head)] if head else []
    commit.author = commit.committer = store.author
    when, offset = store._signature()
    commit.author_time = commit.commit_time = when
    commit.author_timezone = commit.commit_timezone = offset
    commit.message = message_bytes(message.rstrip("\n") + "\n")
    collected.add_object(commit)
    # One durable write of the note's objects (blob, trees, commit) before the ref names them,
    # as a batch's commit is written: one group of fsyncs instead of one fsync after another.
    store._store_objects(collected.reachable(bytes(commit.id)))
    name = Ref(ref.encode("ascii"))
    try:
        if head is None:
            moved = store.repo.refs.add_if_new(name, commit.id)
        else:
            moved = store.repo.refs.set_if_equals(name, oid(head), commit.id)
    except FileLocked as exc:
        raise VersionStoreError(f"{ref} is locked by another process", hint="run again once it is done") from exc
    if not moved:
        raise VersionStoreError(f"{ref} moved while a note was written", hint="another process wrote a note; run again")
    return commit.id.decode("ascii")
