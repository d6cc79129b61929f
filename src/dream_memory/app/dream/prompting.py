"""What the model is shown: the Dream guide, each memory file whole or as outline and relevant
sections, the batch's history in blocks that fit a prompt, and the skill and entity listings.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dream_memory.adapters import workspace
from dream_memory.adapters.rooted import Beneath, OutsideRoot
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.app.dream.options import DreamContext
from dream_memory.core import layout
from dream_memory.core.frontmatter import skill_description
from dream_memory.core.history import Batch
from dream_memory.core.markdown import outline
from dream_memory.core.parts import pack, split_text
from dream_memory.core.prompts import (
    FileContext,
    render_entry,
)
from dream_memory.core.search import relevant_sections, terms_query
from dream_memory.errors import EditRejected


def builtin_guide() -> str:
    return workspace.builtin_guide_text()


# nanobot caps a workspace prompt override at this many characters (WORKSPACE_PROMPT_MAX_CHARS),
# with the same marker: a guide that works for nanobot's Dream works the same here.
GUIDE_MAX_CHARS = 32_000
GUIDE_TRUNCATED = "\n... (truncated)"


_GUIDE_FOLDER = layout.DREAM_GUIDE.rpartition("/")[0] + "/"
# The most a guide of GUIDE_MAX_CHARS characters can take in UTF-8, plus one byte to see more.
_GUIDE_READ_BYTES = GUIDE_MAX_CHARS * 4 + 1


@dataclass(frozen=True)
class _Guide:
    text: str | None  # the workspace guide as read (at most _GUIDE_READ_BYTES), None: none usable
    problem: str | None  # why a guide that is there was not used
    size: str = ""  # "N characters" (or "more than N bytes"), said when it is cut


def _workspace_guide(root: Path) -> _Guide:
    """prompts/dream.md, read the way the read side reads the store: only a regular file inside
    the workspace (a symbolic link is followed only while it stays inside), opened without
    blocking, and only as much as the guide may use. Why: its text goes to the model, so a link
    committed in a cloned repository must not send a file from outside (a key file, say), and a
    pipe or a device in its place must not hang or fill the memory of a run."""
    rel = layout.DREAM_GUIDE
    try:
        with Beneath(root) as tree:
            found = tree.resolve(rel)
            if found is None:
                return _Guide(None, None)
            if not found[0].startswith(_GUIDE_FOLDER):
                # Inside the workspace is not enough: .git/config, history or another scope's
                # files are there too.
                return _Guide(
                    None, f"{rel} is a link to {found[0]}, outside {_GUIDE_FOLDER}; the built-in guide was used"
                )
            if not stat.S_ISREG(found[1].st_mode):
                return _Guide(None, f"{rel} is not a regular file; the built-in guide was used")
            head = tree.head(rel, _GUIDE_READ_BYTES)
    except OutsideRoot:
        return _Guide(None, f"{rel} leads outside the workspace (a symbolic link); the built-in guide was used")
    if head is None:
        return _Guide(None, None)
    data, size = head
    text = data.decode("utf-8", errors="replace").rstrip()
    if len(text) <= GUIDE_MAX_CHARS:
        return _Guide(text, None)
    return _Guide(text, None, f"{len(text)} characters" if size <= len(data) else f"more than {len(data)} bytes")


def guide_in_use(root: Path) -> tuple[str, str]:
    """(text, source): the workspace's prompts/dream.md when it has content, else the built-in
    guide. A workspace guide longer than GUIDE_MAX_CHARS is cut there (``guide_note`` says so)."""
    custom = _workspace_guide(root).text
    if custom is not None and custom.strip():
        if len(custom) > GUIDE_MAX_CHARS:
            return custom[:GUIDE_MAX_CHARS] + GUIDE_TRUNCATED, layout.DREAM_GUIDE
        return custom, layout.DREAM_GUIDE
    return builtin_guide(), "built-in"


def guide_note(root: Path) -> str | None:
    """Why the workspace guide is not sent whole, or not at all; None when it is (or there is none)."""
    guide = _workspace_guide(root)
    if guide.problem is not None:
        return guide.problem
    if not guide.size:
        return None
    return (
        f"{layout.DREAM_GUIDE} has {guide.size}; only the first {GUIDE_MAX_CHARS} characters are used "
        "(nanobot caps its Dream prompt the same way)"
    )


def file_context(
    ctx: DreamContext,
    staging: StagingWorkspace,
    path: str,
    query: Sequence[str],
    *,
    budget: int | None = None,
    left_out: list[str] | None = None,
) -> FileContext:
    """A file as the model sees it: whole, or (when over budget) outline plus relevant sections."""
    try:
        text = staging.read(path)
    except EditRejected as exc:  # not UTF-8, a folder, a symlink: shown as such, never read
        staging.unreadable[path] = exc.message
        return FileContext(path, None, "", unreadable=exc.message)
    if text is None:
        return FileContext(path, None, "")
    budget = ctx.options.file_context_tokens if budget is None else budget
    size = ctx.counter.count(text)
    if size <= budget:
        return FileContext(path, text, text)
    shape = outline(text)
    if ctx.counter.count(shape) > budget:
        # Not even the outline fits: the model is told the file exists and can read sections.
        if left_out is not None:
            left_out.append(f"{path}: left out ({size} tokens; not even its outline fits)")
        return FileContext(path, text, f"(left out: {size} tokens, too large for this prompt)", partial=True)
    parts = [f"Outline of {path}:", shape]
    shown = 0
    terms = terms_query(query)
    if terms is not None:  # no word to look for: the outline alone, read_file reaches the rest
        parts += ["", "Relevant sections:"]
        # The read side's ranking picks the sections; the budget decides how many fit.
        room = budget // 2
        for section in relevant_sections(text, terms):
            cost = ctx.counter.count(section.text)
            if cost <= room:
                parts.append(section.text.rstrip())
                room -= cost
                shown += 1
    if left_out is not None:
        left_out.append(f"{path}: outline and {shown} relevant section(s) of {size} tokens")
    return FileContext(path, text, "\n".join(parts), partial=True)


def history_blocks(ctx: DreamContext, batch: Batch, budget: int | None = None) -> list[list[str]]:
    """The batch as prompt blocks, one list per phase-1 call: entries grouped so each call's
    history fits ``budget``; an entry too large for one prompt is given in parts (never cut),
    each part in its own call."""
    limit = ctx.options.batch_tokens if budget is None else budget
    if batch.tokens <= limit:
        return [[render_entry(entry) for entry in batch.entries]]
    rendered = [render_entry(entry) for entry in batch.entries]
    entry_of = dict(zip(rendered, batch.entries, strict=True))

    def in_parts(text: str) -> list[str]:
        entry = entry_of[text]
        parts = split_text(entry.content, max(50, limit - 40), ctx.counter.count)
        return [render_entry(entry, (i, len(parts)), part) for i, part in enumerate(parts, start=1)]

    return pack(rendered, limit, ctx.counter.count, in_parts)


def skills_listing(root: Path) -> list[str]:
    # The description is read from the YAML frontmatter, as nanobot reads it.
    return [f"{name}: {skill_description(text) or '(no description)'}" for name, text in workspace.skill_files(root)]


def entities_listing(root: Path) -> list[str]:
    return workspace.entity_names(root)
