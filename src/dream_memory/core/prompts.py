"""The messages Dream and the Consolidator send (docs/reference/llm-protocol.md), built from values.

Section markers are constants because the offline engine reads the same prompts a remote model
gets: it finds the history, the facts and the files by these headings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dream_memory.core import scopes
from dream_memory.core.bounded import split_lines
from dream_memory.core.chat import Message, ToolSpec
from dream_memory.core.dates import entry_day, weekday_name
from dream_memory.core.facts import Fact, parse_facts
from dream_memory.core.history import HistoryEntry
from dream_memory.core.policy import ALLOWED_DESCRIPTION

HISTORY_MARKER = "## Conversation History"
MEMORY_MARKER = "## Current Memory"
FACTS_MARKER = "## Facts to Apply"
FILES_MARKER = "## Files"
CONSOLIDATION_MARKER = "## Conversation to Summarize"
INSTRUCTION_MARKER = "## Your Task"
TARGET_PREFIX = "### For "
SEARCH_MARK = "<<<<<<< SEARCH"
DIVIDER_MARK = "======="
REPLACE_MARK = ">>>>>>> REPLACE"
SCOPE_MARKER = "## Scope: "
ENTRY_PREFIX = "### Entry "
FILE_PREFIX = "### File: "
NOTHING = "(nothing)"

# Example facts the protocol shows. A reply that copies one back learnt nothing: core.facts
# refuses such lines (PHASE1_EXAMPLES), as a small model was seen storing them as facts.
# Chosen to collide with nothing a user is likely to say: Qwen2.5-Coder-1.5B answered a history
# saying "timezone is CET" with the old example "Timezone is CET (was PST)", inventing the PST.
_EXAMPLE_CORRECTION = "Indents with tabs (was two spaces)"
_EXAMPLE_FORGET = "Forget: the old phone number (was 555-0100)"
# The worked example is about something no agent's history is likely to discuss: a weak model
# blends the example's words into real facts (Qwen turned "ledger-api stores balances in
# PostgreSQL 16" into "The billing service deploys with PostgreSQL 16" after a billing example).
_WORKED_FACTS = (
    "Is vegetarian since March",
    "The allotment's tomatoes are watered every second morning",
    "Bakes sourdough on Sundays (was Saturdays)",
)

PHASE1_PROTOCOL = f"""\
## How to answer

Answer with one fact per line, each line starting with its tag:

[USER] a stable fact about the user
[SOUL] a change to the agent's own voice or manner
[MEMORY] a project fact, decision, solution or environment fact
[SKILL] <skill name>: what the repeatable procedure is and when to use it
[ENTITY] <entity name>: a fact about that project, system or person
[OBSERVATION] something noticed but not confirmed

End each fact with the numbers of the history entries it comes from ("### Entry N"), as
[from N] or [from N, M].
A correction says what it replaces, e.g. "[USER] {_EXAMPLE_CORRECTION} [from 7]".
A request to forget something says what to remove, e.g. "[USER] {_EXAMPLE_FORGET} [from 8]".
Write dates as calendar dates (YYYY-MM-DD), counted from the date of the entry that says them:
never "tomorrow", "next week" or "in 3 days".
Write each fact so it stands alone, from the conversation only: never copy these examples.
Answer [SKIP] alone, on one line, when nothing is worth keeping.
No other text.

Worked example. For this history:
    {ENTRY_PREFIX}41
    user: hi! just so you know, I've been vegetarian since March
    {ENTRY_PREFIX}42
    user: we water the allotment's tomatoes every second morning now
    user: what's the weather like?
    {ENTRY_PREFIX}43
    user: I moved my sourdough baking from Saturdays to Sundays
the answer is:
[USER] {_WORKED_FACTS[0]} [from 41]
[MEMORY] {_WORKED_FACTS[1]} [from 42]
[USER] {_WORKED_FACTS[2]} [from 43]"""

PHASE1_EXAMPLES = (
    _EXAMPLE_CORRECTION,
    _EXAMPLE_FORGET,
    *_WORKED_FACTS,
    "a stable fact about the user",
    "a change to the agent's own voice or manner",
    "a project fact, decision, solution or environment fact",
    "what the repeatable procedure is and when to use it",
    "a fact about that project, system or person",
    "something noticed but not confirmed",
)

PHASE2_SYSTEM = f"""\
You keep an AI agent's long-term memory files. Apply the facts you are given to the files with
the tools, making the smallest honest change.

Tools:
- read_file(path, section?): a file's text (for a large file, pass a heading as section).
- edit_file(path, old_text, new_text, facts): replace old_text, which must occur exactly once in
  the file (quote it exactly, with enough lines to be unique). To create a file, use write_file.
- write_file(path, content, facts): create a file that does not exist yet; it never overwrites.
- facts: the numbers of the facts (as listed below) that the edit applies, e.g. [1, 3].

Rules:
- Put each fact in the right file and under the right heading, as a "- " bullet line.
- Do not add a fact the file already holds. When a fact corrects or supersedes an older one,
  replace the old line instead of adding a new one.
