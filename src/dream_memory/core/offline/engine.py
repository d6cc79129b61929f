"""The built-in ``offline`` model: deterministic, no network, no LLM (the ChatModel port,
answered by the rules of ``core.offline.rules``; ``adapters/offline.py`` hands it to the wiring).

It reads the same prompts a remote model gets and answers in the same protocol: tagged lines in
phase 1, tool calls in phase 2 (through the same tool layer and its checks), bullet summaries
when consolidating. It keeps what history marks as lasting ([permanent], [durable],
[correction], "User prefers ...", decisions, solutions) and skips (nothing), [ephemeral], [skip]
and what memory already holds. It is how ``dream demo`` runs with no key, and how CI runs
Dream end to end; it is not a substitute for a model's judgement.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date

from dream_memory.core import layout, scopes
from dream_memory.core.bounded import split_lines
from dream_memory.core.chat import ChatReply, Message, ToolCall, ToolSpec, Usage
from dream_memory.core.dates import absolute_dates, entry_day
from dream_memory.core.edits import minimal_edit
from dream_memory.core.facts import Fact, in_scope, normalize, parse_facts
from dream_memory.core.markdown import split_sections
from dream_memory.core.offline.rules import classify, owner_of_superseded
from dream_memory.core.placement import (
    add_fact,
    entity_text,
    index_text,
    observation_text,
    section_for,
    skill_text,
)
from dream_memory.core.prompts import (
    CONSOLIDATION_MARKER,
    DIVIDER_MARK,
    ENTRY_PREFIX,
    FACTS_MARKER,
    FILE_PREFIX,
    FILES_MARKER,
    HISTORY_MARKER,
    INSTRUCTION_MARKER,
    MEMORY_MARKER,
    NOTHING,
    REPLACE_MARK,
    SCOPE_MARKER,
    SEARCH_MARK,
    numbered_facts,
)
from dream_memory.core.surrogates import replace_lone_surrogates
from dream_memory.core.write_policy import pinned_section_in
from dream_memory.errors import BadReply

NAME = "offline"


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


_TURN = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)?(?P<speaker>user|assistant|system|tool(?:\s*\([^)]*\))?)\s*:\s?(?P<rest>.*)$", re.I
)


# --- reading the prompts -------------------------------------------------------------------------


def _user_text(messages: Sequence[Message]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _after(text: str, marker: str) -> str:
    index = text.find(marker)
    return text[index + len(marker) :] if index >= 0 else ""


def _files_in(text: str) -> dict[str, str | None]:
    """FILE_PREFIX blocks -> the text shown (None: does not exist yet; partial views skipped)."""
    files: dict[str, str | None] = {}
    for block in text.split(FILE_PREFIX)[1:]:
        header, _, rest = block.partition("\n")
        path = header.split(" (")[0].strip()
        if rest.startswith("(does not exist yet)"):
            files[path] = None
            continue
        if "(large file" in header:
            continue
        match = re.match(r"````markdown\n(.*?)\n````", rest, re.DOTALL)
        if match:
            # An empty (or blank) file is shown as an empty block: "\n" is no text of it, and an
            # edit quoting it was refused (the fact was dropped, the batch still committed).
            files[path] = match.group(1) + "\n" if match.group(1).strip() else ""
    return files


_SHOWN_SECTIONS = "\nRelevant sections:\n"


def _partial_views(text: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """A large file's view in the prompt -> (its outline's section titles, the sections shown
    whole): what read_file would return, so the engine edits them without reading them again
    (each read_file call is completion tokens). The shown sections are the file's own sections
    (the same flat split), right-stripped; a title shown twice is left to read_file."""
    views: dict[str, tuple[list[str], dict[str, str]]] = {}
    for block in text.split(FILE_PREFIX)[1:]:
        header, _, rest = block.partition("\n")
        if "(large file" not in header:
            continue
        match = re.match(r"````markdown\n(.*?)\n````", rest, re.DOTALL)
        if not match or _SHOWN_SECTIONS not in match.group(1):
            continue
        shape, _, shown = match.group(1).partition(_SHOWN_SECTIONS)
        titles = [m["title"] for line in split_lines(shape) if (m := _OUTLINE_ROW.match(line))]
        parsed = [s for s in split_sections(shown + "\n") if s.title]
        counts: dict[str, int] = {}
        for section in parsed:
            counts[section.title.casefold()] = counts.get(section.title.casefold(), 0) + 1
        sections = {s.title: s.text for s in parsed if counts[s.title.casefold()] == 1}
        views[header.split(" (")[0].strip()] = ([t for t in titles if t != "(preamble)"], sections)
    return views


def _entries_in(text: str) -> list[tuple[int | None, date | None, str]]:
    """(cursor, day, content) of each ``### Entry N (timestamp, ...)`` block of the history."""
    history = _after(text, HISTORY_MARKER)
    found: list[tuple[int | None, date | None, str]] = []
    for block in history.split(ENTRY_PREFIX)[1:]:
        header, _, content = block.partition("\n")
        number = re.match(r"\d+", header)
        meta = re.search(r"\((.*)\)\s*$", header)
        day = entry_day(meta.group(1)) if meta else None
        found.append((int(number.group()) if number else None, day, content))
    return found


