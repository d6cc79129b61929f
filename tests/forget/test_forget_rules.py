"""The purge's text rules and the guard's matcher, without a repository."""

from __future__ import annotations

import json
import secrets

from dream_memory.adapters.forgotten import PurgedValues, Record
from dream_memory.adapters.secrets import SecretScanner
from dream_memory.core.forget import Target, purge_bytes, purge_jsonl


def test_a_value_written_escaped_in_a_history_line_is_found_and_the_line_stays_json() -> None:
    """A history line written with ensure_ascii (é as \\u00e9) still loses the value; its cursor,
    timestamp and session key stay and the line parses."""
    line = json.dumps(
        {"cursor": 7, "timestamp": "2026-04-03 10:00", "content": "Zoé Marchand lives here", "session_key": "k"}
    )
    assert "\\u00e9" in line
    change = purge_jsonl(line + "\n", Target("value", "Zoé Marchand"))
    entry = json.loads(change.text)
    assert entry == {
        "cursor": 7,
        "timestamp": "2026-04-03 10:00",
        "content": "[forgotten] lives here",
        "session_key": "k",
    }
    assert change.lines == (1,)


def test_a_torn_line_holding_the_value_is_changed_as_text() -> None:
    """A line that is not JSON (torn by a crash) loses the value too, and is otherwise kept."""
    change = purge_jsonl('{"cursor": 3, "content": "code CANARY-1234 and th\n', Target("value", "CANARY-1234"))
    assert change.text == '{"cursor": 3, "content": "code [forgotten] and th\n'


def test_an_entity_file_goes_and_other_files_only_lose_the_name() -> None:
    """--entity: entities/NAME.md (any case) is dropped, index.md rows linking to it go, other
    lines keep their place with [forgotten]."""
    target = Target("entity", "Zorblatt")
    assert purge_bytes("entities/zorblatt.md", b"# Zorblatt\n", target) is None
    index = b"- [Bob](entities/Bob.md)\n- [Zorblatt](entities/Zorblatt.md): ghost\n"
    assert purge_bytes("index.md", index, target) == b"- [Bob](entities/Bob.md)\n"
    assert purge_bytes("USER.md", b"a\n- Friend of Zorblatt\nb\n", target) == b"a\n- Friend of [forgotten]\nb\n"


def _matcher(values: list[str], *, rolling: bool = True) -> PurgedValues:
    record = Record(secrets.token_bytes(32))
    record.purges = [
        {"digest": record.digest(v), "length": len(v), **({"rolling": record.rolling(v)} if rolling else {})}
        for v in values
    ]
    matcher = PurgedValues.of(record)
    assert matcher is not None
    return matcher


def test_the_guard_finds_purged_values_by_hash_with_and_without_the_rolling_filter() -> None:
    """Every occurrence is replaced, at the start, the end and back to back; near misses stay;
    a record without rolling hashes (an older one) gives the same answer."""
    text = "CANARY-7f3q9 x CANARY-7f3q9CANARY-7f3q9 CANARY-7f3q Alice Zorblatt"
    for rolling in (True, False):
        out, n = _matcher(["CANARY-7f3q9", "Alice Zorblatt"], rolling=rolling).scrub(text)
        assert n == 4
        assert out == "[REDACTED:forgotten] x [REDACTED:forgotten][REDACTED:forgotten] CANARY-7f3q [REDACTED:forgotten]"


def test_the_allowlist_cannot_exempt_a_purged_value() -> None:
    """A scanner whose allowlist matches the value still replaces it."""
    scanner = SecretScanner(allowlist=["CANARY.*"], purged=_matcher(["CANARY-7f3q9"]))
    clean, counts = scanner.redact("keep CANARY-7f3q9 out")
    assert clean == "keep [REDACTED:forgotten] out" and counts == {"forgotten": 1}
