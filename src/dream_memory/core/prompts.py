"""The messages Dream and the Consolidator send (CONTRACT section 8), built from values.

Section markers are constants because the offline engine reads the same prompts a remote model
gets: it finds the history, the facts and the files by these headings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dream_memory.core.chat import Message, ToolSpec
from dream_memory.core.facts import Fact
from dream_memory.core.history import HistoryEntry
from dream_memory.core.policy import ALLOWED_DESCRIPTION

HISTORY_MARKER = "## Conversation History"
MEMORY_MARKER = "## Current Memory"
FACTS_MARKER = "## Facts to Apply"
FILES_MARKER = "## Files"
CONSOLIDATION_MARKER = "## Conversation to Summarize"
ENTRY_PREFIX = "### Entry "
FILE_PREFIX = "### File: "
NOTHING = "(nothing)"

PHASE1_PROTOCOL = """\
## How to answer

Answer with one fact per line, each line starting with its tag:

[USER] a stable fact about the user
[SOUL] a change to the agent's own voice or manner
[MEMORY] a project fact, decision, solution or environment fact
[SKILL] skill-name: what the repeatable procedure is and when to use it
[ENTITY] entity-name: a fact about that project, system or person
[OBSERVATION] something noticed but not confirmed

A correction says what it replaces, e.g. "[USER] Timezone is CET (was PST)".
A request to forget something says what to remove, e.g. "[USER] Forget: the home address (was 12 Oak Lane)".
Write each fact so it stands alone. Answer [SKIP] alone when nothing is worth keeping.
No other text."""

PHASE2_SYSTEM = f"""\
You keep an AI agent's long-term memory files. Apply the facts you are given to the files with
the tools, making the smallest honest change.

Tools:
- read_file(path, section?): a file's text (for a large file, pass a heading as section).
- edit_file(path, old_text, new_text): replace old_text, which must occur exactly once in the file
  (quote it exactly, with enough lines to be unique). To create a file, use write_file.
- write_file(path, content): create a file that does not exist yet; it never overwrites.

Rules:
- Put each fact in the right file and under the right heading, as a "- " bullet line.
- Do not add a fact the file already holds. When a fact corrects or supersedes an older one,
  replace the old line instead of adding a new one.
- A fact starting "Forget:" asks for removal: delete the line it names (the "(was ...)" part
  quotes it) and add nothing.
- Keep the files' structure; never remove content the facts do not touch.
- Files you may read and change: {ALLOWED_DESCRIPTION}. Nothing else.
- [SKILL] facts: skills/<name>/SKILL.md starting with YAML frontmatter (name, description).
  Never set `always: true` unless a fact asks for it.
- [ENTITY] facts: entities/<name>.md, and a row in index.md's table (| Entity | File | Repos |);
  leave Repos empty unless the fact names an absolute path.
- [OBSERVATION] facts: append "- YYYY-MM-DD: fact" to observations.md.
- When every fact is applied, answer with one short sentence and no tool call."""


@dataclass(frozen=True)
class FileContext:
    path: str
    text: str | None  # None: the file does not exist yet
    shown: str  # what the model sees: the whole text, or outline plus relevant sections
    partial: bool = False
    unreadable: str | None = None  # why Dream cannot read it (then it must be left alone)


def render_entry(entry: HistoryEntry, part: tuple[int, int] | None = None, text: str | None = None) -> str:
    meta = [entry.timestamp] if entry.timestamp else []
    if entry.session_key:
        meta.append(f"session {entry.session_key}")
    if part is not None:
        meta.append(f"part {part[0]} of {part[1]}")
    head = f"{ENTRY_PREFIX}{entry.cursor}" + (f" ({', '.join(meta)})" if meta else "")
    return f"{head}\n{(entry.content if text is None else text).rstrip()}\n"


def render_file(ctx: FileContext) -> str:
    if ctx.unreadable is not None:
        return f"{FILE_PREFIX}{ctx.path}\n(cannot be read: {ctx.unreadable}; leave it alone)\n"
    if ctx.text is None:
        return f"{FILE_PREFIX}{ctx.path}\n(does not exist yet)\n"
    note = " (large file: outline and the relevant sections; read_file fetches any section)" if ctx.partial else ""
    return f"{FILE_PREFIX}{ctx.path}{note}\n````markdown\n{ctx.shown.rstrip()}\n````\n"


def phase1_messages(
    guide: str,
    files: Sequence[FileContext],
    history_blocks: Sequence[str],
    *,
    skills: Sequence[str] = (),
    entities: Sequence[str] = (),
) -> list[Message]:
    memory = [MEMORY_MARKER, ""] + [render_file(f) for f in files]
    if skills:
        memory += ["### Skills", *(f"- {s}" for s in skills), ""]
    if entities:
        memory += ["### Entities", *(f"- {e}" for e in entities), ""]
    user = "\n".join(memory) + "\n" + HISTORY_MARKER + "\n\n" + "\n".join(history_blocks)
    return [
        {"role": "system", "content": guide.rstrip() + "\n\n" + PHASE1_PROTOCOL},
        {"role": "user", "content": user},
    ]


def phase1_correction(reason: str) -> Message:
    return {
        "role": "user",
        "content": (
            f"Your answer could not be used: {reason}. Answer again with only tagged lines "
            "([USER], [SOUL], [MEMORY], [SKILL] name:, [ENTITY] name:, [OBSERVATION]) or [SKIP] alone."
        ),
    }


def phase2_messages(facts: Sequence[Fact], files: Sequence[FileContext], today: str) -> list[Message]:
    body = [FACTS_MARKER, "", *(f"- {fact.render()}" for fact in facts), "", FILES_MARKER, ""]
    body += [render_file(f) for f in files]
    body.append(f"Today is {today}.")
    return [{"role": "system", "content": PHASE2_SYSTEM}, {"role": "user", "content": "\n".join(body)}]


def dream_tools() -> list[ToolSpec]:
    path = {"type": "string", "description": "Path relative to the workspace, e.g. memory/MEMORY.md", "maxLength": 300}
    return [
        ToolSpec(
            "read_file",
            "Read a memory file. For a large file, pass section (a heading) to read only that section.",
            {
                "type": "object",
                "properties": {"path": path, "section": {"type": "string", "maxLength": 300}},
                "required": ["path"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(
            "edit_file",
            "Replace old_text, which must occur exactly once in the file, with new_text.",
            {
                "type": "object",
                "properties": {"path": path, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(
            "write_file",
            "Create a new memory file. Refused if the file exists: use edit_file for existing files.",
            {
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        ),
    ]


CONSOLIDATION_SYSTEM = """\
You compress the oldest part of a conversation between a user and an AI agent into durable notes
for the agent's history. Write atomic facts, one "- " bullet per line, most important first:
1. user corrections, 2. solutions (what finally worked), 3. decisions, 4. events, 5. environment facts.
Tag lasting facts [durable] and passing ones [ephemeral]. Keep names, paths and numbers exact.
Never copy passwords, API keys, tokens or private keys. If nothing is worth keeping, answer (nothing)."""


def consolidation_messages(transcript_lines: Sequence[str], *, part: tuple[int, int] | None = None) -> list[Message]:
    header = CONSOLIDATION_MARKER + (f" (part {part[0]} of {part[1]})" if part else "")
    return [
        {"role": "system", "content": CONSOLIDATION_SYSTEM},
        {"role": "user", "content": header + "\n\n" + "\n".join(transcript_lines)},
    ]
