"""Hypothesis fuzzing of everything dream-memory reads that someone else may have written: history
lines, session lines, index.md, config files, the model's phase-1 replies and its tool arguments.

What a user would notice if these failed: a file another program wrote (or a model's odd answer)
crashing a command with a traceback instead of a clear message or a skipped line. The rule: no
unexpected exception, only the package's own error kinds, or an error result for the model.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dream_memory.adapters.secrets import SecretScanner
from dream_memory.adapters.staging import StagingWorkspace
from dream_memory.core.agent_loop import ToolOutcome
from dream_memory.core.facts import parse_facts
from dream_memory.core.history import parse_line, parse_lines, split_physical_lines
from dream_memory.core.index_table import parse_index, resolve
from dream_memory.core.sessions import parse_record, parse_session, safe_cuts, transcript_lines
from dream_memory.errors import BadReply, ConfigError
from dream_memory.settings.loading import parse_config
from dream_memory.testing import build_workspace

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRICKY = st.sampled_from(
    ["\udcff", "\ud800", "\u2028", "\x85", "\n", "\r", "\x00", "{", "}", '"', "\\", "\ufeff", "|", "`"]
)
TEXT = st.text(alphabet=st.one_of(st.characters(), TRICKY), max_size=60)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=10
)


def _dump(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def objects_with(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects that look like the real thing: the expected keys with values of any type."""
    return st.dictionaries(st.sampled_from(keys) | TEXT, JSON, max_size=len(keys) + 1)


HISTORY_OBJECTS = objects_with(["cursor", "timestamp", "content", "session_key"])
HISTORY_LINES = st.one_of(
    TEXT,
    HISTORY_OBJECTS.map(_dump),
    st.lists(HISTORY_OBJECTS.map(_dump), min_size=2, max_size=3).map("".join),  # glued objects
    st.tuples(HISTORY_OBJECTS.map(_dump), st.integers(0, 80)).map(lambda t: t[0][: t[1]]),  # torn
)


@FAST
@given(st.lists(HISTORY_LINES, max_size=6))
def test_history_lines_never_crash_the_reader(lines: list[str]) -> None:
    """Any history.jsonl content parses into entries and reported lines, never an exception."""
    text = "\n".join(lines)
    parsed = list(parse_lines(split_physical_lines(text)))
    for line in parsed:
        assert line.problem is None or line.problem.describe()
        for entry in line.entries:
            assert isinstance(entry.content, str) and entry.cursor > 0
    for raw in lines:
        parse_line(raw, 1)


MESSAGE_KEYS = [
    "role",
    "content",
    "timestamp",
    "tool_calls",
    "tool_call_id",
    "name",
    "_type",
    "key",
    "last_consolidated",
]
TOOL_CALLS = st.lists(
    st.dictionaries(
        st.sampled_from(["id", "type", "function"]), JSON | objects_with(["name", "arguments"]), max_size=3
    ),
    max_size=3,
)
SESSION_OBJECTS = st.one_of(
    objects_with(MESSAGE_KEYS),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", ""]) | TEXT},
        optional={"content": JSON, "tool_calls": TOOL_CALLS | JSON, "tool_call_id": JSON, "timestamp": JSON},
    ),
)
SESSION_LINES = st.one_of(TEXT, SESSION_OBJECTS.map(_dump), JSON.map(_dump))


@FAST
@given(st.lists(SESSION_LINES, max_size=8), st.booleans())
def test_session_lines_never_crash_the_consolidator_reader(lines: list[str], newline: bool) -> None:
    """Any session file parses into messages and reported lines; cuts and transcripts of whatever
    was read never raise."""
    text = "\n".join(lines) + ("\n" if newline else "")
    parsed = parse_session(text)
    for record in parsed.records:
        assert record.is_message or record.problem
        if record.is_message:
            transcript_lines(record)
    safe_cuts(parsed.records, 0)
    for number, raw in enumerate(lines, start=1):
        parse_record(raw, number)


INDEX_CELLS = st.one_of(
    TEXT, st.sampled_from(["/home/u/src/a", "/srv/b (was c)", "~/x", "entities/e.md", "../../etc/passwd", ""])
)
INDEX_ROWS = st.lists(INDEX_CELLS, min_size=1, max_size=4).map(lambda cells: "| " + " | ".join(cells) + " |")
INDEX_LINES = st.one_of(
    INDEX_ROWS, TEXT, st.sampled_from(["| Entity | File | Repos |", "|---|---|---|", "```", "| repos | ENTITY |"])
)