- A fact starting "Forget:" asks for removal: delete the line it names (the "(was ...)" part
  quotes it) and add nothing.
- Keep the files' structure; never remove content the facts do not touch.
- Each fact is listed under the file it goes to: edit only those files. Files you may read:
  {ALLOWED_DESCRIPTION}.
- [SKILL] facts: skills/<name>/SKILL.md starting with YAML frontmatter (name, description).
  Never set `always: true` unless a fact asks for it.
- [ENTITY] facts: entities/<name>.md, and a row in index.md's table (| Entity | File | Repos |);
  leave Repos empty unless the fact names an absolute path.
- [OBSERVATION] facts: append "- YYYY-MM-DD: fact" to observations.md.
- When every fact is applied, answer with one short sentence and no tool call."""


# Added to phase 2's rules when ``agents.defaults.dream.datedTrail`` is on; the offline engine
# and the rules protocol keep the trail because the fact carries it (core.placement).
TRAIL_RULE = """\
- Dated trail: a fact ending "(was X until YYYY-MM-DD)" replaces the line holding X, and the new
  line keeps that part at its end. When the replaced line has its own "(was ... until ...)",
  join them, newest first, at most three: "(was X until 2026-04-03; Y until 2025-01-10)"."""


def with_trail_rule(system: str) -> str:
    """A phase-2 system prompt with the dated-trail rule, placed right after the rules it refines
    (before the line about finishing)."""
    head, sep, tail = system.rpartition("\n- ")
    return f"{head}\n{TRAIL_RULE}{sep}{tail}" if sep else f"{system}\n{TRAIL_RULE}"


def scope_section(scope: str | None, *, editing: bool = False) -> list[str]:
    """The lines that tell the model which scope a batch is and where its facts go (none when
    the workspace has no scope rules: the prompt is then exactly as it always was)."""
    if scope is None:
        return []
    if scope == scopes.SHARED:
        return [
            f"{SCOPE_MARKER}{scope}",
            "",
            "These entries come from shared conversations: their facts go to the shared files. "
            f"Nothing below {scopes.SCOPES_DIR}/ (the private scopes' files) is yours to read or write.",
            "",
        ]
    user, memory = scopes.scope_files(scope)
    lines = [
        f"{SCOPE_MARKER}{scope}",
        "",
        f"These entries are private to scope {scope}: only its own sessions may ever read what is "
        f"kept from them. Their facts go to {user} ([USER] and [SOUL] facts) and {memory} (every "
        "other tag), never to a shared file (SOUL.md, USER.md, memory/MEMORY.md, entities/, skills/, "
        "sections/, index.md, observations.md). The shared files are shown for context: do not "
        "repeat what they already hold.",
    ]
    if editing:
        lines.append(f"Edit only {user} and {memory}: an edit of any other file is refused.")
    return [*lines, ""]


def with_scope_rule(system: str, scope: str | None) -> str:
    """A phase-2 system prompt with the rule of a private batch's scope (unchanged otherwise)."""
    if scope is None or scope == scopes.SHARED:
        return system
    user, memory = scopes.scope_files(scope)
    rule = (
        f"- Scope {scope}: these facts are private. Write them only to {user} and {memory} (create "
        "a missing one with write_file); you may read the shared files and these two, nothing else "
        f"below {scopes.SCOPES_DIR}/."
    )
    head, sep, tail = system.rpartition("\n- ")
    return f"{head}\n{rule}{sep}{tail}" if sep else f"{system}\n{rule}"


@dataclass(frozen=True)
class FileContext:
    path: str
    text: str | None  # None: the file does not exist yet
    shown: str  # what the model sees: the whole text, or outline plus relevant sections
    partial: bool = False
    unreadable: str | None = None  # why Dream cannot read it (then it must be left alone)


def render_entry(entry: HistoryEntry, part: tuple[int, int] | None = None, text: str | None = None) -> str:
    meta = [entry.timestamp] if entry.timestamp else []
    day = entry_day(entry.timestamp)
    if day is not None:
        meta.append(weekday_name(day))  # "next Friday" needs the entry's weekday, which small models miscount
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
    scope: str | None = None,
) -> list[Message]:
    memory = [*scope_section(scope), MEMORY_MARKER, ""] + [render_file(f) for f in files]
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


def render_facts(facts: Sequence[Fact]) -> list[str]:
    """The facts grouped under the file each one goes to (``### For USER.md``), each numbered by
    its place in ``facts`` (``3. [USER] ...``): the number the edit tools' ``facts`` argument
    names.

    The headings carry no tag, so ``parse_facts`` reads the block back unchanged (without the
    numbers; ``numbered_facts`` keeps them)."""
    lines: list[str] = []
    for target in dict.fromkeys(f.target for f in facts):
        lines.append(f"{TARGET_PREFIX}{target}")
        lines += [f"{i}. {f.render()}" for i, f in enumerate(facts, start=1) if f.target == target]
        lines.append("")
    return lines


