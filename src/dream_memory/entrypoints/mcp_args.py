"""The MCP tools' arguments: their bounds, as advertised in each tool's JSON schema and checked
before a tool runs (the read service checks the rest, with the CLI's messages)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

from dream_memory.core.search import MAX_QUERY_CHARS, MAX_RESULTS_LIMIT

# Linux's PATH_MAX: a longer path names no file.
MAX_PATH_CHARS = 4096
PathArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="Absolute path of a file or folder (e.g. the current repository); ~ is expanded.",
    ),
]
NameArg = Annotated[str, Field(min_length=1, max_length=256, description="Entity name, as in index.md.")]
SectionArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        description="Section name: soul, user, memory, observations, or NAME for sections/NAME.md "
        "(a private scope's server also has private-user and private-memory).",
    ),
]
QueryArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description='Words to find, case-insensitive; "quoted phrases" stay together.',
    ),
]


def _not_a_boolean(value: object) -> object:
    # pydantic's lax mode reads JSON true as 1 and false as 0: a client's mistake would page or
    # cap silently instead of being told.
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


# Last in each Annotated: put before the Field, it made pydantic advertise ge/le as they are
# instead of the JSON schema's minimum/maximum.
WHOLE_NUMBER = BeforeValidator(_not_a_boolean)

# The bounds are advertised in the schema but checked by the read service (core.search's one
# rule), so a bad value gets the same message here as from the CLI and the API.
MaxResultsArg = Annotated[
    int,
    Field(
        description="At most this many sources (1..50).",
        json_schema_extra={"minimum": 1, "maximum": MAX_RESULTS_LIMIT},
    ),
    WHOLE_NUMBER,
]
OffsetArg = Annotated[
    int, Field(ge=1, le=100_000_000, description="First line to show (from a [truncated] marker)."), WHOLE_NUMBER
]

AsOfArg = Annotated[
    str,
    Field(
        max_length=40,
        description="Read memory as it was then: a date (YYYY-MM-DD, the end of that day) or a time "
        "('YYYY-MM-DD HH:MM'); empty: now.",
    ),
]
LineArg = Annotated[
    int, Field(ge=1, le=100_000_000, description="Line number in the file as committed (from 1)."), WHOLE_NUMBER
]
MemoryPathArg = Annotated[
    str,
    Field(min_length=1, max_length=300, description="Memory file relative to the workspace, e.g. USER.md."),
]
