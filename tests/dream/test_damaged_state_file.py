"""A memory/.dream_state.json damaged by hand (or by a merge) is refused, nothing changed, with a
message that says which record is wrong and how. It quoted Python's own errors ("'list' object
has no attribute 'get'", "HeldChange.__init__() missing 5 required positional arguments") (found
by an independent review)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from dream_memory.core.state import DreamState, StateUnreadable

Dream = Callable[..., subprocess.CompletedProcess[str]]

CHANGE = {
    "id": "1-1.1",
    "path": "USER.md",
    "cursor_from": 1,
    "cursor_to": 1,
    "reason": "replaces a line a person wrote",
    "created": "2026-12-07T02:34:21+00:00",
    "first_line": 5,
    "last_line": 5,
}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ([1, 2], "it is not a JSON object"),
        ({"changes": {"1-1.1": CHANGE}}, "changes is not a list"),
        ({"changes": [[1, 2]]}, "changes[0] is not an object"),
        ({"changes": [CHANGE, {"id": "1-1.2"}]}, "changes[1] lacks path, cursor_from, cursor_to, reason, created"),
        ({"changes": [{**CHANGE, "colour": "red"}]}, "changes[0] has fields no version of dream-memory writes: colour"),
        ({"set_aside": ["1..2"]}, "set_aside[0] is not an object"),
        ({"held": [{"id": "1-2", "files": "USER.md"}]}, "held[0].files is not a list"),
        ({"failure": {"cursor_from": 1}}, "failure lacks"),
    ],
)
def test_a_damaged_record_is_named_in_words(data: object, said: str) -> None:
    with pytest.raises(StateUnreadable) as raised:
        DreamState.from_json(json.dumps(data))
    message = str(raised.value)
    assert said in message, message
    assert "__init__" not in message and "argument after" not in message and "attribute" not in message


def test_a_good_state_reads_back_as_written() -> None:
    text = json.dumps({"version": 1, "changes": [CHANGE], "set_aside": [], "held": []})
    assert DreamState.from_json(DreamState.from_json(text).to_json()).changes[0].id == "1-1.1"
