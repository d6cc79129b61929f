"""A long-lived reader (``dream mcp``) keeps no kernel watch for what left the store: a file or a
folder moved out keeps its inode, and before, the kernel kept watching it for the server's whole
life. Past the user's ``max_user_watches`` (8,192 by default on many systems) the watch stops
and every search lstats every file again. Counted from the kernel's own list of the instance's
watches (``/proc/self/fdinfo``)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from read_helpers import same_as_plain

from dream_memory.adapters.store_watch import LibcInotify, StoreWatch

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
    pytest.mark.usefixtures("no_racy_window"),
]


def kernel_watches(watch: StoreWatch) -> int:
    inotify = watch._inotify  # the instance whose watches the kernel lists
    assert isinstance(inotify, LibcInotify)
    with open(f"/proc/self/fdinfo/{inotify.fd}") as info:
        return sum(line.startswith("inotify wd:") for line in info)


def test_files_moved_out_of_the_store_are_no_longer_watched(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    outside.mkdir()
    same_as_plain(root, cache, watch, "needle")
    before = kernel_watches(watch)
    for i in range(10):
        os.rename(root / "entities" / f"e{i:03}.md", outside / f"e{i:03}.md")
    same_as_plain(root, cache, watch, "filler")
    assert kernel_watches(watch) == before - 10
    (outside / "e000.md").write_text("# e0\n\n- the needle, out of the store\n")  # no event for it
    assert same_as_plain(root, cache, watch, "needle") == []


def test_a_folder_moved_out_of_the_store_is_no_longer_watched(root: Path, tmp_path: Path, watch: StoreWatch) -> None:
    cache = tmp_path / "cache"
    same_as_plain(root, cache, watch, "needle")
    before = kernel_watches(watch)
    moved = len(list((root / "entities").glob("*.md")))
    assert moved >= 40
    shutil.move(root / "entities", tmp_path / "moved")
    same_as_plain(root, cache, watch, "filler")
    assert kernel_watches(watch) == before - moved - 1  # its files and the folder itself
    shutil.move(tmp_path / "moved", root / "entities")  # and back: watched again, all of it
    assert same_as_plain(root, cache, watch, "filler")
    assert kernel_watches(watch) == before
