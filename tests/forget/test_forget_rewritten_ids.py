"""After `dream forget`, every commit from before the purge has a new id. A restore or log of an
old id said only "no branch or commit matches", with a hint about hex prefixes (found by an
independent review); it now says why, and where the new ids are."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


def test_an_id_from_before_a_forget_is_refused_saying_history_was_rewritten(dream: Dream, tmp_path) -> None:
    ws = build_workspace(tmp_path / "ws", history=["- [durable] User lives in Carcassonne"])
    assert dream("run", "-w", str(ws), "--model", "offline").returncode == 0
    old = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    unknown = dream("restore", "-w", str(ws), "deadbeef")
    assert unknown.returncode == 2 and "forget" not in unknown.stderr  # before any forget: as ever

    assert dream("forget", "--purge", "Carcassonne", "-w", str(ws)).returncode == 0
    for command in ("restore", "log"):
        refused = dream(command, "-w", str(ws), old[:12])
        assert refused.returncode == 2, refused.stderr
        assert "`dream forget` rewrote this repository's history" in refused.stderr
        assert "`dream restore` lists the commits as they are now" in refused.stderr
