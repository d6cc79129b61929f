"""The Consolidator's pure rules: reading session lines, safe cuts, the slice plan, splitting
without loss, and the metadata line rewrite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dream_memory.adapters.tokens import estimate_tokens
from dream_memory.core.consolidation import (
    SAFETY_MARGIN_TOKENS,
    Progress,
    is_nothing,
    match_entries,
    plan_parts,
    plan_slice,
    progress_at,
    raw_body,
    raw_entry_texts,
    resolve_budget,
    resume_point,
    split_utf8,
)
from dream_memory.core.sessions import parse_session, safe_cuts, with_last_consolidated
from dream_memory.settings.defaults import MODEL_CONTEXT_WINDOW_FALLBACK as FALLBACK

META = '{"_type": "metadata", "key": "cli:direct", "last_consolidated": 0}'


def _text(messages: list[dict[str, Any]], meta: str = META) -> str:
    return meta + "\n" + "".join(json.dumps(m) + "\n" for m in messages)


def test_only_complete_lines_count_and_bad_lines_keep_their_number() -> None:
    """A half-written last line is left for later; a broken or foreign line is kept, with its line
    number and raw text, instead of being dropped; blank lines are skipped."""
    text = (
        META
        + '\n{"role": "user", "content": "hi", "timestamp": "2026-04-03T10:00:00"}\n\n'
        + "{broken\n"
        + '["a list"]\n'
        + '{"role": "assistant", "content": [{"type": "text", "text": "hello"}, {"type": "image_url"}]}\n'
        + '{"role": "user", "content": "still being wri'
    )
    parsed = parse_session(text)
    assert parsed.meta.key == "cli:direct" and parsed.meta.last_consolidated == 0
    assert parsed.partial_tail is True
    assert [(r.line_no, r.is_message) for r in parsed.records] == [(2, True), (4, False), (5, False), (6, True)]
    assert parsed.records[1].raw == "{broken" and "not valid JSON" in (parsed.records[1].problem or "")
    assert parsed.records[3].content == "hello\n[image_url]"


def _session_strategy() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random sessions: user turns, tool calls answered (sometimes late, sometimes never)."""

    def build(plan: list[tuple[int, int, bool]]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        open_calls: list[str] = []
        for n, (kind, calls, answer_late) in enumerate(plan):
            if kind == 0:
                messages.append({"role": "user", "content": f"u{n}"})
            elif kind == 1:
                ids = [f"c{n}-{k}" for k in range(calls)]
                messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": i} for i in ids]})
                if answer_late:
                    open_calls += ids
                else:
                    messages += [{"role": "tool", "tool_call_id": i, "content": "r"} for i in ids]
            elif open_calls:
                messages.append({"role": "tool", "tool_call_id": open_calls.pop(0), "content": "late"})
            else:
                messages.append({"role": "assistant", "content": f"a{n}"})
        return messages

    step = st.tuples(st.integers(0, 2), st.integers(1, 3), st.booleans())
    return st.lists(step, min_size=1, max_size=40).map(build)


@settings(max_examples=300, deadline=None)
@given(_session_strategy(), st.integers(0, 10))
def test_every_safe_cut_starts_a_user_turn_and_splits_no_tool_group(messages: list[dict[str, Any]], start: int) -> None:
    """Whatever the session, a cut is offered only at a user message with no tool call before it
    still waiting for a result after it, and every such place is offered."""
    records = parse_session(_text(messages)).records
    start = min(start, len(records))
    cuts = set(safe_cuts(records, start))
    for i in range(start + 1, len(records)):
        before = {c.id for r in records[:i] for c in r.tool_calls}
        splits = any(r.role == "tool" and r.tool_call_id in before for r in records[i:])
        assert (i in cuts) == (records[i].role == "user" and not splits)


def test_real_sessions_offer_only_clean_cuts(fixture_sessions: list[Path]) -> None:
    """In every real session of the fixtures, every cut offered is clean (checked on the raw JSON)."""
    offered = 0
    for path in fixture_sessions:
        text = path.read_text(encoding="utf-8")
        records = parse_session(text).records
        raw = [json.loads(r.raw) for r in records]
        for cut in safe_cuts(records, 0):
            offered += 1
            assert raw[cut]["role"] == "user"
            calls = {c["id"] for m in raw[:cut] for c in m.get("tool_calls") or []}
            assert not {m.get("tool_call_id") for m in raw[cut:]} & calls
    assert offered >= 20


def test_the_slice_leaves_half_the_budget_or_folds_what_it_safely_can() -> None:
    """Over budget: the earliest cut leaving at most half; no such cut: the last one; --force: the
    last one regardless; within budget or without a cut: nothing, with the reason."""
    costs = [100] * 10
    assert plan_slice(costs, [2, 4, 6, 8], 0, 2_000, force=False).plan is None
    plan = plan_slice(costs, [2, 4, 6, 8], 0, 800, force=False).plan
    assert plan is not None and (plan.end, plan.tokens_after) == (6, 400)
    plan = plan_slice(costs, [2, 4], 0, 800, force=False).plan
    assert plan is not None and plan.end == 4 and plan.tokens_after == 600
    plan = plan_slice(costs, [2, 4, 6, 8], 2, 2_000, force=True).plan
    assert plan is not None and (plan.start, plan.end) == (2, 8)
    decision = plan_slice(costs, [], 0, 500, force=False)
    assert decision.plan is None and "no safe cut" in decision.reason and decision.tokens == 1_000
    assert "nothing new" in plan_slice(costs, [], 10, 500, force=True).reason


def test_the_budget_comes_from_the_flag_the_config_or_the_model_window() -> None:
    """--budget beats the config, which beats the model's window minus completion and margin."""
    assert resolve_budget(500, 900, 8_000, 1_000, fallback_window=FALLBACK).tokens == 500
    assert resolve_budget(None, 900, 8_000, 1_000, fallback_window=FALLBACK).tokens == 900
    assert (
        resolve_budget(None, None, 8_000, 1_000, fallback_window=FALLBACK).tokens
        == 8_000 - 1_000 - SAFETY_MARGIN_TOKENS
    )
    default = resolve_budget(None, None, None, 4_096, fallback_window=FALLBACK)
    assert default.tokens == FALLBACK - 4_096 - SAFETY_MARGIN_TOKENS and "default" in default.source


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400), st.integers(4, 64))
def test_splitting_by_bytes_never_loses_or_cuts_a_character(text: str, cap: int) -> None:
    """Pieces join back to the text exactly, each within the cap."""
    pieces = split_utf8(text, cap)
    assert "".join(pieces) == text
    assert all(0 < len(p.encode("utf-8")) <= cap for p in pieces)


