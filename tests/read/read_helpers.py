"""Builders for the read-side tests: real store folders on disk, a tree snapshot that proves
nothing was written, and the environment for child processes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dream_memory.adapters.store_watch import StoreWatch
from dream_memory.app.read import ReadStore

INDEX = """\
# Index

| Entity | File | Repos |
|---|---|---|
| nix-config | entities/nix-config.md | /home/u/system/nix-config (was nixos-system), ~/dots |
| nix-old | entities/nix-old.md | /home/u/system/nix-config-old |
| secret | entities/secret.md | /home/u/secret |
| dream | entities/dream.md | /home/u/src/dream-memory |
"""

FILES: dict[str, str] = {
    "index.md": INDEX,
    "entities/nix-config.md": "# nix-config\n\n- uses flakes for every host\n- deploys with Colmena\n",
    "entities/nix-old.md": "# nix-old\n\n- archived; flakes were not used yet\n",
    "entities/secret.md": "# secret\n\n- the vault password hint mentions flakes\n",
    "entities/dream.md": "# dream\n\n- Python package, tests with pytest\n- Colmena is not used here\n",
    "sections/deploys.md": "# Deploys\n\n## Colmena\n- flakes pinned weekly\n",
    "observations.md": "- 2026-04-01 the user may prefer Colmena over deploy-rs\n",
    "SOUL.md": "# Soul\n\nCalm and concise.\n",
    "USER.md": "# User\n\n- prefers dark mode\n",
    "memory/MEMORY.md": "# Memory\n\n- flake.lock is updated weekly\n",
}


def write_store(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` (no symlink followed): kind, size and mtime in ns."""
    state: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            state[os.path.relpath(full, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    st = os.lstat(root)
    state["."] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


def read_env(store: Path, **extra: str) -> dict[str, str]:
    """The environment for a CLI or stdio child: only what it needs, passed explicitly."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/home/u",
        "DREAM_MEMORY_STORE": str(store),
        "DREAM_WORKSPACE": str(store),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


def watched(root: Path, cache: Path, watch: StoreWatch, query: str) -> tuple[list[str], dict[str, int]]:
    with ReadStore(root, home="/home/u", cache_dir=cache, cache_min_files=10, watch=watch) as r:
        result = r.search(query, max_results=50)
        return [f"{h.path}:{h.hit_count}" for h in result.results], r.last_search_stats


def plain(root: Path, query: str) -> list[str]:
    with ReadStore(root, home="/home/u") as r:
        return [f"{h.path}:{h.hit_count}" for h in r.search(query, max_results=50).results]


def same_as_plain(root: Path, cache: Path, watch: StoreWatch, query: str) -> list[str]:
    """The watched search's answer, asserted equal to a plain scan's."""
    got, _ = watched(root, cache, watch, query)
    assert got == plain(root, query)
    return got


def rewrite_in_place(path: Path, old: bytes, new: bytes) -> bytes:
    """Replace ``old`` with ``new`` (same length) in ``path`` through the open file, then put the
    mtime back: the size and the mtime say nothing changed, only an inotify event tells. Returns
    the bytes it held before."""
    before = path.stat()
    data = path.read_bytes()
    with open(path, "r+b") as f:
        f.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return data


def index_answer_and_plain(root: Path, cache: Path, query: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The search index of ``root`` built by one search, then ``query`` answered from it and by
    reading the files: both answers (``to_json``) and how many files the index answered for."""
    with ReadStore(root, cache_dir=cache, cache_min_files=10) as r:
        r.search("x")
    with ReadStore(root, cache_dir=cache, cache_min_files=10) as r:
        with_index = r.search(query, max_results=50).to_json()
        from_cache = r.last_search_stats["from_cache"]
    return with_index, ReadStore(root).search(query, max_results=50).to_json(), from_cache
