"""An edit made to a file Dream is changing after the batch's last check for edits and before its
file is replaced (the commit being built, the temp file being written) is never written over:
the file is checked again right before each rename, the batch's change merged into the edit, or
the edit left as it is when both changed the same lines. Dream's commit stays as it was; the next
manual-edits commit records the person's file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dream_helpers import dream_in_process, git
from test_edits_made_meanwhile import HAND, _workspace

from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import commit_manual_edits
from dream_memory.testing import FrozenClock
from dream_memory.testing.faults import at_write, fault_hook


def _prepend(path: Path) -> Callable[[Path], None]:
    """The person's line right below the title: away from where the batch adds its fact."""

    def edit(_: Path) -> None:
        head, _, rest = path.read_text(encoding="utf-8").partition("\n")
        path.write_text(f"{head}\n{HAND}\n{rest}", encoding="utf-8")

    return edit


def _only_for(path: Path, edit: Callable[[Path], None]) -> Callable[[Path], None]:
    def act(at: Path) -> None:
        if at == path:
            edit(at)

    return act


def _notes(report) -> list[str]:
    return [n for b in report.batches for n in b.notes]


def test_an_edit_while_the_commit_is_built_is_kept(tmp_path: Path) -> None:
    """The trial's window: nanobot's write_user while git writes the batch's objects."""
    root = _workspace(tmp_path)
    user, memory = root / "USER.md", root / "memory" / "MEMORY.md"
    untouched = "- HAND: MEMORY.md, a file the batch does not change\n"

    def both(path: Path) -> None:
        _prepend(user)(path)
        memory.write_text(memory.read_text(encoding="utf-8") + untouched, encoding="utf-8")

    with fault_hook(at_write(both, "journal.write")):
        report = dream_in_process(root)
    assert report.status == "ok"
    text = user.read_text(encoding="utf-8")
    assert HAND in text and "Maya" in text  # the person's line and the batch's fact
    assert untouched in memory.read_text(encoding="utf-8")
    assert HAND not in git(root, "show", "HEAD:USER.md")  # never in Dream's commit
    assert any("USER.md changed on disk while the batch's commit was written" in n for n in _notes(report))

    with GitStore.open(root, author="t <t@t>", clock=FrozenClock()) as store:
        assert commit_manual_edits(store) is not None
    assert HAND in git(root, "show", "HEAD:USER.md")
    assert git(root, "log", "-1", "--format=%s") == "memory: manual edits\n"


def test_an_edit_right_before_the_file_is_replaced_is_kept(tmp_path: Path) -> None:
    """The edit lands after the file was read for the write and before the rename: the check
    made after the temp file is durable sees it."""
    root = _workspace(tmp_path)
    user = root / "USER.md"
    with fault_hook(at_write(_only_for(user, _prepend(user)), "memory.write")):
        report = dream_in_process(root)
    assert report.status == "ok"
    text = user.read_text(encoding="utf-8")
    assert HAND in text and "Maya" in text
    assert text.count(HAND) == 1


def test_an_edit_on_the_lines_the_batch_writes_is_left_as_written(tmp_path: Path) -> None:
    """The person adds a line where the batch adds its fact: which goes first is not Dream's to
    guess."""
    root = _workspace(tmp_path)
    user = root / "USER.md"
    mine = user.read_text(encoding="utf-8").replace("## Profile\n\n", f"## Profile\n\n{HAND}\n\n", 1)
    assert HAND in mine

    with fault_hook(at_write(lambda _: user.write_text(mine, encoding="utf-8"), "journal.write")):
        report = dream_in_process(root)
    assert report.status == "ok"
    assert user.read_text(encoding="utf-8") == mine  # byte for byte
    assert "Maya" in git(root, "show", "HEAD:USER.md")  # the batch's change is in its commit
    assert any("USER.md" in n and "left as edited" in n for n in _notes(report)), _notes(report)


def test_a_file_that_keeps_changing_is_left_to_the_person_after_a_few_merges(tmp_path: Path) -> None:
    """Each check finds a new edit: the merge is redone a bounded number of times, then the file
    is left as the person last wrote it."""
    root = _workspace(tmp_path)
    user = root / "USER.md"
    count = [0]

    def keep_editing(_: Path) -> None:
        count[0] += 1
        head, _, rest = user.read_text(encoding="utf-8").partition("\n")
        user.write_text(f"{head}\n- HAND EDIT {count[0]}\n{rest}", encoding="utf-8")

    with fault_hook(_each(user, keep_editing)):
        report = dream_in_process(root)
    assert report.status == "ok"
    assert 1 < count[0] <= 10
    text = user.read_text(encoding="utf-8")
    assert all(f"- HAND EDIT {n}\n" in text for n in range(1, count[0] + 1))
    assert "Maya" not in text
    assert any("USER.md" in n and "left as edited" in n for n in _notes(report)), _notes(report)


def _each(path: Path, edit: Callable[[Path], None]) -> Callable[[str, Path], None]:
    """An injector editing ``path`` before every write of it."""

    def inject(site: str, at: Path) -> None:
        if site == "memory.write" and at == path:
            edit(at)

    return inject
