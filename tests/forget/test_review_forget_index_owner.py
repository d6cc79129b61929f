"""`dream forget` removes the search index only in a folder the user's searches would use
(adapters/search_index/trust.py, docs/read-side.md#speed): never inside another user's folder,
nor below a folder others may write (whoever may write there may have swapped the folder). An
index left there is named in a warning, and no search of the user's serves it, so the forgotten
text never comes back from it. A folder of the user's own that is only too open is made private
and emptied, as a search does; a dry run only says so. Real `dream` processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from forget_helpers import CANARY, Env, indexed_store

from dream_memory.adapters.search_index import SCHEMA_VERSION

NOBODY = 65534


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def forget(env: Env, *extra: str) -> tuple[dict[str, object], str]:
    done = env.process("forget", "--purge", CANARY, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", ["open-parent", "another-user"])
def test_an_index_in_a_folder_not_trusted_is_left_named_and_never_served(env: Env, tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    indexes = indexed_store(env, cache)
    if how == "open-parent":
        cache.chmod(0o777)  # XDG_CACHE_HOME writable by all, no sticky bit: not the product's to repair
        why = f"{cache} may be written by other users (mode 0777)"
    elif os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    else:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(cache / "dream-memory")], check=True)
        why = f"{cache / 'dream-memory' / f'search-v{SCHEMA_VERSION}'} is owned by uid {NOBODY}, not by you (uid 0)"

    report, _ = forget(env)

    assert report["search_index_removed"] is False
    named = f"the search index {indexes[0]} was not removed: {why}"
    assert any(named in warning for warning in report["warnings"]), report["warnings"]
    assert all(b"7f3q9" in p.read_bytes() for p in indexes)  # not deleted in
    after = env.process("search", "locker")
    plain = env.process("search", "locker", "--no-cache")
    assert after.returncode == 0 and CANARY not in after.stdout and "[forgotten]" in after.stdout
    assert after.stdout == plain.stdout
    assert "search index not used" in after.stderr


@pytest.mark.slow
def test_a_folder_of_ours_too_open_is_made_private_and_emptied_but_not_in_a_dry_run(env: Env, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    indexes = indexed_store(env, cache)
    folder = cache / "dream-memory"
    folder.chmod(0o777)

    report, stderr = forget(env, "--dry-run")
    assert report["search_index_removed"] is True, stderr  # what the purge would do
    assert folder.stat().st_mode & 0o777 == 0o777 and all(p.exists() for p in indexes)  # a dry run writes nothing

    report, stderr = forget(env)
    assert report["search_index_removed"] is True
    warnings = report["warnings"]
    assert isinstance(warnings, list)
    said = " ".join(warnings)
    assert "not removed" not in said and "made private (0700)" in said, report
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not any(p.exists() for p in indexes)
    after = env.process("search", "locker")
    assert after.returncode == 0 and CANARY not in after.stdout and "[forgotten]" in after.stdout