def _made_edits(messages: Sequence[Message]) -> bool:
    return any(
        call.get("function", {}).get("name") in ("edit_file", "write_file")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    )


def _refiled(messages: Sequence[Message], facts: Sequence[tuple[int, Fact]], prompt: str) -> list[ToolCall]:
    """The edits refused in the last round because they touched a pinned section, made again
    with each fact under the next fitting section that is not pinned (what the tool error asks
    a model to do). Only whole files shown in the prompt, and only while new pins turn up, so
    this ends."""
    calls: dict[str, dict[str, object]] = {}
    last: list[str] = []
    for message in messages:
        if message.get("role") == "assistant":
            last = []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                calls[str(call.get("id", ""))] = json.loads(function.get("arguments") or "{}")
                last.append(str(call.get("id", "")))
    pins: dict[str, set[str]] = {}
    fresh: dict[str, set[int]] = {}  # path -> the facts of its edit refused in the last round
    for message in messages:
        found = pinned_section_in(str(message.get("content") or "")) if message.get("role") == "tool" else None
        if not found:
            continue
        path, title = found
        cited = calls.get(str(message.get("tool_call_id")), {}).get("facts")
        if str(message.get("tool_call_id")) in last and title not in pins.get(path, set()) and isinstance(cited, list):
            fresh.setdefault(path, set()).update(n for n in cited if isinstance(n, int))
        pins.setdefault(path, set()).add(title)
    known = _files_in(_after(prompt, FILES_MARKER))
    redo: list[ToolCall] = []
    for path, numbers in fresh.items():
        text = known.get(path)
        if text is None:
            continue
        new = text
        for number, fact in facts:
            if number in numbers and fact.target == path and fact.tag not in ("SKILL", "ENTITY", "OBSERVATION"):
                new = add_fact(new, path, fact.text, avoid=pins[path])
        if new != text:
            old_text, new_text = minimal_edit(text, new)
            redo.append(_call("edit_file", path=path, old_text=old_text, new_text=new_text, facts=sorted(numbers)))
    return redo


_OUTLINE_ROW = re.compile(r"^\s*- (?P<title>.*) \(lines \d+-\d+, \d+ lines\)$")


