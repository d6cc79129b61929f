"""`dream context` over a hostile or huge workspace (issue 14): it reads what its budget can use,
never whole huge files, and nothing reached through a symlink out of the workspace.

What a user would notice if these failed: an agent's start-up taking half a minute and hundreds
of megabytes because Dream fell behind, or a file from elsewhere on the machine (linked in as
SOUL.md or as a skill folder) pasted into every system prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.core.history import HistoryEntry
from dream_memory.testing import build_workspace, clean_env

SKILL_ON = "---\nname: {name}\nalways: true\n---\n\n{body}\n"
MIB = 1024 * 1024


def _context(root: Path, home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """`dream context` as its own process; also the bytes it read (``rchar`` of /proc/self/io)."""
    io_file = root.parent / f"io-{root.name}.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(io_file)!r}, 'w').write(open('/proc/self/io').read()))\n"
        "sys.argv = ['dream', *sys.argv[1:]]\n"
        "from dream_memory.entrypoints.cli import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "context", "--workspace", str(root), *args],
        capture_output=True,
        text=True,
        env=clean_env(home),
        timeout=600,
    )
    fields = dict(line.split(": ") for line in io_file.read_text().splitlines())
    return proc, int(fields["rchar"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io to count the bytes read")
def test_context_reads_only_what_its_budget_can_use(tmp_path: Path) -> None:
    """A 64 MiB MEMORY.md, a 64 MiB history.jsonl whose undreamt entries are at its end, a
    16 MiB USER.md and 400 always-on skills: `dream context` reads at most a few MiB more than
    it does for a tiny workspace (the interpreter's own start-up is the same in both), and the
    block still holds the newest entries, the outline of MEMORY.md and stays within its budget."""
    small = build_workspace(tmp_path / "small", history=["the user likes tea"])
    _, baseline = _context(small, tmp_path / "home")

    root = build_workspace(tmp_path / "huge")
    with (root / "memory" / "MEMORY.md").open("w") as handle:
        handle.write("# Memory\n\n## Decisions\n\n- uses PostgreSQL\n\n")
        handle.truncate(64 * MIB)  # sparse: reading it whole would read 64 MiB
    with (root / "USER.md").open("w") as handle:
        handle.write("# User\n\n- prefers dark mode\n")
        handle.truncate(16 * MIB)
    with (root / "memory" / "history.jsonl").open("w") as handle:
        handle.write(HistoryEntry(1, "2026-04-01 00:00", "an old dreamt entry").to_json_line() + "\n")
        handle.truncate(64 * MIB)
        handle.seek(64 * MIB)
        handle.write("\n")
        for cursor in range(2, 3002):
            entry = HistoryEntry(cursor, "2026-04-03 00:02", f"pending entry {cursor} about deploys")
            handle.write(entry.to_json_line() + "\n")
    (root / "memory" / ".dream_cursor").write_text("1\n")
    for i in range(400):
        skill = root / "skills" / f"s{i:03d}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL_ON.format(name=f"s{i:03d}", body="- step\n" * 2000))

    proc, read = _context(root, tmp_path / "home", "--json")
    assert proc.returncode == 0, proc.stderr
    block = json.loads(proc.stdout)
    assert read - baseline < 4 * MIB, f"read {read - baseline} bytes more than for a tiny workspace"
    assert block["tokens"] <= 8000
    assert "pending entry 3001 about deploys" in block["text"]  # the newest is kept
    assert "memory/MEMORY.md" in block["outlined"] and "Decisions" in block["text"]
    assert block["history_left_out"] > 0


def test_a_skill_folder_linked_out_of_the_workspace_is_left_out(tmp_path: Path) -> None:
    """An always-on skill reached through a symlinked folder (skills/ext -> a folder elsewhere)
    or a symlinked SKILL.md never reaches the block; the block says it was left out and why."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "SKILL.md").write_text(SKILL_ON.format(name="ext", body="OUTSIDE-SKILL-BODY"))
    root = build_workspace(tmp_path / "ws", files={"skills/own/SKILL.md": SKILL_ON.format(name="own", body="OWN")})
    (root / "skills" / "ext").symlink_to(outside, target_is_directory=True)
    (root / "skills" / "file").mkdir()
    (root / "skills" / "file" / "SKILL.md").symlink_to(outside / "SKILL.md")
    proc, _ = _context(root, tmp_path / "home", "--json") if Path("/proc/self/io").exists() else (None, 0)
    if proc is None:
        pytest.skip("needs /proc/self/io")
    assert proc.returncode == 0, proc.stderr
    block = json.loads(proc.stdout)
    assert "OUTSIDE-SKILL-BODY" not in block["text"] and "OWN" in block["text"]
    notes = " ".join(block["left_out"])
    assert "skills/ext/SKILL.md leads outside the workspace" in notes
    assert "skills/file/SKILL.md leads outside the workspace" in notes
    assert os.path.exists(outside / "SKILL.md")
