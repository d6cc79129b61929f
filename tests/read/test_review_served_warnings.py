"""A served `dream search` (answered by a running `dream mcp`) tells its own caller on stderr
what a one-shot search tells: that the index was not used, and why, or that its folder was made
private. Before, the server wrote those lines to its own log, once per server process, so the
user who typed `dream search` heard nothing, and a second user's search not even the server log.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_resident_reader import Server, client
from test_review_index_owner import planted, search

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident reader is Linux's")


@pytest.mark.slow
def test_a_served_search_says_on_its_callers_stderr_why_the_index_was_not_used(tmp_path: Path) -> None:
    store, cache_home, env = planted(tmp_path)
    cache_home.chmod(0o777)  # XDG_CACHE_HOME open to all, no sticky bit: refused, never repaired
    one_shot = search(env)
    assert "search index not used" in one_shot.stderr
    server = Server(store, env)
    try:
        for _ in range(2):  # every search says it, not only the server's first
            (code, out, err), how = client(["zebra"], env, tmp_path)
            assert how == "served"
            assert (code, out, err) == (one_shot.returncode, one_shot.stdout, one_shot.stderr)
    finally:
        server.stop()
        cache_home.chmod(0o755)


@pytest.mark.slow
def test_a_served_search_says_on_its_callers_stderr_that_the_folder_was_made_private(tmp_path: Path) -> None:
    store, cache_home, env = planted(tmp_path)
    server = Server(store, env)
    try:
        (cache_home / "dream-memory").chmod(0o777)
        (code, _out, err), how = client(["zebra"], env, tmp_path)
        assert how == "served" and code == 0
        assert "dream: warning: " in err and "may be written by other users (mode 0777): made private (0700)" in err
        (_code, _out, err), how = client(["zebra"], env, tmp_path)
        assert how == "served" and "made private" not in err  # repaired once, said once
    finally:
        server.stop()
