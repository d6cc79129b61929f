"""What decides a `memory: manual edits` commit reads the workspace as the commit would: never
through a symlink."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters.workspace import init_workspace
from dream_memory.app.versioning import MANUAL_SUBJECT, commit_manual_edits, ensure_versioned


def test_a_memory_file_swapped_for_a_symlink_to_a_crlf_copy_is_a_hand_edit(tmp_path: Path, git, store) -> None:
    """SOUL.md replaced by a symlink to a CRLF copy of it outside the workspace is not taken for a
    line-ends-only rewrite (that would read the file out there): the file is gone from the
    workspace as a commit sees it, and that hand edit is committed; the copy out there is untouched."""
    ws = tmp_path / "ws"
    init_workspace(ws)
    with store(ws) as s:
        assert ensure_versioned(s) is not None
    soul = (ws / "SOUL.md").read_bytes()
    outside = tmp_path / "elsewhere.md"
    outside.write_bytes(soul.replace(b"\n", b"\r\n"))
    (ws / "SOUL.md").unlink()
    (ws / "SOUL.md").symlink_to(outside)

    with store(ws) as s:
        sha = commit_manual_edits(s)
    assert sha is not None
    assert git(ws, "log", "-1", "--format=%s", sha).strip() == MANUAL_SUBJECT
    assert "SOUL.md" in git(ws, "show", "--name-only", "--format=", sha).split()
    assert outside.read_bytes() == soul.replace(b"\n", b"\r\n")
