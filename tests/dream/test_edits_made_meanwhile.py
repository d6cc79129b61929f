"""A person (or an agent) edits a memory file while Dream's batch waits on the model: the edit is
never lost and never passes as Dream's. It is committed as its own `memory: manual edits` commit,
and the batch's change is merged into it; when both changed the same lines the batch does not
land, the cursor stays, and the next run does it again from the edited text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dream_helpers import dream_in_process, git

from dream_memory.adapters.offline import OfflineModel
from dream_memory.core.chat import ChatReply, Message, ToolSpec
from dream_memory.testing import build_workspace

FACT = "- [durable] User prefers dark roast coffee every morning."
HAND = "- HAND EDIT: the user is allergic to peanuts"


class EditsWhileThinking:
    """The offline engine, with a hand edit made on disk while one of its calls is in flight:
    the analysis call (phase 1, before the batch reads the files) or an edit call that answers
    tool results (phase 2, after the batch read and edited them)."""

    def __init__(self, phase: int, edit: Callable[[], None]) -> None:
        self.inner = OfflineModel()
        self.phase = phase
        self.edit: Callable[[], None] | None = edit

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        after_tools = tools is not None and any(m.get("role") == "tool" for m in messages)
        if self.edit is not None and (after_tools if self.phase == 2 else tools is None):
            self.edit()
            self.edit = None
        return self.inner.complete(messages, tools=tools, purpose=purpose)


def _workspace(tmp_path: Path) -> Path:
    root = build_workspace(tmp_path / "ws", history=[FACT])
    assert dream_in_process(root).status == "ok"  # the repository, with the templates committed
    with (root / "memory" / "history.jsonl").open("a", encoding="utf-8") as history:
        history.write(
            '{"cursor": 2, "timestamp": "2026-04-03 00:03", "content": "- [durable] User\'s name is Maya."}\n'
        )
    return root


def _append_line(path: Path) -> Callable[[], None]:
    return lambda: path.write_text(path.read_text(encoding="utf-8") + HAND + "\n", encoding="utf-8")


def _subjects(root: Path) -> list[str]:
    return git(root, "log", "--format=%s").splitlines()


def test_a_line_added_while_the_model_edits_is_kept_and_committed_as_the_persons(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    user = root / "USER.md"
    report = dream_in_process(root, EditsWhileThinking(2, _append_line(user)))
    assert report.status == "ok"
    text = user.read_text(encoding="utf-8")
    assert HAND in text and "Maya" in text  # both: the person's line and the batch's fact
    subjects = _subjects(root)
    assert subjects[0].startswith("dream: 2..2") and subjects[1] == "memory: manual edits"
    assert HAND in git(root, "show", "HEAD~1", "--", "USER.md")  # the person's commit holds it
    assert HAND not in git(root, "show", "HEAD", "--", "USER.md")  # Dream's does not
    assert any("changed on disk while the batch ran" in n for b in report.batches for n in b.notes)
    assert git(root, "status", "--porcelain", "--", "USER.md") == ""


def test_a_line_added_before_the_batch_read_the_file_is_not_committed_as_dreams(tmp_path: Path) -> None:
    """Edited during the analysis call: the batch then reads the edited file, and its own commit
    would carry the person's line; `dream restore` of that commit would then remove it too."""
    root = _workspace(tmp_path)
    user = root / "USER.md"
    report = dream_in_process(root, EditsWhileThinking(1, _append_line(user)))
    assert report.status == "ok"
    assert HAND in user.read_text(encoding="utf-8")
    assert _subjects(root)[:2] == [_subjects(root)[0], "memory: manual edits"]
    assert HAND not in git(root, "show", "HEAD", "--", "USER.md")
    assert HAND in git(root, "show", "HEAD~1", "--", "USER.md")


def test_an_edit_of_the_same_lines_keeps_the_persons_text_and_the_batch_runs_again(tmp_path: Path) -> None:
    """The batch replaces a line (a "(was X)" fact) that the person rewrote meanwhile."""
    root = build_workspace(tmp_path / "ws", history=["- [durable] User's name is Anna."])
    assert dream_in_process(root).status == "ok"
    user = root / "USER.md"
    assert "- User's name is Anna." in user.read_text(encoding="utf-8")
    with (root / "memory" / "history.jsonl").open("a", encoding="utf-8") as history:
        history.write(
            '{"cursor": 2, "timestamp": "2026-04-03 00:03", "content": "- [durable] User\'s name is Maya (was Anna)."}\n'
        )

    def rewrite() -> None:
        text = user.read_text(encoding="utf-8")
        user.write_text(text.replace("- User's name is Anna.", "- User's name is Annie, as on her passport."))

    report = dream_in_process(root, EditsWhileThinking(2, rewrite))
    assert report.status == "failed"
    (batch,) = report.batches
    assert batch.outcome == "failed" and "changed on disk while the batch ran" in (batch.error or "")
    mine = user.read_text(encoding="utf-8")
    assert "Annie, as on her passport" in mine and "Maya" not in mine  # never written over
    assert _subjects(root)[0] == "memory: manual edits"
    assert git(root, "status", "--porcelain", "--", "USER.md") == ""
    assert (root / "memory" / ".dream_cursor").read_text().strip() == "1"  # the batch is still pending
    again = dream_in_process(root)
    assert again.status == "ok" and again.cursor_after == 2
    assert "Maya" in user.read_text(encoding="utf-8")
