"""`dream context` on a real nanobot workspace whose skills are always-on through nanobot's
`metadata: {"nanobot": {...}}` form."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

ALEX = "AlexEgorov85__workspaces_nanobot/workspace"


def test_dream_context_includes_both_always_on_skills_of_the_real_workspace(
    fixtures_root: Path, dream: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """Both skills of the AlexEgorov85 workspace say `metadata: {"nanobot":{"emoji":...,
    "always":true}}`; both are in the block (read in place: the command writes nothing)."""
    ws = fixtures_root / ALEX
    before = sorted((p.relative_to(ws).as_posix(), p.stat().st_mtime_ns) for p in ws.rglob("*"))
    proc = dream("context", "--json", "--budget", "60000", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    block = json.loads(proc.stdout)
    text = block["text"] if isinstance(block, dict) and "text" in block else proc.stdout
    assert "Skill: audit_analyzer (always on)" in text
    assert "Skill: office_files (always on)" in text
    assert sorted((p.relative_to(ws).as_posix(), p.stat().st_mtime_ns) for p in ws.rglob("*")) == before
