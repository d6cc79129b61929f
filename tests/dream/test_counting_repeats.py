"""The token counter a run shares: a long memory file counted again (each prompt that shows it)
gives the same count, and an edited one its own, never the count it had before the edit."""

from __future__ import annotations

import pytest

from dream_memory.adapters.tokens import TiktokenCounter, default_counter


def test_a_long_text_counted_again_and_after_an_edit() -> None:
    counter = default_counter()
    if not isinstance(counter, TiktokenCounter):
        pytest.skip("no bundled tiktoken encoding here: the byte heuristic keeps nothing")
    fresh = TiktokenCounter(counter._encoding)
    text = "".join(f"- [durable] User prefers option {i} for setting {i}.\n" for i in range(400))
    edited = text.replace("option 7 ", "the seventh option, the one with the longest name, ")
    assert [counter.count(text) for _ in range(3)] == [fresh.count(text)] * 3
    assert counter.count(edited) == fresh.count(edited) > counter.count(text)
    assert counter.count(text[:1999]) == fresh.count(text[:1999])