def test_a_large_raw_archive_becomes_numbered_entries_that_join_back() -> None:
    """A raw archive over the cap is several "[RAW] n messages (part i of k)" entries whose bodies
    join back to the transcript; a small one is a single entry."""
    lines = [f"[2026-04-03 10:00] tool (exec): {'ü' * 3000} {i}" for i in range(12)]
    entries = raw_entry_texts(lines, "12 messages", cap_bytes=16 * 1024)
    assert len(entries) > 3
    assert all(len(e.encode("utf-8")) <= 16 * 1024 for e in entries)
    assert all(e.startswith(f"[RAW] 12 messages (part {i} of {len(entries)})\n") for i, e in enumerate(entries, 1))
    assert "".join(raw_body(e) for e in entries) == "\n".join(lines)
    assert raw_entry_texts(["a", "b"], "2 messages") == ["[RAW] 2 messages\na\nb"]


def test_parts_for_the_model_keep_every_line_in_order() -> None:
    """A transcript larger than one call is grouped into parts within the limit; a line larger
    than a part is divided, and the parts together hold the transcript unchanged."""
    lines = [f"line {i} " + "word " * (i * 7) for i in range(30)] + ["x" * 5_000]
    parts = plan_parts(lines, 120, estimate_tokens)
    assert all(sum(estimate_tokens(line) + 1 for line in part) <= 120 or len(part) == 1 for part in parts)
    assert all(estimate_tokens(part[0]) <= 120 for part in parts if len(part) == 1)
    flat = [line for part in parts for line in part]
    assert "".join(flat) == "".join(lines)


def test_nothing_is_recognised_in_its_usual_spellings() -> None:
    """`(nothing)`, `- (nothing)` and `Nothing.` mean no entry; a real summary does not."""
    assert all(is_nothing(t) for t in ("(nothing)", " - (nothing)\n", "Nothing.", "(NOTHING)"))
    assert not is_nothing("- nothing was decided about the database, user prefers sqlite")


def test_the_metadata_rewrite_changes_only_the_digits() -> None:
    """last_consolidated is rewritten in place, added when missing, and left alone when the line
    holds it twice (nested): then the file is not touched."""
    line = '{"_type": "metadata", "key": "k",  "last_consolidated": 7, "x": "ü"}'
    assert with_last_consolidated(line, 120) == line.replace(": 7,", ": 120,")
    assert with_last_consolidated('{"_type": "metadata"}', 3) == '{"_type": "metadata", "last_consolidated": 3}'
    nested = '{"_type": "metadata", "metadata": {"last_consolidated": 1}, "last_consolidated": 2}'
    assert with_last_consolidated(nested, 5) is None
    assert with_last_consolidated('{"role": "user"}', 5) is None


