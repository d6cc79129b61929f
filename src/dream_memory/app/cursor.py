"""The ``.dream_cursor`` Dream trusts (core/cursor_truth.py): read the file and HEAD's copy, judge.

One function, called once per Dream run (app/dream.py), by ``dream status`` and by the context
block, so every reader agrees on which entries are still pending.
"""

from __future__ import annotations

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core import layout
from dream_memory.core.cursor_truth import CursorCheck, judge_cursor
from dream_memory.core.history import parse_cursor_text


def committed_dream_cursor(git: GitStore) -> int | None:
    """memory/.dream_cursor as HEAD holds it; None when HEAD has none (or nothing readable)."""
    head = git.head()
    if head is None:
        return None
    data = git.read_at(head, layout.DREAM_CURSOR)
    return None if data is None else parse_cursor_text(data.decode("utf-8", errors="replace"))


def dream_cursor_check(history: HistoryLog, git: GitStore | None, *, follow_external: bool = False) -> CursorCheck:
    """Which cursor Dream uses, and why (see core/cursor_truth.py)."""
    on_disk = history.read_dream_cursor()
    if git is None:
        return judge_cursor(on_disk, None, versioned=False)
    return judge_cursor(on_disk, committed_dream_cursor(git), versioned=True, follow_external=follow_external)
