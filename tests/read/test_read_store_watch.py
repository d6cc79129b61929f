"""The store watch (adapters.store_watch): a long-lived reader's search skips the lstat per file
between changes, yet answers exactly what a plain scan answers; whatever the events cannot vouch
for (overflow, a new folder, a refused watch, no inotify) falls back to the full listing."""

from __future__ import annotations

import errno
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from read_helpers import plain, rewrite_in_place, same_as_plain, watched

from dream_memory.adapters.store_watch import IN_Q_OVERFLOW, Inotify, LibcInotify, StoreWatch, open_inotify
from dream_memory.app.read import ReadStore

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
    pytest.mark.usefixtures("no_racy_window"),
]


def test_a_watched_search_lists_once_then_answers_from_the_events(
    root: Path, tmp_path: Path, watch: StoreWatch
) -> None:
    cache = tmp_path / "cache"
    assert watch.active
    same_as_plain(root, cache, watch, "filler")
    same_as_plain(root, cache, watch, "filler")
    _, stats = watched(root, cache, watch, "filler")
    assert watch.full_listings == 2  # entities/ and sections/, once each
    with ReadStore(root, home="/home/u", cache_dir=cache, cache_min_files=10) as r:
        r.search("filler", max_results=50)
        unwatched = r.last_search_stats
    # As many files answered by the index as with the lstat per file (only the few files
    # outside the listed folders are read).
    assert stats == unwatched and stats["from_cache"] > 40


def test_an_in_place_edit_of_the_same_size_in_the_same_second_is_seen(
    root: Path, tmp_path: Path, watch: StoreWatch
) -> None:
    """The edit keeps the size and puts the mtime back: only the event tells."""
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "needle")
    target = root / "entities" / "e011.md"
    size = target.stat().st_size
    rewrite_in_place(target, b"filler", b"needle")
    assert target.stat().st_size == size
    got = same_as_plain(root, cache, watch, "needle")
    assert got == ["entities/e011.md:1"]
    assert watch.full_listings == 2  # seen through the watcher, not by listing again


def test_appends_new_files_removals_and_renames_are_seen(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "fresh")
    with open(root / "entities" / "e003.md", "a") as f:
        f.write("- fresh words\n")
    (root / "entities" / "brand-new.md").write_text("# new\n\n- fresh too\n")
    (root / "entities" / "e004.md").unlink()
    os.replace(root / "entities" / "e005.md", root / "entities" / "e005.txt")
    (root / "sections" / "notes.md").write_text("# notes\n\n- fresh section\n")
    got = same_as_plain(root, cache, watch, "fresh")
    assert [g.split(":")[0] for g in got] == sorted(
        ["entities/e003.md", "entities/brand-new.md", "sections/notes.md"], key=[g.split(":")[0] for g in got].index
    )
    assert same_as_plain(root, cache, watch, "filler") == plain(root, "filler")
    assert "entities/e004.md:1" not in same_as_plain(root, cache, watch, "filler")
    assert watch.full_listings == 2


def test_a_new_folder_is_listed_again(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "deep")
    (root / "entities" / "team").mkdir()
    (root / "entities" / "team" / "alice.md").write_text("# alice\n\n- deep knowledge\n")
    assert same_as_plain(root, cache, watch, "deep") == ["entities/team/alice.md:1"]
    assert watch.full_listings == 3  # entities/ listed again, watching the new folder from then on
    (root / "entities" / "team" / "alice.md").write_text("# alice\n\n- deep and deeper\n")
    assert same_as_plain(root, cache, watch, "deeper") == ["entities/team/alice.md:1"]
    assert watch.full_listings == 3


