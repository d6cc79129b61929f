"""Reading what real small models answer: tool calls written as text, loose JSON arguments,
phase-1 replies in shapes that are not facts, edits that quote the file almost exactly, and
SEARCH/REPLACE blocks. Each case is a reply shape measured from Qwen2.5-Coder-1.5B or
SmolLM2-135M behind llama-cpp-python (issue 23)."""

from __future__ import annotations

import json

import pytest

from dream_memory.core.chat import ToolCall
from dream_memory.core.dialects import read_text_calls
from dream_memory.core.edits import apply_edit, parse_edit_blocks
from dream_memory.core.facts import parse_facts
from dream_memory.core.prompts import PHASE1_EXAMPLES, summary_problem
from dream_memory.errors import BadReply, EditRejected

TOOLS = ("read_file", "edit_file", "write_file")


def test_hermes_tool_call_blocks_are_read_as_calls() -> None:
    """Qwen's own template returns calls as <tool_call> blocks (even without the closing tag)."""
    text = (
        "I'll add it.\n<tool_call>\n"
        '{"name": "edit_file", "arguments": {"path": "USER.md", "old_text": "## Preferences\\n", '
        '"new_text": "## Preferences\\n\\n- Dark mode\\n"}}\n</tool_call>\n'
        '<tool_call>{"name": "read_file", "arguments": {"path": "SOUL.md"}}'
    )
    found = read_text_calls(text, TOOLS)
    assert found.dialect == "hermes"
    assert [c.name for c in found.calls] == ["edit_file", "read_file"]
    assert found.calls[0].parsed_arguments()["new_text"] == "## Preferences\n\n- Dark mode\n"


def test_functions_prefix_calls_are_read_and_a_bare_prefix_is_no_call() -> None:
    """`functions.write_file: {...}` is a call; `functions.write_file:` alone (what
    chatml-function-calling returned with tool_choice auto) carries nothing to run."""
    text = 'functions.write_file: {"path": "entities/ledger.md", "content": "# Ledger\n\n- Runs nightly\n"}'
    found = read_text_calls(text, TOOLS)
    assert found.dialect == "functions"
    assert found.calls[0].parsed_arguments() == {
        "path": "entities/ledger.md",
        "content": "# Ledger\n\n- Runs nightly\n",
    }
    assert read_text_calls("functions.write_file:", TOOLS).calls == ()


def test_fenced_and_bare_json_calls_name_an_offered_tool() -> None:
    """A fenced JSON call, or a bare object naming one of the tools, is a call; an object that
    names no offered tool is left alone as text."""
    fenced = '```json\n{"name": "read_file", "arguments": {"path": "USER.md"}}\n```'
    assert read_text_calls(fenced, TOOLS).dialect == "fenced"
    bare = 'Sure: {"name": "edit_file", "parameters": {"path": "USER.md", "old_text": "a", "new_text": "b"}} done'
    found = read_text_calls(bare, TOOLS)
    assert found.dialect == "bare" and found.calls[0].parsed_arguments()["new_text"] == "b"
    assert read_text_calls('{"name": "delete_everything", "arguments": {}}', TOOLS).calls == ()
    assert read_text_calls("I updated USER.md with your preference.", TOOLS).calls == ()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "USER.md", "new_text": "- a\n- b\n"}', "- a\n- b\n"),  # raw newlines in a string
        ('{"path": "USER.md", "new_text": "x",}', "x"),  # a trailing comma
        ('```json\n{"path": "USER.md", "new_text": "y"}\n```', "y"),  # a code fence around it
    ],
)
def test_tool_arguments_are_read_leniently(arguments: str, expected: str) -> None:
    """The argument shapes a small model writes are read, not refused."""
    assert ToolCall("c1", "edit_file", arguments).parsed_arguments()["new_text"] == expected


def test_cut_off_arguments_are_refused_not_completed() -> None:
    """An object that never closes was cut off: applying a guessed completion could write half
    an edit, so it is refused with a message for the model."""
    with pytest.raises(ValueError, match="not valid JSON"):
        ToolCall("c1", "edit_file", '{"path": "USER.md", "new_text": "half of it').parsed_arguments()


def test_skip_in_any_form_is_a_skip() -> None:
    """`[USER] [SKIP]` on every tag (Qwen's answer), `[MEMORY] none`, a bare SKIP: nothing to add."""
    assert parse_facts("[USER] [SKIP]\n[SOUL] [SKIP]\n[MEMORY] [SKIP]").nothing_to_add
    assert parse_facts("- [MEMORY] none\n- [USER] (nothing)").skip
    assert parse_facts("SKIP").skip


def test_a_line_with_several_tags_is_split_into_facts() -> None:
    """`[USER] a [MEMORY] b` holds two facts, each for its own file."""
    facts = parse_facts("- [USER] Lives in Oslo [MEMORY] The ledger runs on Postgres 16").facts
    assert [(f.tag, f.text) for f in facts] == [("USER", "Lives in Oslo"), ("MEMORY", "The ledger runs on Postgres 16")]


def test_the_prompts_examples_and_placeholders_are_not_facts() -> None:
    """Copied examples and `skill-name:` placeholders are left out; a reply holding nothing else
    is refused (so Dream asks again) instead of being stored."""
    reply = "[USER] Indents with tabs (was two spaces)\n[SKILL] skill-name: how to deploy\n[USER] Works at Acme"
    facts = parse_facts(reply, examples=PHASE1_EXAMPLES)
    assert [f.text for f in facts.facts] == ["Works at Acme"]
    assert len(facts.rejected) == 2
    with pytest.raises(BadReply, match="no fact of its own"):
        parse_facts("[USER] Indents with tabs (was two spaces)\n[ENTITY] entity-name: x", examples=PHASE1_EXAMPLES)


