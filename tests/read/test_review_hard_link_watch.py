"""A hard link made while a store is watched (adapters.store_watch): an edit made through it,
of the same size with the mtime put back, is seen by the next watched search exactly as a plain
scan sees it, through the library's ``StoreWatch`` and through a running ``dream mcp``
(docs/read-side.md#speed). No event reaches the store's folder for a change made under a name
outside it, so only the file's own watch can tell."""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path

import pytest
from read_helpers import rewrite_in_place, same_as_plain
from test_resident_reader import Server, client, one_shot

from dream_memory.adapters.store_watch import IN_ONLYDIR, LibcInotify, StoreWatch

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
    pytest.mark.usefixtures("no_racy_window"),
]


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_an_edit_through_a_hard_link_made_after_the_watch_started_is_seen(
    root: Path, tmp_path: Path, watch: StoreWatch, where: str
) -> None:
    cache = tmp_path / "cache"
    target = root / "entities" / "e020.md"
    same_as_plain(root, cache, watch, "needle")
    same_as_plain(root, cache, watch, "needle")  # warm: answered from the events only
    other = tmp_path / "elsewhere.md" if where == "outside" else root / "sections" / "alias.txt"
    os.link(target, other)
    same_as_plain(root, cache, watch, "needle")  # the link is there; nothing changed yet
    size = target.stat().st_size
    rewrite_in_place(other, b"filler", b"needle")
    assert target.stat().st_size == size
    assert same_as_plain(root, cache, watch, "needle") == ["entities/e020.md:1"]
    listings = watch.full_listings
    rewrite_in_place(other, b"needle", b"filler")  # and back, again only through the other name
    assert same_as_plain(root, cache, watch, "needle") == []
    assert watch.full_listings == listings  # seen through the file's own watch, no listing again


def test_a_hard_link_removed_and_made_again_keeps_being_seen(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    """The store's name replaced by a new file (a new inode): its own watch follows the name."""
    cache = tmp_path / "cache"
    target = root / "entities" / "e021.md"
    same_as_plain(root, cache, watch, "needle")
    fresh = tmp_path / "fresh.md"
    fresh.write_text("# e21\n\n- filler text number 21\n")
    os.replace(fresh, target)  # a rename over the name: its folder's event
    same_as_plain(root, cache, watch, "needle")
    other = tmp_path / "second.md"
    os.link(target, other)
    rewrite_in_place(other, b"filler", b"needle")
    assert same_as_plain(root, cache, watch, "needle") == ["entities/e021.md:1"]


class FileRefusingInotify:
    """Real inotify that refuses every file's own watch as the kernel does a file the user may
    not read (EACCES); folders are watched as usual."""

    def __init__(self) -> None:
        self.real = LibcInotify()

    def add_watch(self, path: str, mask: int) -> int:
        if not mask & IN_ONLYDIR:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)
        return self.real.add_watch(path, mask)

    def rm_watch(self, wd: int) -> None:
        self.real.rm_watch(wd)

    def read(self) -> bytes:
        return self.real.read()

    def close(self) -> None:
        self.real.close()


def test_a_file_whose_own_watch_is_refused_is_stated_by_every_search(root: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    watch = StoreWatch(str(root), inotify=FileRefusingInotify)
    try:
        same_as_plain(root, cache, watch, "needle")
        other = tmp_path / "elsewhere.md"
        os.link(root / "entities" / "e022.md", other)
        rewrite_in_place(other, b"filler", b"needle")
        assert same_as_plain(root, cache, watch, "needle") == ["entities/e022.md:1"]
        assert watch.active and watch.full_listings == 2  # still watched: the folders are
    finally:
        watch.close()


@pytest.mark.slow
def test_a_served_search_sees_an_edit_through_a_hard_link_made_while_it_runs(tmp_path: Path) -> None:
    """The scenario of the bug report: `dream mcp` running and warm, a hard link to a memory
    file made afterwards outside the store, the content changed through it in place."""
    from test_resident_reader import make_env

    env = make_env(tmp_path / "r")
    store = Path(env["DREAM_MEMORY_STORE"])
    time.sleep(2.1)  # past the 2 s racy window (the server's own): the index answers for e001.md
    server = Server(store, env)
    try:
        assert client(["zebra"], env, tmp_path)[1] == "served"
        assert client(["zebra"], env, tmp_path)[0][1] == ""  # warm, and nothing matches yet
        other = tmp_path / "outside.md"
        os.link(store / "entities" / "e001.md", other)
        rewrite_in_place(other, b"filler", b"zebra ")
        run, how = client(["zebra"], env, tmp_path)
        assert how == "served"
        assert "entities/e001.md" in run[1]
        assert run == one_shot(["zebra"], env)
        assert run == one_shot(["zebra", "--no-cache"], env)
    finally:
        server.stop()
