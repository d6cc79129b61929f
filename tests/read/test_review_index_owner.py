"""A search index in a folder that is not the user's own private one is never served
(adapters/search_index/trust.py, docs/read-side.md#speed): another user who made the cache
folder first (a shared /tmp or XDG_CACHE_HOME) or who may write into it could plant an index that
answers wrong results. Real processes and files: the index is built and then changed through the
index's own writer and re-recorded as dream-memory's, which is what such a user can do; the
search must then print what `--no-cache` prints, say why on stderr, and leave that folder alone;
unless the folder is the user's own and only too open, which the search makes private again,
throwing away the index in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from read_helpers import FILES, read_env, snapshot, write_store

from dream_memory.adapters.search_index import SCHEMA_VERSION, mark
from dream_memory.adapters.search_index.files import IndexedText, stat_key
from dream_memory.adapters.search_index.location import SearchIndex
from dream_memory.adapters.search_index.write import update
from dream_memory.app.read import ReadStore
from dream_memory.core.search import fold_bytes, heading_lines

INDEX_FOLDER = f"search-v{SCHEMA_VERSION}"

NOBODY = 65534
PLANTED = b"# e1\n\n- zebra planted by someone else\n"
DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]


def big_store(root: Path) -> Path:
    """Enough entities for the search index (500 files or more), past the 2 s racy window."""
    extra = {f"entities/e{i:03}.md": f"# e{i}\n\n- filler text number {i}\n" for i in range(520)}
    store = write_store(root, {**FILES, **extra})
    past = time.time() - 100
    for path in (store / "entities").iterdir():
        os.utime(path, (past, past))
    time.sleep(2.1)  # the ctime cannot be put back: wait the racy window out
    return store


def plant(cache_root: Path, store: Path) -> None:
    """Build the index of ``store`` under ``cache_root`` and make it say that entities/e001.md
    holds "zebra", recorded as dream-memory's own write (what whoever owns the folder can do)."""
    with ReadStore(store, home="/home/u", cache_dir=cache_root) as reader:
        reader.search("filler", max_results=1)
    index = SearchIndex.for_store(cache_root, os.path.realpath(store))
    assert index is not None
    opened = index.open()
    assert opened is not None, "no index was built"
    rel = "entities/e001.md"
    text = fold_bytes(PLANTED)
    item = IndexedText(rel, stat_key(os.lstat(store / rel)), time.time_ns(), text, heading_lines(text))
    update(opened, [item], set(opened.files.rels), opened.index_rows)
    opened.close()
    index.mark_written()