def test_a_replaced_folder_is_listed_again(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")
    os.rename(root / "entities", tmp_path / "old-entities")
    (root / "entities").mkdir()
    (root / "entities" / "only.md").write_text("# only\n\n- filler once\n")
    assert same_as_plain(root, cache, watch, "filler") == ["entities/only.md:1"]


def test_a_queue_overflow_falls_back_to_the_full_listing(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """An overflow record (the kernel's, as read) makes the next search list and stat every file."""
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "filler")
    listings = watch.full_listings
    watch.consume(struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0))
    same_as_plain(root, cache, watch, "filler")
    assert watch.full_listings == listings + 2


def test_a_real_overflow_loses_no_edit(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """More events than the kernel queues (max_queued_events): the edit among them is still seen."""
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except OSError:
        pytest.skip("no inotify limits to read")
    if limit > 100_000:
        pytest.skip("the queue is too long to overflow quickly")
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "needle")
    a, b = root / "entities" / "e001.md", root / "entities" / "e002.md"
    for i in range(limit // 2 + 10):
        os.utime(a, ns=(i, i))  # alternating files: the kernel cannot merge the events
        os.utime(b, ns=(i, i))
    (root / "entities" / "e009.md").write_text("# e9\n\n- the needle\n")
    listings = watch.full_listings
    assert same_as_plain(root, cache, watch, "needle") == ["entities/e009.md:1"]
    assert watch.full_listings > listings


class RefusingInotify:
    """Real inotify whose watches the kernel refuses, as past ``max_user_watches``."""

    def __init__(self) -> None:
        self.real = LibcInotify()

    def add_watch(self, path: str, mask: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    def rm_watch(self, wd: int) -> None:
        self.real.rm_watch(wd)

    def read(self) -> bytes:
        return self.real.read()

    def close(self) -> None:
        self.real.close()


@pytest.mark.parametrize("inotify", [RefusingInotify, lambda: None], ids=["watch refused", "no inotify"])
def test_without_watches_every_search_stats_every_file(
    root: Path, tmp_path: Path, inotify: Callable[[], Inotify | None]
) -> None:
    cache = tmp_path / "cache"
    watch = StoreWatch(str(root), inotify=inotify)
    try:
        same_as_plain(root, cache, watch, "filler")
        assert not watch.active
        target = root / "entities" / "e011.md"
        rewrite_in_place(target, b"filler", b"needle")
        assert same_as_plain(root, cache, watch, "needle") == ["entities/e011.md:1"]
    finally:
        watch.close()


def test_a_hard_linked_file_edited_under_its_other_name_is_seen(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """No event reaches the store's folder for an edit through another name: each listed file is
    also watched itself (an inode watch, which every name of the file shares), so the edit is seen."""
    cache = tmp_path / "cache"
    other = tmp_path / "elsewhere.md"
    os.link(root / "entities" / "e020.md", other)
    same_as_plain(root, cache, watch, "needle")
    with open(other, "a") as f:
        f.write("- a needle\n")
    assert same_as_plain(root, cache, watch, "needle") == ["entities/e020.md:1"]


def test_a_folder_with_a_symlinked_file_is_not_kept(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """A link's target may lie in a folder nobody watches: such a folder is listed every time."""
    cache = tmp_path / "cache"
    (root / "entities" / "link.md").symlink_to("e030.md")
    same_as_plain(root, cache, watch, "filler")
    listings = watch.full_listings
    (root / "entities" / "e030.md").write_text("# e30\n\n- a needle\n")
    assert same_as_plain(root, cache, watch, "needle") == plain(root, "needle")
    assert watch.full_listings == listings + 1  # entities/ listed again; sections/ is kept


def test_a_reader_of_a_revision_or_another_store_is_not_watched(
    root: Path, make_store: Callable[..., Path], tmp_path: Path, watch: StoreWatch
) -> None:
    other = make_store({f"entities/x{i}.md": f"# x{i}\n\n- filler\n" for i in range(3)})
    got, _ = watched(other, tmp_path / "cache", watch, "filler")
    assert got == plain(other, "filler")
    assert watch.full_listings == 0


def test_open_inotify_gives_a_working_instance() -> None:
    found = open_inotify()
    assert found is not None
    found.close()