@dataclass
class _ReadResults:
    """What earlier read_file calls in this conversation returned."""

    asked: set[str]
    full: dict[str, str | None]  # path -> whole text (None: does not exist)
    outlines: dict[str, list[str]]  # path -> its section titles, for files too large to read whole
    sections: dict[tuple[str, str], str | None]  # (path, title) -> section text (None: no such section)

    @classmethod
    def collect(cls, messages: Sequence[Message]) -> _ReadResults:
        calls: dict[str, dict[str, str]] = {}
        for message in messages:
            if message.get("role") != "assistant":
                continue
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                if function.get("name") == "read_file":
                    calls[str(call.get("id", ""))] = json.loads(function.get("arguments") or "{}")
        found = cls(set(), {}, {}, {})
        for message in messages:
            args = calls.get(str(message.get("tool_call_id"))) if message.get("role") == "tool" else None
            if not args or not args.get("path"):
                continue
            path, section = args["path"], args.get("section")
            content = str(message.get("content") or "")
            found.asked.add(path)
            failed = content.startswith("Error:")
            if section:
                found.sections[(path, section)] = None if failed else content
            elif failed:
                if "does not exist" in content:
                    found.full[path] = None
            elif "is large; here is its outline" in content:
                titles = [m["title"] for line in split_lines(content) if (m := _OUTLINE_ROW.match(line))]
                found.outlines[path] = [t for t in titles if t != "(preamble)"]
            else:
                found.full[path] = content
        return found

    def add_shown(self, views: dict[str, tuple[list[str], dict[str, str]]]) -> None:
        """What the prompt already shows of large files, as if read (a read result wins)."""
        for path, (titles, shown) in views.items():
            self.outlines.setdefault(path, titles)
            for title, text in shown.items():
                self.sections.setdefault((path, title), text)


