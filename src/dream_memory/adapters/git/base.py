"""What every part of ``GitStore`` shares: the repository, the workspace's place in it, and how
a damaged repository becomes a ``VersionStoreError`` instead of a traceback.
"""

from __future__ import annotations

import functools
import io
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import dulwich
from dulwich.errors import (
    ApplyDeltaError,
    ChecksumMismatch,
    FileFormatException,
    ObjectFormatException,
    PackedRefsException,
)
from dulwich.file import GitFile
from dulwich.objects import ObjectID
from dulwich.pack import PackFileDisappeared
from dulwich.refs import Ref, SymrefLoop
from dulwich.repo import Repo

from dream_memory.adapters.rooted import RootedDir
from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.ports import Clock
from dream_memory.core.surrogates import escape_lone_surrogates, to_bytes
from dream_memory.core.versions import parse_identity
from dream_memory.errors import DreamError, RepositoryChanged, VersionStoreError

if TYPE_CHECKING:
    # dulwich.index is imported when the index is first read: `dream log` never reads it
    from dulwich.index import Index

    from dream_memory.adapters.git.ignores import IgnoreRule

FILE_MODE = 0o100644
EXEC_MODE = 0o100755
HEADS = b"refs/heads/"

P = ParamSpec("P")
R = TypeVar("R")

# What dulwich raises on an object it cannot read: a truncated or corrupt loose object, a pack
# whose checksum or delta is wrong, a tree or commit that does not parse, a missing object.
# Also what it raises on damaged refs and files around them: an empty object file or a packed-refs
# line that does not parse (FileFormatException), a ref naming itself (SymrefLoop), and a pack
# index or pack cut short (struct.error, AssertionError from its own size checks).
DAMAGE: tuple[type[BaseException], ...] = (
    ObjectFormatException,
    ChecksumMismatch,
    ApplyDeltaError,
    FileFormatException,
    SymrefLoop,
    zlib.error,
    struct.error,
    ValueError,
    KeyError,
    EOFError,
    AssertionError,
)
# DAMAGE's plain Python errors are damage only when dulwich raised them while reading an object:
# the same ValueError or KeyError from our own code is a bug, never "run git fsck".
_DULWICH_OWN = (ObjectFormatException, ChecksumMismatch, ApplyDeltaError, FileFormatException, SymrefLoop)
_DULWICH_DIR = os.path.dirname(dulwich.__file__) + os.sep
_DULWICH_PACK = _DULWICH_DIR + "pack.py"


_OBJECT_ID = re.compile(rb"[0-9a-f]{40}")


def is_object_id(value: bytes) -> bool:
    """``value`` is a SHA-1 object id as git writes it in a ref: 40 lowercase hex digits."""
    return _OBJECT_ID.fullmatch(value) is not None


def is_damage(exc: BaseException) -> bool:
    """True when ``exc`` (one of DAMAGE) says the repository holds an object that cannot be read:
    dulwich's own errors always; the plain Python ones when raised in dulwich's code (the
    innermost frame of the traceback is one of its modules, or a C function it called)."""
    if isinstance(exc, _DULWICH_OWN):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename
    if isinstance(exc, (AssertionError, struct.error)):
        # dulwich also asserts on the arguments it is given (an object id of the wrong length):
        # only its pack reader's checks and unpacking are about the bytes on disk.
        return where == _DULWICH_PACK
    return where.startswith(_DULWICH_DIR)


def git_errors(func: Callable[P, R]) -> Callable[P, R]:
    """A damaged or incomplete repository is a VersionStoreError naming it, never a traceback.
    Our own errors pass through as they are."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (DreamError, UnicodeEncodeError):
            # Encoding is our side's doing, never a sign of a damaged object: not "run git fsck".
            raise
        except PackFileDisappeared as exc:
            raise repacked() from exc
        except DAMAGE as exc:
            if not is_damage(exc):
                raise
            store = args[0]
            assert isinstance(store, GitBase)
            raise store._damaged(exc) from exc

    return wrapper


def git_iter_errors(func: Callable[P, Iterator[R]]) -> Callable[P, Iterator[R]]:
    """``git_errors`` for a generator: the objects are read while it is consumed."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
        try:
            yield from func(*args, **kwargs)
        except (DreamError, UnicodeEncodeError):
            # Encoding is our side's doing, never a sign of a damaged object: not "run git fsck".
            raise
        except PackFileDisappeared as exc:
            raise repacked() from exc
        except DAMAGE as exc:
            if not is_damage(exc):
                raise
            store = args[0]
            assert isinstance(store, GitBase)
            raise store._damaged(exc) from exc

    return wrapper


def repacked() -> RepositoryChanged:
    # A reader outside the Dream lock (log, review list, the read side) while `dream forget` or
    # git gc swaps the packs: dulwich retries most reads, not all (iter_prefix).
    return RepositoryChanged(
        "the repository's pack files were replaced while this command read them (another process "
        "repacked it: dream forget, git gc)",
        hint="run the command again",
    )


def oid(sha: str | bytes) -> ObjectID:
    return ObjectID(sha.encode("ascii") if isinstance(sha, str) else sha)


# A path or a ref name as git keeps it (bytes), as ``_rel`` decodes it back (surrogateescape).
name_bytes = to_bytes


def message_bytes(text: str) -> bytes:
    """A commit, note or reflog message as UTF-8, always encodable. Strict UTF-8 fails on a lone
    surrogate in a model's fact or an entry's text after the memory edits were made, losing the
    batch's commit; each one is written as its visible escape (``\\udcff``), the way the JSON
    faces show it, so the commit lands and nothing of the message is dropped."""
    return escape_lone_surrogates(text).encode("utf-8")