_NUMBERED = re.compile(r"^\s*(?P<number>\d{1,4})[.)]\s+(?P<rest>\[.*)$")


def numbered_facts(block: str) -> list[tuple[int, Fact]]:
    """The facts of a ``render_facts`` block with their numbers, in the block's order."""
    found: list[tuple[int, Fact]] = []
    for line in split_lines(block):
        match = _NUMBERED.match(line)
        if match is None:
            continue
        parsed = parse_facts(match["rest"]).facts
        found += [(int(match["number"]), fact) for fact in parsed[:1]]
    return found


def phase2_messages(
    facts: Sequence[Fact],
    files: Sequence[FileContext],
    today: str,
    *,
    system: str | None = None,
    scope: str | None = None,
) -> list[Message]:
    body = [*scope_section(scope, editing=True), FACTS_MARKER, "", *render_facts(facts), FILES_MARKER, ""]
    body += [render_file(f) for f in files]
    body.append(f"Today is {today}.")
    return [{"role": "system", "content": system or PHASE2_SYSTEM}, {"role": "user", "content": "\n".join(body)}]


# The block the text protocol shows. Qwen2.5-Coder-1.5B copied an earlier, plausible example
# ("- Prefers short answers") into USER.md instead of its facts: the example is now visibly a
# placeholder, and a block adding it is refused (run_text_loop's ``refuse``).
TEXT_EXAMPLE_LINE = "- <the fact, as one bullet line>"

PHASE2_TEXT_SYSTEM = f"""\
You keep an AI agent's long-term memory files. Apply the facts you are given to the files,
making the smallest honest change. You have no tools: write each change as a SEARCH/REPLACE
block, exactly like this:

USER.md
{SEARCH_MARK}
## Preferences
{DIVIDER_MARK}
## Preferences

{TEXT_EXAMPLE_LINE}
{REPLACE_MARK}

Rules:
- The file's path alone on the line before the block. Edit only the files the facts are listed
  under.
- SEARCH quotes lines of the file exactly, enough of them to match exactly once; REPLACE is what
  they become. An empty SEARCH creates a file that does not exist yet.
- Put each fact under the right heading as a "- " bullet line. Do not add a fact the file
  already holds; when a fact corrects an older one, replace the old line.
- A fact starting "Forget:" asks for removal: replace the line it names with nothing.
- Keep the files' structure; never remove content the facts do not touch.
- [SKILL] facts: skills/<name>/SKILL.md starting with YAML frontmatter (name, description).
- [ENTITY] facts: entities/<name>.md, and a row in index.md's table (| Entity | File | Repos |).
- [OBSERVATION] facts: add "- YYYY-MM-DD: fact" to observations.md.
- You will be told which blocks failed and why; send corrected blocks for those only. When
  every fact is applied, answer DONE and nothing else."""


def dream_tools() -> list[ToolSpec]:
    path = {"type": "string", "description": "Path relative to the workspace, e.g. memory/MEMORY.md", "maxLength": 300}
    facts = {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 100,
        "description": "The numbers of the facts this edit applies, as the facts are listed (optional).",
    }
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
                "properties": {
                    "path": path,
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                    "facts": facts,
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(
            "write_file",
            "Create a new memory file. Refused if the file exists: use edit_file for existing files.",
            {
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}, "facts": facts},
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


# Repeated after the transcript: a small model reads the last lines most, and without this it
# answered the conversation's last question instead of summarizing it.
CONSOLIDATION_REMINDER = (
    'Summarize the conversation above as "- " bullet lines of durable notes, as the system message '
    "says. Do not answer or continue the conversation. If nothing is worth keeping, answer (nothing)."
)


def consolidation_messages(transcript_lines: Sequence[str], *, part: tuple[int, int] | None = None) -> list[Message]:
    header = CONSOLIDATION_MARKER + (f" (part {part[0]} of {part[1]})" if part else "")
    tail = f"\n\n{INSTRUCTION_MARKER}\n\n{CONSOLIDATION_REMINDER}"
    return [
        {"role": "system", "content": CONSOLIDATION_SYSTEM},
        {"role": "user", "content": header + "\n\n" + "\n".join(transcript_lines) + tail},
    ]


_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+\S")


def summary_problem(text: str) -> str | None:
    """Why a consolidation reply is not a summary of its slice, or None when it is one.

    A summary is a list of notes ("- " bullets; numbered items are tolerated) or "(nothing)".
    Prose with no list item is a model answering or continuing the conversation: the slice would
    be archived as the model's chat reply instead of what was said.
    """
    stripped = text.strip()
    if not stripped or stripped.strip("()").casefold() in ("nothing", "none"):
        return None
    if any(_LIST_ITEM.match(line) for line in split_lines(stripped)):
        return None
    first = split_lines(stripped)[0][:80]
    return (
        f"the reply is not a list of notes (it starts {first!r}): it answers the conversation instead of summarizing it"
    )