class OfflineModel:
    """The ChatModel port, answered by rules."""

    @property
    def name(self) -> str:
        return NAME

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        prompt = _user_text(messages)
        if CONSOLIDATION_MARKER not in prompt:
            # Memory files are UTF-8: half an emoji (a lone surrogate) kept in history made every
            # edit quoting it refused, the batch failed on every run. A remote model is sent
            # U+FFFD for it (adapters/llm.py); so is this one. A summary keeps it, escaped.
            prompt = replace_lone_surrogates(prompt)
        if tools:
            reply = self._phase2(messages, prompt)
        elif CONSOLIDATION_MARKER in prompt:
            reply = self._consolidate(prompt)
        elif FACTS_MARKER in prompt:
            reply = self._phase2_text(messages, prompt)
        elif HISTORY_MARKER in prompt:
            reply = self._phase1(prompt)
        else:
            raise BadReply("the offline engine only answers dream-memory's own prompts")
        prompt_tokens = sum(_estimate(str(m.get("content") or "")) for m in messages)
        completion = _estimate(reply.content or "") + sum(_estimate(c.arguments) for c in reply.tool_calls)
        return ChatReply(
            content=reply.content,
            tool_calls=reply.tool_calls,
            finish_reason="tool_calls" if reply.tool_calls else "stop",
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion, cost_usd=0.0, calls=1),
        )

    # --- phase 1 ---------------------------------------------------------------------------------

    def _phase1(self, prompt: str) -> ChatReply:
        memory = _files_in(_after(prompt, MEMORY_MARKER).split(HISTORY_MARKER)[0])
        known = {normalize(line) for text in memory.values() if text for line in split_lines(text)}
        lines: list[str] = []
        cited: list[list[int]] = []  # per line: every entry the fact was read in (it cites them all)
        seen: dict[str, int] = {}
        emitted: list[tuple[str, str]] = []
        for cursor, day, entry in _entries_in(prompt):
            for raw in split_lines(entry):
                item = classify(raw)
                if item is None:
                    continue
                if day is not None:  # the protocol asks for calendar dates, counted from the entry's
                    item = replace(item, text=absolute_dates(item.text, day))
                key = normalize(item.text)
                if key in seen:
                    if cursor is not None and cursor not in cited[seen[key]]:
                        cited[seen[key]].append(cursor)
                    continue
                if f"{normalize('- ')}{key}".strip() in known or key in known:
                    continue
                seen[key] = len(lines)
                tag = owner_of_superseded(item, memory, emitted) or item.tag
                emitted.append((tag, item.text))
                lines.append(f"[{tag}] {item.name}: {item.text}" if item.name else f"[{tag}] {item.text}")
                cited.append([cursor] if cursor is not None else [])
        answer = [
            line + (f" [from {', '.join(map(str, c))}]" if c else "") for line, c in zip(lines, cited, strict=True)
        ]
        return ChatReply(content="\n".join(answer) if answer else "[SKIP]")

    # --- phase 2 ---------------------------------------------------------------------------------

    def _phase2(self, messages: Sequence[Message], prompt: str) -> ChatReply:
        facts = _numbered(prompt)
        if _made_edits(messages) and facts:
            retry = _refiled(messages, facts, prompt)
            if retry:
                return ChatReply(content=None, tool_calls=tuple(retry))
        if _made_edits(messages) or not facts:
            return ChatReply(content=f"Applied {len(facts)} fact(s).")
        reads = _ReadResults.collect(messages)
        reads.add_shown(_partial_views(_after(prompt, FILES_MARKER)))
        known: dict[str, str | None] = {**_files_in(_after(prompt, FILES_MARKER)), **reads.full}
        targets = list(dict.fromkeys(f.target for _, f in facts))
        if any(f.tag == "ENTITY" for _, f in facts):
            targets.append(layout.INDEX)
        wanted: list[ToolCall] = []
        for path in targets:
            if path in known:
                continue
            if path in reads.outlines:
                titles = {section_for(path, f.text) for _, f in facts if f.target == path}
                if reads.outlines[path] and not titles <= set(reads.outlines[path]):
                    # a fact whose section is missing goes after the last one, which must be read
                    titles.add(reads.outlines[path][-1])
                wanted += [
                    _call("read_file", path=path, section=t) for t in sorted(titles) if (path, t) not in reads.sections
                ]
            elif path not in reads.asked:
                wanted.append(_call("read_file", path=path))
        if wanted:
            return ChatReply(content=None, tool_calls=tuple(wanted))
        today = re.search(r"Today is (\d{4}-\d{2}-\d{2})", prompt)
        calls = self._edits_for_whole_files(facts, known, today.group(1) if today else "today")
        calls += self._edits_for_sections(facts, reads)
        if not calls:
            return ChatReply(content="Nothing to change: the files already hold these facts.")
        return ChatReply(content=None, tool_calls=tuple(calls))

    def _phase2_text(self, messages: Sequence[Message], prompt: str) -> ChatReply:
        """Phase 2 in the text protocol: the same edits, written as SEARCH/REPLACE blocks (only
        for files shown whole: there is no read_file to fetch a section)."""
        if any(m.get("role") == "assistant" and SEARCH_MARK in str(m.get("content") or "") for m in messages):
            return ChatReply(content="DONE")
        facts = _numbered(prompt)
        known = _files_in(_after(prompt, FILES_MARKER))
        today = re.search(r"Today is (\d{4}-\d{2}-\d{2})", prompt)
        blocks = []
        for call in self._edits_for_whole_files(facts, known, today.group(1) if today else "today"):
            args = json.loads(call.arguments)
            search = _with_eol(args.get("old_text", ""))
            replace = _with_eol(args.get("new_text", args.get("content", "")))
            blocks.append(f"{args['path']}\n{SEARCH_MARK}\n{search}{DIVIDER_MARK}\n{replace}{REPLACE_MARK}")
        return ChatReply(content="\n\n".join(blocks) if blocks else "DONE")

    @staticmethod
    def _edits_for_whole_files(
        facts: Sequence[tuple[int, Fact]], known: dict[str, str | None], date: str
    ) -> list[ToolCall]:
        after = dict(known)
        applied: dict[str, list[int]] = {}  # path -> the numbers of the facts that changed it
        for number, fact in facts:
            if fact.target not in after:
                continue  # a large file: handled section by section
            before = dict(after)
            _apply_fact(fact, after, date)
            for path, text in after.items():
                if text != before.get(path):
                    applied.setdefault(path, []).append(number)
        calls: list[ToolCall] = []
        for path in sorted(after):
            old, new = known.get(path), after[path]
            if new is None or new == old:
                continue
            cited = applied.get(path, [])
            if old is None:
                calls.append(_call("write_file", path=path, content=new, facts=cited))
            else:
                old_text, new_text = minimal_edit(old, new)
                calls.append(_call("edit_file", path=path, old_text=old_text, new_text=new_text, facts=cited))
        return calls

    @staticmethod
    def _edits_for_sections(facts: Sequence[tuple[int, Fact]], reads: _ReadResults) -> list[ToolCall]:
        """Facts for large files, filed by editing only the sections that were read."""
        staged: dict[tuple[str, str], str] = {}
        applied: dict[tuple[str, str], list[int]] = {}
        for number, fact in facts:
            path = fact.target
            if path not in reads.outlines:
                continue
            title = section_for(path, fact.text)
            key = (path, title)
            if reads.sections.get(key) is not None:
                staged[key] = add_fact(staged.get(key, reads.sections[key] or ""), path, fact.text)
                applied.setdefault(key, []).append(number)
                continue
            last = (path, reads.outlines[path][-1]) if reads.outlines[path] else None
            if last is None or reads.sections.get(last) is None:
                continue
            base = staged.get(last, reads.sections[last] or "")
            staged[last] = add_fact(base, path, fact.text)  # appends the missing heading after it
            applied.setdefault(last, []).append(number)
        calls = []
        for (path, title), new in sorted(staged.items()):
            old = reads.sections[(path, title)] or ""
            if new != old:
                cited = applied.get((path, title), [])
                calls.append(_call("edit_file", path=path, old_text=old, new_text=new, facts=cited))
        return calls

    # --- consolidation ---------------------------------------------------------------------------

    def _consolidate(self, prompt: str) -> ChatReply:
        body = _after(prompt, CONSOLIDATION_MARKER).partition("\n")[2].split(INSTRUCTION_MARKER)[0]
        kept: list[str] = []
        seen: set[str] = set()
        speaker = ""
        for raw in split_lines(body):
            turn = _TURN.match(raw)
            if turn:
                speaker = turn["speaker"].casefold()
                line = turn["rest"]
                if line.startswith("(tool call)"):
                    speaker = "tool call"
            else:
                line = raw  # a continuation line of the same message
            # Tool calls and tool results are machine output: a keyword inside them is not a fact.
            if speaker.startswith("tool"):
                continue
            item = classify(line)
            if item is None or item.tag == "OBSERVATION":
                continue
            key = normalize(item.text)
            if key in seen:
                continue
            seen.add(key)
            kept.append(f"- [durable] {item.text}")
        return ChatReply(content="\n".join(kept) if kept else NOTHING)