def local_branches(repo: Repo) -> dict[bytes, bytes]:
    """Local branch name -> commit sha."""
    return {bytes(k): bytes(v) for k, v in repo.refs.as_dict(Ref(HEADS)).items() if v}


class GitBase:
    """The repository that versions one workspace's memory (the state every part reads)."""

    def __init__(self, repo: Repo, workspace: Path, *, author: str, clock: Clock, created: bool) -> None:
        self.repo = repo
        self.workspace = workspace
        self.root = Path(repo.path).resolve()
        rel = os.path.relpath(workspace.resolve(), self.root)
        self.prefix = "" if rel == "." else Path(rel).as_posix()
        self.author = parse_identity(author)
        self.clock = clock
        self.created = created  # True when this repository was made for the workspace by us
        # set when it was made because the enclosing repository ignores the workspace folder
        self.own_because: IgnoreRule | None = None
        self.fs = RootedDir(workspace)  # every file this store writes, deletes or reads to decide
        self._index_cache: tuple[tuple[int, ...], Index] | None = None
        try:
            self.shallow: frozenset[bytes] = frozenset(repo.get_shallow())
        except OSError:
            self.shallow = frozenset()
        store = repo.object_store
        if hasattr(store, "fsync_object_files"):
            # objects reach the disk before the ref (fsynced by dulwich) that makes them reachable
            store.fsync_object_files = True

    @property
    def enclosing(self) -> bool:
        """True when the repository was not made by us for this workspace (a user's checkout)."""
        return not self.created

    def repo_path(self, rel: str) -> bytes:
        return name_bytes(f"{self.prefix}/{rel}" if self.prefix else rel)

    def _rel(self, repo_path: bytes) -> str | None:
        text = repo_path.decode("utf-8", errors="surrogateescape")
        if not self.prefix:
            return text
        if text.startswith(self.prefix + "/"):
            return text[len(self.prefix) + 1 :]
        return None

    def is_versioned(self, rel: str) -> bool:
        return layout.is_tracked(rel) or (self.created and rel == ".gitignore")

    def _damaged(self, exc: BaseException) -> VersionStoreError:
        detail = split_lines(str(exc).strip())[0] if str(exc).strip() else type(exc).__name__
        what = "a ref" if isinstance(exc, (SymrefLoop, PackedRefsException)) else "an object"
        return VersionStoreError(
            f"the git repository at {self.root} is damaged: {what} cannot be read ({detail[:200]})",
            hint="`git fsck` names the damaged objects; restore them from a clone or a backup, then run again",
        )

    def _index_file(self) -> Path:
        return Path(self.repo.index_path())

    def _open_index(self) -> Index | None:
        """The index, or None when there is none or when dulwich cannot rewrite it faithfully.

        One commit consults the index three times (refusals, conflicts, then the update), and
        parsing it is a third of a commit's time in a repository of a few hundred files: the
        parsed index is kept while the file's identity and stamps (device, inode, size, mtime
        and ctime in nanoseconds) stay the same. Any writer, git's included, replaces the file
        through a new ``index.lock`` (a new inode, new stamps), so a change is always seen; the
        one caller that changes the returned index (``sync_index``) forgets it if writing fails.
        """
        path = self._index_file()
        try:
            st = os.stat(path)
        except OSError:
            self._index_cache = None
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = self._index_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        self._index_cache = None
        try:
            index = self.repo.open_index()  # imports dulwich.index
        except Exception:  # dulwich raises assorted errors on index formats it does not read
            return None
        # A split index keeps most entries in a shared file dulwich does not read, and a sparse
        # one folds folders into single entries: written back, either would lose staged work.
        if index.is_sparse() or any(ext.signature == b"link" for ext in index._extensions):
            return None
        self._index_cache = (key, index)
        return index

    def _forget_index(self) -> None:
        """Drop the parsed index (after changing it in memory without writing it)."""
        self._index_cache = None

    def _write_index(self, index: Index) -> None:
        """Write ``index`` as dulwich's ``Index.write`` does (the bytes to ``index.lock``, fsync,
        rename), then keep it as the parsed index if the file now in place is the one written:
        its trailing checksum is ours, read through the same descriptor as its stamps, so a
        writer that replaced it in between is never mistaken for us. The next commit then need
        not parse the index again."""
        from dulwich.index import IndexChecksumWriter, write_index_dict

        try:
            entries, version, extensions = index._byname, index._version, index._extensions
            skip_hash = index._skip_hash
            shared_perm = index._shared_perm
        except AttributeError:  # another dulwich: its own writer, and no cache
            index.write()
            return
        if skip_hash:
            index.write()
            return
        buffer = io.BytesIO()
        writer = IndexChecksumWriter(buffer, index.object_format)
        write_index_dict(
            writer,
            entries,
            version=version,
            extensions=[ext for ext in extensions if ext.to_bytes()],
            object_format=index.object_format,
        )
        digest = writer.write_checksum()
        data = buffer.getvalue()
        target = GitFile(index.path, "wb", shared_perm=shared_perm)
        try:
            target.write(data)
        except BaseException:
            target.abort()
            raise
        target.close()
        try:
            fd = os.open(index.path, os.O_RDONLY)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if st.st_size == len(data) and os.pread(fd, len(digest), len(data) - len(digest)) == digest:
                self._index_cache = ((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns), index)
        finally:
            os.close(fd)
