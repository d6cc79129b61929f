"""Text divided into parts under a token budget (core.parts.split_text): a session's tool result
larger than a consolidation slice, a history entry larger than a prompt. Each line is counted
once: re-counting the growing part at every line was quadratic, and a 107,000-token tool result
kept `dream consolidate` busy for over two minutes before any model call, deaf to SIGTERM
(found by an independent review)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dream_memory.adapters.tokens import default_counter
from dream_memory.core.parts import split_text


class Counting:
    """A token counter that adds up how many characters it was asked to count."""

    def __init__(self) -> None:
        self.counter = default_counter()
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.counter.count(text)


def test_a_large_tool_result_is_counted_a_few_times_over_not_once_per_line() -> None:
    text = "".join(f"line {i} é😀 data\n" for i in range(12_000))
    count = Counting()
    parts = split_text(text, 30_000, count)
    assert "".join(parts) == text and len(parts) > 1
    assert all(count.counter.count(part) <= 30_000 for part in parts)
    # Once for the whole, once per line, once per part: before, some 12,000 times the text.
    assert count.chars <= 4 * len(text), count.chars / len(text)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet=st.sampled_from("ab é😀\n\r\u2028."), max_size=40), max_size=40),
    budget=st.integers(min_value=1, max_value=30),
)
def test_parts_join_back_to_the_text_and_each_fits(lines: list[str], budget: int) -> None:
    text = "\n".join(lines)
    counter = default_counter()
    parts = split_text(text, budget, counter.count)
    assert "".join(parts) == text
    # A part over the budget is one character (an emoji is more than one token): never cut inside.
    assert all(counter.count(part) <= budget or len(part) == 1 for part in parts)
    assert all(parts) or parts == [""]