@FAST
@given(st.lists(INDEX_LINES, max_size=12), TEXT | st.sampled_from(["/home/u/src/a/b", "/", "/srv/b/c"]))
def test_index_md_never_crashes_the_read_side(lines: list[str], path: str) -> None:
    """Any index.md parses into rows and problems; resolving any path against it never raises."""
    table = parse_index("\n".join(lines), home="/home/u")
    resolve(table.rows, path if path.startswith("/") else "/" + path)
    table.names()


DREAM_KEYS = [
    "maxBatchSize",
    "max_batch_size",
    "maxIterations",
    "deletionGuard",
    "secretAllowlist",
    "gitAuthor",
    "cron",
    "intervalH",
    "maxCostUsd",
    "modelOverride",
    "fileContextTokens",
    "maxHistoryEntries",
]
PRESET_KEYS = ["model", "apiBase", "apiKeyEnv", "maxTokens", "timeout", "maxRetries", "contextWindow", "temperature"]
CONFIGS = st.one_of(
    st.dictionaries(TEXT, JSON, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "agents": st.fixed_dictionaries(
                {},
                optional={
                    "defaults": st.fixed_dictionaries(
                        {}, optional={"model": JSON, "dream": objects_with(DREAM_KEYS) | JSON}
                    )
                },
            )
            | JSON,
            "modelPresets": st.dictionaries(TEXT, objects_with(PRESET_KEYS) | JSON, max_size=2) | JSON,
        },
    ),
)


@FAST
@given(CONFIGS)
def test_config_files_fail_only_with_a_config_error(data: dict[str, Any]) -> None:
    """Any JSON object as a config file is accepted or refused with a ConfigError naming the file
    (exit 2), never another exception."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parse_config(data, "fuzz.json")
        except ConfigError as exc:
            assert "fuzz.json" in exc.message


@FAST
@given(
    st.lists(
        st.one_of(
            TEXT,
            st.sampled_from(["[USER]", "[SKIP]", "[ENTITY] x:", "[SKILL] ", "- **[MEMORY]** a"]).flatmap(
                lambda tag: TEXT.map(lambda rest: tag + rest)
            ),
        ),
        max_size=6,
    )
)
def test_phase1_replies_fail_only_as_bad_replies(lines: list[str]) -> None:
    """Any phase-1 answer is read as facts or refused as a BadReply (a content failure), nothing else."""
    try:
        facts = parse_facts("\n".join(lines))
    except BadReply:
        return
    for fact in facts.facts:
        assert fact.target


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace with its templates for all examples (the tool layer must never change it)."""
    return build_workspace(tmp_path_factory.mktemp("fuzz-tools") / "ws")


PATHS = st.one_of(
    TEXT,
    JSON,
    st.sampled_from(
        [
            "USER.md",
            "SOUL.md",
            "memory/MEMORY.md",
            "memory/history.jsonl",
            "../outside.md",
            "/etc/passwd",
            "skills/x/SKILL.md",
            "entities/a.md",
            "entities/../USER.md",
            "USER.md/",
            "./SOUL.md",
            "index.md\x00",
        ]
    ),
)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["path", "old_text", "new_text", "content", "section"]) | TEXT, PATHS | JSON, max_size=5
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["read_file", "edit_file", "write_file"]) | TEXT, ARGUMENTS)
def test_tool_arguments_give_a_result_never_an_exception_or_a_write(
    workspace: Path, name: str, arguments: dict[str, Any]
) -> None:
    """Whatever a model puts in a tool call, the tool layer answers with a result the model reads
    (an error result when refused) and never writes to disk: edits stay in the staging copy."""
    before = {p: p.read_bytes() for p in workspace.parent.rglob("*") if p.is_file()}
    staging = StagingWorkspace(
        workspace, count_tokens=lambda text: len(text) // 4, file_budget_tokens=500, redactor=SecretScanner()
    )
    outcome = staging.execute(name, arguments)
    assert isinstance(outcome, ToolOutcome) and isinstance(outcome.text, str)
    assert {p: p.read_bytes() for p in workspace.parent.rglob("*") if p.is_file()} == before
