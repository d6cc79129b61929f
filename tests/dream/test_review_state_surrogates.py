"""Dream's state file stays writable whatever text reaches it: a failure's error or a held
change's reason may quote half an emoji (a lone surrogate from a model's JSON escape) or a byte
that was not UTF-8 (a surrogateescape'd `dream append` argument). Written as readable JSON that
UTF-8 cannot encode, the state write failed, and with it every run that had to record a failure
or a held change; escaped, it reads back as the same text."""

from __future__ import annotations

from dream_memory.core.state import DreamState, FailureRecord, HeldChange


def test_a_state_quoting_lone_surrogates_is_utf8_and_reads_back_the_same() -> None:
    state = DreamState(
        failure=FailureRecord(1, 20, 2, "the reply quoted a rocket \ud83d that was cut in half"),
        changes=(HeldChange("1-20.1", "USER.md", 1, 20, "replaces a line a person wrote: caf\udce9", "2026-12-05"),),
    )

    data = state.to_json().encode("utf-8")

    assert DreamState.from_json(data.decode("utf-8")) == state


def test_a_state_of_plain_text_stays_readable() -> None:
    state = DreamState(failure=FailureRecord(1, 20, 1, "Zoë's café: ünïcode stays as it is"))

    assert "Zoë's café" in state.to_json()
