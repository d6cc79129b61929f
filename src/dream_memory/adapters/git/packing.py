"""The new objects of one commit written as one pack, made durable with three fsyncs.

Loose objects cost one file, and so one fsync, each: a Dream commit of three memory files makes
six (three blobs, two trees, the commit), and on ext4 every fsync of a new file is a journal
commit of its own. A pack holds them all in one file: the pack, then its index (the file that
makes git and dulwich see the pack), each written under a lock name, the two fsynced together,
renamed into place (the index last), then one fsync of ``objects/pack`` so both names survive
a power loss, all before the ref that reaches them moves. git reads the same files (``git
fsck``, ``git gc``); the objects are stored whole (no deltas), as loose objects are.

A kill between the steps leaves a lock or a pack without its index: git and dulwich read
neither, and ``clear_stale_packs`` (run by recovery, under the Dream lock) removes them.
"""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

from dulwich.file import GitFile
from dulwich.object_store import PACK_MODE, DiskObjectStore
from dulwich.objects import ShaFile
from dulwich.pack import Pack, write_pack_index, write_pack_objects

from dream_memory.adapters import fsutil

# Small packs are merged into one once this many have accumulated: every lookup of an object
# consults each pack's index, so thousands of one-commit packs would slow every later read
# (git's own `gc --auto` merges at 50 packs).
MERGE_AT = 50
# A pack this large is left as it is (the packs `git gc` made, a merged pack that grew): merging
# only the small ones keeps each merge to a few hundred objects.
SMALL_PACK_BYTES = 1 << 20


def write_objects_pack(store: DiskObjectStore, objects: list[ShaFile]) -> str | None:
    """Store ``objects`` as one pack, durably; returns its base path (``.../pack-<checksum>``),
    None when there is no object.

    Objects already in the store are not looked for: asking would read the index of every pack
    (a commit's objects are new but for a blob that returns to an old content, which costs a few
    bytes twice; git's `gc` keeps one copy).

    Raises ``dulwich.file.FileLocked`` when a lock of the same pack is in the way (a killed
    writer's, content-addressed like the pack): the caller falls back to loose objects."""
    unique = list({obj.id: obj for obj in objects}.values())
    return _write_pack(store, unique) if unique else None


def _write_pack(store: DiskObjectStore, objects: list[ShaFile]) -> str:
    """Write ``objects`` as ``pack-<checksum>.pack`` and its index, each under its lock name;
    fsync both at once (they need no order between them, only to be durable before either is
    renamed in); rename the pack, then the index (a pack is seen only once its index is in
    place); then fsync the folder that holds both names."""
    buffer = io.BytesIO()
    entries, checksum = write_pack_objects(buffer, [(obj, None) for obj in objects], store.object_format, deltify=False)
    index = io.BytesIO()
    rows = sorted((sha, offset, crc) for sha, (offset, crc) in entries.items())
    write_pack_index(index, rows, checksum, version=store.pack_index_version)
    base = os.path.join(store.pack_dir, "pack-" + checksum.hex())
    pack_file = GitFile(base + ".pack", "wb", mask=PACK_MODE, fsync=False)
    try:
        index_file = GitFile(base + ".idx", "wb", mask=PACK_MODE, fsync=False)
    except BaseException:
        pack_file.abort()
        raise
    try:
        for handle, data in ((pack_file, buffer.getvalue()), (index_file, index.getvalue())):
            handle.write(data)
            handle.flush()
        fsync_together([pack_file.fileno(), index_file.fileno()])
    except BaseException:
        pack_file.abort()
        index_file.abort()
        raise
    try:
        pack_file.close()
    except BaseException:
        index_file.abort()
        raise
    index_file.close()
    fsutil.fsync_dir(Path(store.pack_dir))
    return base


def fsync_together(fds: list[int]) -> None:
    """fsync ``fds`` concurrently (the other in a thread): on a busy disk two syncs issued
    together cost about one."""
    failures: list[OSError] = []

    def sync(fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=sync, args=(fd,)) for fd in fds[1:]]
    for thread in threads:
        thread.start()
    sync(fds[0])
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def small_packs(store: DiskObjectStore) -> list[str]:
    """Base paths of the complete packs under ``SMALL_PACK_BYTES`` that no ``.keep`` protects."""
    try:
        names = set(os.listdir(store.pack_dir))
    except FileNotFoundError:
        return []
    found: list[str] = []
    for name in sorted(names):
        stem = name[: -len(".pack")]
        if not name.endswith(".pack") or stem + ".idx" not in names or stem + ".keep" in names:
            continue
        try:
            size = os.stat(os.path.join(store.pack_dir, name)).st_size
        except FileNotFoundError:
            continue
        if size < SMALL_PACK_BYTES:
            found.append(os.path.join(store.pack_dir, stem))
    return found


def merge_small_packs(store: DiskObjectStore) -> int:
    """Merge the small packs into one when ``MERGE_AT`` of them have accumulated; returns how
    many were merged (0 below the threshold).

    The merged pack is durable (its folder fsynced) before any small one is deleted, so a crash
    leaves the objects twice at worst, never zero times. Callers hold the Dream lock (no other
    Dream writer); a reader that had a removed pack open keeps reading it (POSIX), and dulwich
    and git both look again in the folder when an object is not where they last saw it."""
    packs = small_packs(store)
    if len(packs) < MERGE_AT:
        return 0
    objects: dict[bytes, ShaFile] = {}
    for base in packs:
        with Pack(base, object_format=store.object_format) as pack:
            for obj in pack.iterobjects():
                objects.setdefault(obj.id, obj)
    merged = _write_pack(store, list(objects.values()))
    for base in packs:
        if base == merged:
            continue
        # the index first, as git does: a pack without its index is never read
        for suffix in (".idx", ".pack", ".rev", ".bitmap"):
            try:
                os.unlink(base + suffix)
            except FileNotFoundError:
                pass
    return len(packs)


def clear_stale_packs(store: DiskObjectStore, *, wait: float) -> list[str]:
    """Remove what a writer killed in ``write_objects_pack`` left in ``objects/pack``: lock files
    and packs without an index. A live writer's last a few milliseconds: what is still there
    after ``wait`` seconds is dead (callers hold the Dream lock; git renames a pack and its
    index within microseconds of each other)."""
    folder = Path(store.pack_dir)

    def leftovers() -> list[Path]:
        try:
            names = {p.name for p in folder.iterdir()}
        except FileNotFoundError:
            return []
        return [
            folder / name
            for name in sorted(names)
            if name.endswith(".lock") or (name.endswith(".pack") and name[: -len(".pack")] + ".idx" not in names)
        ]

    found = leftovers()
    if not found:
        return []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and found:
        time.sleep(0.05)
        found = [p for p in found if p in leftovers()]
    removed: list[str] = []
    for path in found:
        fsutil.remove(path, site="git.stale_lock")
        removed.append(f"pack/{path.name}")
    return removed