def test_progress_survives_a_rewrite_of_the_metadata_line_but_not_a_reset() -> None:
    """Agents rewrite the metadata line on every save: the progress still applies. A file whose
    consolidated part changed (a reset) no longer matches, and the agent's own last_consolidated
    ahead of ours is followed."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(8)]
    parsed = parse_session(_text(messages))
    progress = progress_at(parsed, "cli:direct", 4, "now")
    assert (progress.next_line, progress.messages, progress.last_line) == (6, 4, 5)
    resaved = parse_session(_text(messages, META.replace('"key"', '"updated_at": "2026-05-01", "key"')))
    assert resume_point(resaved, progress).index == 4
    reset = parse_session(_text([{"role": "user", "content": "new"}] * 8))
    assert resume_point(reset, progress).index is None
    ahead = parse_session(_text(messages, META.replace('"last_consolidated": 0', '"last_consolidated": 6')))
    resume = resume_point(ahead, progress)
    assert resume.index == 6 and resume.note is not None and "ahead" in resume.note
    first = resume_point(ahead, None)
    assert first.index == 6 and first.first_seen
    assert Progress.from_json(progress.to_json()) == progress


def test_entries_already_in_history_are_matched_in_order() -> None:
    """After a crash, planned entries found in history (in order) are not appended again."""
    assert match_entries(["a", "b", "c"], ["x", "a", "b"]) == [1, 2, None]
    assert match_entries(["a", "a"], ["a"]) == [0, None]
    assert match_entries([], ["a"]) == []


def test_a_watermark_beyond_the_end_is_read_as_zero_with_a_warning() -> None:
    """last_consolidated 40 in a file of 8 messages would hide the whole session; nanobot reads
    such a value as 0, and so do we, saying so."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(8)]
    meta = '{"_type": "metadata", "key": "cli:direct", "last_consolidated": 40}'
    resume = resume_point(parse_session(_text(messages, meta)), None)
    assert resume.index == 0
    assert resume.warning is not None and "beyond the 8 messages" in resume.warning and "read as 0" in resume.warning


def test_nanobot_035_lines_private_state_left_out_internal_turns_counted_but_never_shown() -> None:
    """A provider_state line is no record at all (not counted, never in a transcript, not even
    as an unreadable line); hidden checkpoints and command turns count toward last_archived, as
    nanobot counts them, but have no transcript line; last_archived wins over last_consolidated."""
    from dream_memory.core.sessions import transcript_lines

    meta = '{"_type": "metadata", "key": "k", "last_archived": 2, "last_consolidated": 1}'
    private = '{"_type": "provider_state", "state": {"payload": {"encrypted": "BLOB"}}}'
    lines = [
        {"role": "user", "content": "/new", "_command": True},
        {"role": "user", "content": "continue", "_hidden_history": True},
        {"role": "user", "content": "", "media": ["/tmp/a.png"]},
        {"role": "user", "content": "hi\n\nCTX", "_runtime_context": {"version": 1, "suffix": "CTX"}},
    ]
    parsed = parse_session(meta + "\n" + private + "\n" + "".join(json.dumps(m) + "\n" for m in lines))
    assert (parsed.private_lines, parsed.message_count, parsed.meta.archive_offset) == (1, 4, 2)
    shown = [line for r in parsed.records for line in transcript_lines(r)]
    assert shown == ["user: [image: /tmp/a.png]", "user: hi"]
    assert resume_point(parsed, None).index == 2


def test_the_progress_is_written_under_the_field_the_agent_reads() -> None:
    """nanobot 0.3.5 reads last_archived and writes both: both are set; 0.3.0's line has only
    last_consolidated; a line with neither gets both in 0.3.5's store, last_consolidated elsewhere."""
    from dream_memory.core.sessions import keys_to_write, with_progress

    both = '{"_type": "metadata", "key": "k", "last_archived": 2, "last_consolidated": 2}'
    keys = keys_to_write(both, nanobot_store=True)
    assert keys == ("last_archived", "last_consolidated")
    assert with_progress(both, 9, keys) == both.replace(": 2", ": 9")
    assert keys_to_write('{"_type": "metadata", "last_consolidated": 1}', nanobot_store=True) == ("last_consolidated",)
    assert keys_to_write('{"_type": "metadata"}', nanobot_store=True) == ("last_archived", "last_consolidated")
    assert keys_to_write('{"_type": "metadata"}', nanobot_store=False) == ("last_consolidated",)


def test_a_byte_order_mark_before_the_metadata_line_keeps_the_sessions_key() -> None:
    """A session file an editor saved with a BOM: its metadata line read as unreadable line 1, and
    its entries were filed under the file name's guess instead of the key (found by a review)."""
    meta = json.dumps({"_type": "metadata", "key": "telegram:42", "last_consolidated": 0})
    turn = json.dumps({"role": "user", "content": "hello", "timestamp": "2026-04-03T10:00:00"})
    parsed = parse_session("\ufeff" + meta + "\n" + turn + "\n")
    assert parsed.meta.key == "telegram:42" and parsed.meta.line_no == 1
    assert [r.line_no for r in parsed.records] == [2]
    first_record = parse_session("\ufeff" + turn + "\n")  # no metadata line: the record is whole
    assert [(r.line_no, r.role, r.problem) for r in first_record.records] == [(1, "user", None)]