def planted(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A store big enough to be indexed, with an index planted in its cache folder (that answers
    e001.md for "zebra"): the store, XDG_CACHE_HOME and the env of a search."""
    store = big_store(tmp_path / "store")
    cache_home = tmp_path / "xdg"
    cache_home.mkdir()
    plant(cache_home / "dream-memory", store)
    return store, cache_home, read_env(store, XDG_CACHE_HOME=str(cache_home))


def search(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DREAM, "search", "zebra", *extra], env=env, capture_output=True, text=True, check=False)


def assert_not_served(env: dict[str, str], cache: Path, why: str) -> None:
    before = snapshot(cache)
    plain = search(env, "--no-cache")
    assert "entities/e001.md" not in plain.stdout
    got = search(env)
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout)
    assert "search index not used" in got.stderr and why in got.stderr, got.stderr
    assert snapshot(cache) == before  # nothing built, removed or written there


@pytest.mark.parametrize(
    ("folder", "mode"),
    [("dream-memory", 0o777), (f"dream-memory/{INDEX_FOLDER}", 0o775)],
    ids=["cache-0777", "index-0775"],
)
def test_a_folder_of_ours_others_may_write_is_made_private_and_its_index_built_again(
    tmp_path: Path, folder: str, mode: int
) -> None:
    """The user's own cache folder (or index folder) left writable by others, as an older version
    made it under umask 002: whatever is in it may be someone else's, so the index in it never
    answers; but a refusal would make every search read the files until the user ran chmod. The
    search makes it 0700 and builds the index again from the files. Needs no second user."""
    store, cache_home, env = planted(tmp_path)
    assert "entities/e001.md" in search(env).stdout  # the planted index answers while trusted
    (cache_home / folder).chmod(mode)
    plain = search(env, "--no-cache")
    assert "entities/e001.md" not in plain.stdout
    got = search(env)
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout)
    assert f"may be written by other users (mode {mode:04o}): made private (0700)" in got.stderr, got.stderr
    assert "search index not used" not in got.stderr
    for made in (cache_home / "dream-memory", cache_home / "dream-memory" / INDEX_FOLDER):
        assert made.stat().st_mode & 0o777 == 0o700, made
    index = SearchIndex.for_store(cache_home / "dream-memory", os.path.realpath(store))
    assert index is not None and mark.trusted(index.path), "the index was not built again"
    again = search(env)
    assert (again.returncode, again.stdout, again.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_a_cache_folder_below_a_folder_others_may_write_is_not_served(tmp_path: Path) -> None:
    """XDG_CACHE_HOME writable by everyone without the sticky bit: whoever may write it can swap
    the cache folder for one of their own, so the index is not used, and the folder above is not
    the product's to repair (nothing in the cache is changed). Needs no second user."""
    _store, cache_home, env = planted(tmp_path)
    assert "entities/e001.md" in search(env).stdout  # the planted index answers while trusted
    cache_home.chmod(0o777)
    assert_not_served(env, cache_home, f"{cache_home} may be written by other users (mode 0777)")
    cache_home.chmod(0o755)  # safe again: used again
    assert "search index not used" not in search(env).stderr


def test_a_folder_swapped_for_a_symlink_before_the_repair_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder looked at as the user's own open folder, then swapped for a symlink to
    another folder before the repair: the repair opens it without following the link and gives
    up; the link's target keeps its mode and its files."""
    from dream_memory.adapters.search_index import trust

    target = tmp_path / "elsewhere"
    (target / INDEX_FOLDER).mkdir(parents=True)
    (target / INDEX_FOLDER / "keep.sqlite").write_bytes(b"not ours to remove")
    target.chmod(0o777)
    root = tmp_path / "xdg" / "dream-memory"
    root.parent.mkdir()
    root.symlink_to(target)
    folder = str(root / INDEX_FOLDER)
    looked = trust._Survey(None, [(str(root), f"{root} may be written by other users (mode 0777)")])
    monkeypatch.setattr(trust, "_survey", lambda _folder: looked)
    problem = trust.secure(folder).problem
    assert problem is not None and "could not be made private" in problem
    assert target.stat().st_mode & 0o777 == 0o777
    assert (target / INDEX_FOLDER / "keep.sqlite").exists()


def test_a_new_index_folder_is_made_private_whatever_the_umask(tmp_path: Path) -> None:
    store = big_store(tmp_path / "store")
    cache_home = tmp_path / "xdg"
    cache_home.mkdir()
    env = read_env(store, XDG_CACHE_HOME=str(cache_home))
    done = subprocess.run(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", *DREAM, "search", "filler"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for folder in (cache_home / "dream-memory", cache_home / "dream-memory" / INDEX_FOLDER):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert "search index not used" not in search(env).stderr


# --- another user (needs root) -------------------------------------------------------------------

PLANT_AS_NOBODY = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import hashlib, secrets, shutil, sqlite3  # what the index imports lazily: loaded while still root
import test_review_index_owner as t
os.setgroups([]); os.setgid(t.NOBODY); os.setuid(t.NOBODY)
t.plant(Path(sys.argv[1]), Path(sys.argv[2]))
"""


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temp folder every user can reach (pytest's own lies below a folder only root may enter)."""
    if os.geteuid() != 0:
        pytest.skip("another user's folder needs root to make")
    folder = Path(tempfile.mkdtemp(prefix="dream-owner-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_cache_folder_made_by_another_user_is_not_served(open_tmp: Path) -> None:
    """The scenario of the report: a shared XDG_CACHE_HOME another user made first, holding an
    index that user built and changed (everything in it theirs, mode 0700 or 0600)."""
    store = big_store(open_tmp / "store")
    subprocess.run(["chmod", "-R", "a+rX", str(store)], check=True)
    shared = open_tmp / "shared"
    shared.mkdir()
    os.chown(shared, NOBODY, NOBODY)
    done = subprocess.run(
        [sys.executable, "-c", PLANT_AS_NOBODY, str(shared / "dream-memory"), str(store), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (shared / "dream-memory" / INDEX_FOLDER).stat().st_uid == NOBODY
    env = read_env(store, XDG_CACHE_HOME=str(shared))
    assert_not_served(env, shared, f"is owned by uid {NOBODY}, not by you (uid 0)")


@pytest.mark.parametrize("which", [".sqlite", ".sqlite.written"])
def test_an_index_file_of_another_user_in_a_private_folder_is_not_trusted(tmp_path: Path, which: str) -> None:
    """The folder is the user's own and private, but the index (or its record) is not the
    user's file: it is not trusted, and built again from the files."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    store, cache_home, env = planted(tmp_path)
    folder = cache_home / "dream-memory" / INDEX_FOLDER
    (index,) = folder.glob("*.sqlite")
    index_of = SearchIndex.for_store(cache_home / "dream-memory", os.path.realpath(store))
    assert index_of is not None
    # The record matches the files as they are (a chown changes the ctime: recorded after it):
    # only the owner tells.
    if which == ".sqlite":
        os.chown(index, NOBODY, NOBODY)
        index_of.mark_written()
    else:
        index_of.mark_written()
        os.chown(f"{index}.written", NOBODY, NOBODY)
    plain = search(env, "--no-cache")
    got = search(env)
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout)
    assert "entities/e001.md" not in got.stdout
    assert all(p.stat().st_uid == 0 for p in folder.iterdir())  # built again, as the user's


@pytest.mark.slow
def test_a_served_search_does_not_serve_an_index_others_may_write(tmp_path: Path) -> None:
    """Through a running `dream mcp`: the client's cache folder is the one looked at."""
    from test_resident_reader import Server, client

    store, cache_home, env = planted(tmp_path)
    server = Server(store, env)
    try:
        (run, how) = client(["zebra"], env, tmp_path)
        assert how == "served" and "entities/e001.md" in run[1]  # trusted while private
        (cache_home / "dream-memory").chmod(0o777)
        (run, how) = client(["zebra"], env, tmp_path)
        assert how == "served"
        plain = search(env, "--no-cache")
        assert (run[0], run[1]) == (plain.returncode, plain.stdout)
        assert (cache_home / "dream-memory").stat().st_mode & 0o777 == 0o700  # made private by the server
    finally:
        server.stop()
