"""What a full disk or a killed process leaves in the repository never stops the next command:
a message instead of a traceback, and the next run finishes the job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dulwich.objects import Blob, hex_to_filename

# `dream ARGS` with ENOSPC raised at the N-th write of SITE.
FULL_DISK = """
import sys
from dream_memory.adapters import fsutil
from dream_memory.testing.faults import at_write, disk_full
site, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
fsutil.set_fault_injector(at_write(disk_full, site, nth))
sys.argv = ["dream", *args]
from dream_memory.entrypoints.cli import main
main()
"""


def test_a_full_disk_during_a_restore_is_a_message_and_the_next_command_finishes(
    tmp_path: Path, dream, git, dream_commit, clean_env: dict[str, str]
) -> None:
    """ENOSPC while a restore writes a memory file (after its commit landed): exit 1 with a
    message naming the cause, no traceback; the next command finishes writing the files."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    sha = dream_commit(ws, {"USER.md": "# User\n- tea\n"}, "tea", (1, 1))
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK, "memory.write", "1", "restore", sha, "--workspace", str(ws)],
        capture_output=True,
        text=True,
        env=clean_env,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "no space left on the device" in proc.stderr
    assert (ws / "USER.md").read_text(encoding="utf-8") == "# User\n- tea\n"  # not written yet
    assert dream("init", "--workspace", str(ws)).returncode == 0  # the next command recovers
    assert git(ws, "log", "-1", "--format=%s").startswith(f"dream: revert {sha[:10]}")
    assert (ws / "USER.md").read_text(encoding="utf-8") == git(ws, "show", "HEAD:USER.md")
    assert git(ws, "status", "--porcelain") == ""


def test_a_stale_object_lock_does_not_block_commits(tmp_path: Path, dream, git, dream_commit) -> None:
    """A process killed while dulwich wrote a loose object leaves objects/xx/<id>.lock; the next
    commit that needs the same object writes it anyway and removes the dead writer's lock."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    content = b"# User\n- written after a killed attempt\n"
    blob_path = Path(hex_to_filename(str(ws / ".git/objects"), Blob.from_string(content).id))
    blob_path.parent.mkdir(exist_ok=True)
    lock = blob_path.with_name(blob_path.name + ".lock")
    lock.write_bytes(b"half a zlib stream")
    sha = dream_commit(ws, {"USER.md": content.decode()}, "after the kill", (1, 1))
    assert git(ws, "show", f"{sha}:USER.md").encode() == content
    assert not lock.exists() and blob_path.exists()
    assert git(ws, "fsck", "--strict", "--no-progress", check=False) == ""


def test_a_repository_whose_creation_was_killed_is_created_again(tmp_path: Path, dream, git) -> None:
    """A .git folder without HEAD and without any object (its creation was killed) is not a
    repository anyone can use: `dream init` creates it again, on a branch."""
    ws = tmp_path / "ws"
    for folder in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (ws / ".git" / folder).mkdir(parents=True)
    (ws / ".git/HEAD.lock").write_bytes(b"ref: refs/heads/main\n")
    proc = dream("init", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(ws, "log", "--format=%s").splitlines() == ["memory: init"]
    assert git(ws, "status", "--porcelain") == ""
