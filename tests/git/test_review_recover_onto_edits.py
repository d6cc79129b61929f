"""A change killed after the branch moved is finished by the next command, but never over an edit
made to its files since the crash (nanobot's write_user, a person in an editor): the change is
merged into the edit, or, when both changed the same lines, the edited file is left as it is
and recovery says so. Dream's commit stays as it was; the next manual-edits commit records the
person's file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from dream_memory.app.versioning import commit_manual_edits, recover

# A Dream-like commit adding one line to USER.md and to MEMORY.md, SIGKILLed just before the
# N-th memory file write (1: HEAD moved, nothing written; 2: USER.md written, MEMORY.md not).
KILLER = """
import sys
from pathlib import Path
from dream_memory.adapters import fsutil
from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit
from dream_memory.testing import FrozenClock
from dream_memory.testing.faults import at_write, kill_self
nth, ws = int(sys.argv[1]), Path(sys.argv[2])
store = GitStore.open(ws, author="dream-memory <dream-memory@localhost>", clock=FrozenClock())
user, memory = (ws / "USER.md").read_bytes(), (ws / "memory/MEMORY.md").read_bytes()
fsutil.set_fault_injector(at_write(kill_self, "memory.write", nth))
apply_commit(store, {"USER.md": user + b"- DREAM: prefers tea\\n", "memory/MEMORY.md": memory + b"- DREAM: fact\\n",
                     "memory/.dream_cursor": b"7\\n"}, "dream: 1..7: USER.md +1 -0")
"""

PERSON = "- PERSON: the cat is called Tom\n"


def _killed_commit(tmp_path: Path, dream, clean_env: dict[str, str], nth: int = 1) -> Path:
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(nth), str(ws)], capture_output=True, text=True, env=clean_env
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (ws / "memory/.dream_journal.json").exists()
    return ws


def _insert_after_first_line(path: Path, line: str) -> str:
    """The person's edit away from the end, where the change adds its line."""
    head, _, rest = path.read_text(encoding="utf-8").partition("\n")
    text = f"{head}\n{line}{rest}"
    path.write_text(text, encoding="utf-8")
    return text


def test_an_edit_made_after_the_crash_is_kept_and_the_change_merged_into_it(
    tmp_path: Path, dream, git, store, clean_env
) -> None:
    ws = _killed_commit(tmp_path, dream, clean_env)
    user = ws / "USER.md"
    _insert_after_first_line(user, PERSON)
    assert "USER.md" in dream("status", "--workspace", str(ws)).stdout  # an unsaved edit

    with store(ws) as s:
        recovered = recover(s)
    assert recovered is not None and recovered.action == "finished"
    text = user.read_text(encoding="utf-8")
    assert PERSON in text and text.endswith("- DREAM: prefers tea\n")  # the edit and the change
    assert "- DREAM: fact\n" in (ws / "memory/MEMORY.md").read_text(encoding="utf-8")  # not edited: as committed
    assert any("USER.md" in n and "merged" in n for n in recovered.notes), recovered.notes
    assert not any("MEMORY.md" in n for n in recovered.notes)

    with store(ws) as s:
        assert commit_manual_edits(s) is not None
    assert git(ws, "log", "--format=%s").splitlines()[:2] == ["memory: manual edits", "dream: 1..7: USER.md +1 -0"]
    assert PERSON in git(ws, "show", "HEAD", "--", "USER.md")  # the person's line, in the person's commit
    assert PERSON not in git(ws, "show", "HEAD~1:USER.md")  # never in Dream's
    assert git(ws, "status", "--porcelain") == ""


def test_an_edit_on_the_lines_the_change_writes_is_left_as_the_person_wrote_it(
    tmp_path: Path, dream, git, store, clean_env
) -> None:
    ws = _killed_commit(tmp_path, dream, clean_env)
    user = ws / "USER.md"
    mine = user.read_text(encoding="utf-8") + "- PERSON: prefers coffee\n"  # where Dream adds its line
    user.write_text(mine, encoding="utf-8")

    with store(ws) as s:
        recovered = recover(s)
    assert recovered is not None and recovered.action == "finished"
    assert user.read_text(encoding="utf-8") == mine  # byte for byte
    assert "- DREAM: prefers tea" in git(ws, "show", "HEAD:USER.md")  # Dream's change stays in git
    assert any("USER.md" in n and "left as edited" in n and recovered.commit[:10] in n for n in recovered.notes)

    with store(ws) as s:
        commit_manual_edits(s)
    assert git(ws, "show", "HEAD:USER.md") == mine  # the next manual-edits commit records it


def test_an_edit_after_the_crash_to_a_file_already_written_is_kept(
    tmp_path: Path, dream, git, store, clean_env
) -> None:
    """Killed after USER.md was written: the person edits Dream's version, which is neither the
    parent's nor the commit's any more."""
    ws = _killed_commit(tmp_path, dream, clean_env, nth=2)
    user = ws / "USER.md"
    assert user.read_text(encoding="utf-8").endswith("- DREAM: prefers tea\n")
    mine = _insert_after_first_line(user, PERSON)

    with store(ws) as s:
        recovered = recover(s)
    assert recovered is not None
    assert user.read_text(encoding="utf-8") == mine
    assert (ws / "memory/MEMORY.md").read_text(encoding="utf-8").endswith("- DREAM: fact\n")


def test_a_file_deleted_after_the_crash_stays_deleted(tmp_path: Path, dream, git, store, clean_env) -> None:
    ws = _killed_commit(tmp_path, dream, clean_env)
    (ws / "USER.md").unlink()
    with store(ws) as s:
        recovered = recover(s)
    assert recovered is not None
    assert not (ws / "USER.md").exists()
    assert any("USER.md" in n and "left as edited" in n for n in recovered.notes)


def test_dream_run_reports_the_edit_it_recovered_onto(tmp_path: Path, dream, git, clean_env) -> None:
    """The trial's case through the command: `dream run` killed while writing its batch, nanobot
    adds a line to USER.md, the next `dream run` keeps it, commits it as the person's, and says so."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    for n in (1, 2):
        assert dream("append", "--workspace", str(ws), f"- [durable] User prefers tool {n}").returncode == 0
    killed = """
import sys
from dream_memory.adapters import fsutil
from dream_memory.entrypoints.dream_script import main
from dream_memory.testing.faults import at_write, kill_self
fsutil.set_fault_injector(at_write(kill_self, "memory.write"))
sys.argv = ["dream", "run", "--workspace", sys.argv[1], "--model", "offline"]
main()
"""
    proc = subprocess.run([sys.executable, "-c", killed, str(ws)], capture_output=True, text=True, env=clean_env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    user = ws / "USER.md"
    user.write_text(user.read_text(encoding="utf-8").rstrip("\n") + "\n" + PERSON, encoding="utf-8")

    run = dream("run", "--workspace", str(ws), "--model", "offline", "--json")
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout)["notes"]
    assert any("USER.md changed on disk after the change was interrupted" in n for n in notes), notes
    assert PERSON in user.read_text(encoding="utf-8")
    assert "User prefers tool 2" in user.read_text(encoding="utf-8")
    assert PERSON in git(ws, "log", "-p", "--format=%s", "-1", "--grep=manual edits", "--", "USER.md")