def _apply_fact(fact: Fact, after: dict[str, str | None], date: str) -> None:
    """One fact filed into the whole files ``after`` holds (its target, and index.md for an entity)."""
    path = fact.target
    current = after[path]
    if fact.tag == "SKILL":
        after[path] = skill_text(fact.name or "skill", fact.text, current)
    elif fact.tag == "ENTITY":
        after[path] = entity_text(fact.name or "entity", fact.text, current)
        if layout.INDEX in after:
            after[layout.INDEX] = index_text(after[layout.INDEX], fact.name or "entity", path, fact.text)
    elif fact.tag == "OBSERVATION":
        after[path] = observation_text(current, fact.text, date)
    elif current is not None or scopes.is_private_file(path):
        after[path] = add_fact(scopes.new_file_text(path) if current is None else current, path, fact.text)


def _scope_of(prompt: str) -> str:
    """The batch's scope, as the prompt names it (``## Scope: user:alice``); shared without one."""
    match = re.search(rf"^{re.escape(SCOPE_MARKER)}(\S+)\s*$", prompt, re.MULTILINE)
    return match.group(1) if match else scopes.SHARED


def _numbered(prompt: str) -> list[tuple[int, Fact]]:
    """The facts of phase 2's prompt with their numbers (numbered by place when unnumbered),
    each in the batch's scope, so a private batch's facts go to that scope's files."""
    block = _after(prompt, FACTS_MARKER).split(FILES_MARKER)[0]
    if not block.strip():
        return []
    numbered = numbered_facts(block) or list(enumerate(parse_facts(block).facts, start=1))
    scope = _scope_of(prompt)
    return [(number, in_scope(fact, scope)) for number, fact in numbered]


def _with_eol(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


_call_ids = itertools.count(1)


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"offline-{next(_call_ids)}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))