def test_edits_forgive_trailing_spaces_line_endings_and_indentation() -> None:
    """Exact first; then trailing whitespace and CRLF; then indentation (re-indented to the file)."""
    assert apply_edit("- tea   \n- dark\n", "- tea\n", "- coffee\n", "U.md") == "- coffee\n- dark\n"
    assert apply_edit("a\r\n- x\r\nb\r\n", "- x\nb\n", "- y\nb\n", "U.md") == "a\r\n- y\r\nb\r\n"
    nested = "## A\n\n    - x\n    - y\n"
    assert apply_edit(nested, "- x\n- y\n", "- x\n- z\n", "U.md") == "## A\n\n    - x\n    - z\n"


def test_loose_matching_still_needs_one_match_and_names_the_closest_lines() -> None:
    """Two places matching once indentation is ignored is an error naming both lines; text that
    is nowhere gets the closest lines back."""
    with pytest.raises(EditRejected, match=r"matches 2 places \(at lines 1, 3\)"):
        apply_edit("  - x\n  - y\n    - x\n    - y\n", "- x\n- y", "- z", "U.md")
    with pytest.raises(EditRejected, match="closest lines") as caught:
        apply_edit("# U\n\n- Prefers dark mode\n", "- Prefers light mode", "- Prefers tea", "U.md")
    assert "3: - Prefers dark mode" in caught.value.message


def test_search_replace_blocks_are_read_with_their_paths() -> None:
    """aider's edit-block form, with the path in backticks and a fence around the block; an
    empty SEARCH creates a file; a block with no path says so."""
    text = (
        "`USER.md`\n```\n<<<<<<< SEARCH\n## Preferences\n=======\n## Preferences\n\n- Tea\n>>>>>>> REPLACE\n```\n"
        "entities/ledger.md\n<<<<<<< SEARCH\n=======\n# Ledger\n>>>>>>> REPLACE\n"
    )
    blocks, problems = parse_edit_blocks(text)
    assert problems == []
    assert [(b.path, b.search, b.replace) for b in blocks] == [
        ("USER.md", "## Preferences\n", "## Preferences\n\n- Tea\n"),
        ("entities/ledger.md", "", "# Ledger\n"),
    ]
    _, problems = parse_edit_blocks("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n")
    assert problems and "names no file" in problems[0]


def test_a_block_under_a_file_that_is_not_memory_is_refused_not_given_the_last_file() -> None:
    """A block headed by `.git/hooks/post-commit` or `notes.txt` took the previous block's file
    (USER.md here) and was applied there. It is refused, naming the file; a block after prose
    (no file named at all) still goes on in the previous block's file, as aider's form has it."""
    block = "<<<<<<< SEARCH\n{0}\n=======\n{1}\n>>>>>>> REPLACE\n"
    text = (
        "USER.md\n"
        + block.format("a", "b")
        + "\n.git/hooks/post-commit\n"
        + block.format("", "#!/bin/sh")
        + "\n`notes.txt`\n"
        + block.format("c", "d")
        + "\nAnd one more change:\n"
        + block.format("e", "f")
        + "\nN/A\n"  # words with a slash or a dot name no file: the block stays the last file's
        + block.format("g", "h")
        + "\nv1.2\n"
        + block.format("i", "j")
    )
    blocks, problems = parse_edit_blocks(text)
    assert [(b.path, b.search) for b in blocks] == [
        ("USER.md", "a\n"),
        ("USER.md", "e\n"),
        ("USER.md", "g\n"),
        ("USER.md", "i\n"),
    ]
    assert problems == [
        "block 2 names '.git/hooks/post-commit', which is not a memory file: Dream edits only the "
        "workspace's .md memory files; the block was not applied",
        "block 3 names 'notes.txt', which is not a memory file: Dream edits only the workspace's .md "
        "memory files; the block was not applied",
    ]


def test_a_consolidation_reply_answering_the_question_is_not_a_summary() -> None:
    """Prose with no list item answered the conversation; bullets or (nothing) are summaries."""
    assert summary_problem("The capital of France is Paris. Let me know if you need more!")
    assert summary_problem("- [durable] User lives in Lyon") is None
    assert summary_problem("(nothing)") is None


def test_calls_round_trip_through_the_assistant_message() -> None:
    """A call read from text is sent back as an ordinary tool call, so the transcript is valid."""
    call = read_text_calls('<tool_call>{"name": "read_file", "arguments": {"path": "USER.md"}}</tool_call>', TOOLS)
    message = call.calls[0].to_message()
    assert message["function"]["name"] == "read_file"
    assert json.loads(message["function"]["arguments"]) == {"path": "USER.md"}


def test_the_consolidation_instruction_is_repeated_after_the_transcript() -> None:
    """The last thing a model reads is the instruction to summarize, not the last question."""
    from dream_memory.core.prompts import CONSOLIDATION_REMINDER, consolidation_messages

    user = consolidation_messages(["user: how do I deploy?"])[1]["content"]
    assert user.index("how do I deploy?") < user.index(CONSOLIDATION_REMINDER)
    assert user.rstrip().endswith(CONSOLIDATION_REMINDER)


def test_html_escaped_facts_are_unescaped() -> None:
    """A server that HTML-escapes the prompt gets `User&#39;s` back; the fact says `User's`."""
    assert parse_facts("[USER] User&#39;s timezone is CET").facts[0].text == "User's timezone is CET"
