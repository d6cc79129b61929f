"""The write policy as a value: which hunks of a file's change land and which wait, by whose
lines they touch (core.write_policy; the blame is given as values here)."""

from __future__ import annotations

from dream_memory.core.write_policy import (
    HOLD,
    FileRule,
    LineOrigin,
    Rule,
    WritePolicy,
    pinned_problem,
    plan_file,
)

BEFORE = "# User\n\n- Name: Ada\n- Likes tea\n\n## Work\n\n- Writes compilers\n"
MANUAL = LineOrigin("manual", 1.0, "memory: manual edits")
DREAM = LineOrigin("dream", 1.0, "dream: 1..5: USER.md +1 -0")
OLD_DREAM = LineOrigin("dream", 400.0, "dream: 1..5: USER.md +1 -0")


def _origins(kind: LineOrigin) -> list[LineOrigin | None]:
    return [kind] * len(BEFORE.splitlines())


def test_additions_land_and_a_rewrite_of_a_hand_written_line_waits() -> None:
    """Two new lines and a rewritten hand-written line: the additions apply, the rewrite is one
    held hunk naming the line; composing the applied hunks gives the file with only the additions."""
    after = BEFORE.replace("- Likes tea\n", "- Likes coffee\n") + "- Uses Rust\n- Lives in Oslo\n"
    plan = plan_file("USER.md", BEFORE, after, _origins(MANUAL), WritePolicy())
    held = [plan.hunks[i] for i in plan.held]
    assert [(h.change, h.lines) for h in held] == [("replace", (4, 4))]
    assert "a line a person wrote" in held[0].reason and "USER.md line 4" in held[0].reason
    applied = {i for i, h in enumerate(plan.hunks) if h.action != HOLD}
    landed = plan.compose(applied)
    assert landed == BEFORE + "- Uses Rust\n- Lives in Oslo\n"
    assert plan.compose(applied | set(plan.held)) == after


def test_removing_or_moving_a_hand_written_line_waits_but_dream_lines_flow() -> None:
    """Removal and a move (remove + add elsewhere) of a person's line are held; the same edits of
    a recent Dream line apply; of an old Dream line they hold when dreamOld is hold."""
    moved = BEFORE.replace("- Likes tea\n", "").replace("- Writes compilers\n", "- Writes compilers\n- Likes tea\n")
    removed = BEFORE.replace("- Likes tea\n", "")
    for after in (moved, removed):
        assert plan_file("USER.md", BEFORE, after, _origins(MANUAL), WritePolicy()).held
        assert not plan_file("USER.md", BEFORE, after, _origins(DREAM), WritePolicy()).held
        assert not plan_file("USER.md", BEFORE, after, _origins(OLD_DREAM), WritePolicy()).held
        strict = WritePolicy(dream_old="hold", dream_age_days=90)
        assert plan_file("USER.md", BEFORE, after, _origins(OLD_DREAM), strict).held
        assert not plan_file("USER.md", BEFORE, after, _origins(DREAM), strict).held


def test_unknown_origins_count_as_a_persons_and_templates_as_dreams() -> None:
    """No blame (None) is the safe side: held. A file still holding its template is Dream's to fill."""
    after = BEFORE.replace("- Name: Ada\n", "- Name: Ada Lovelace\n")
    assert plan_file("USER.md", BEFORE, after, None, WritePolicy()).held
    assert not plan_file("USER.md", BEFORE, after, None, WritePolicy(), template=True).held


def test_file_and_section_overrides() -> None:
    """A file rule and a section rule override the defaults; the innermost section wins."""
    after = BEFORE.replace("- Writes compilers\n", "- Writes databases\n") + "- New\n"
    relaxed = WritePolicy(files=(FileRule("USER.md", sections=(("Work", Rule(manual="apply")),)),))
    assert not plan_file("USER.md", BEFORE, after, _origins(MANUAL), relaxed).held
    strict = WritePolicy(files=(FileRule("*.md", Rule(add="hold")),))
    plan = plan_file("USER.md", BEFORE, after, _origins(DREAM), strict)
    assert [plan.hunks[i].change for i in plan.held] == ["add"]


def test_a_rewrite_next_to_additions_holds_only_the_rewrite() -> None:
    """Rewriting a person's line and adding two lines right after it: the diff's one block is
    split, so the two additions land and only the rewrite waits."""
    after = BEFORE.replace("- Likes tea\n", "- Likes green tea\n- Uses Rust\n- Lives in Oslo\n")
    plan = plan_file("USER.md", BEFORE, after, _origins(MANUAL), WritePolicy())
    held = [plan.hunks[i] for i in plan.held]
    assert [(h.change, h.removed, h.added) for h in held] == [("replace", ("- Likes tea\n",), ("- Likes green tea\n",))]
    landed = plan.compose({i for i, h in enumerate(plan.hunks) if h.action != HOLD})
    assert landed == BEFORE.replace("- Likes tea\n", "- Likes tea\n- Uses Rust\n- Lives in Oslo\n")


def test_a_pinned_section_refuses_any_edit_of_it_and_allows_the_rest() -> None:
    """Pinning "Work": an edit inside it (or a line appended to it) is refused with a message the
    model can act on; an edit elsewhere in the file passes."""
    pinned = WritePolicy(files=(FileRule("USER.md", sections=(("Work", Rule(pin=True)),)),))
    inside = BEFORE.replace("- Writes compilers\n", "- Writes databases\n")
    appended = BEFORE + "- Also teaches\n"
    elsewhere = BEFORE.replace("- Likes tea\n", "- Likes tea\n- Likes jazz\n")
    for after in (inside, appended):
        problem = pinned_problem("USER.md", BEFORE, after, pinned)
        assert problem is not None and "'Work'" in problem and "pinned" in problem
    assert pinned_problem("USER.md", BEFORE, elsewhere, pinned) is None
    plan = plan_file("USER.md", BEFORE, inside, _origins(DREAM), pinned)
    assert [plan.hunks[i].pinned for i in plan.held] == [True]
    whole = WritePolicy(files=(FileRule("SOUL.md", Rule(pin=True)),))
    assert pinned_problem("SOUL.md", "x\n", "y\n", whole) is not None


def test_blank_lines_and_a_missing_last_newline_are_not_rewrites() -> None:
    """Appending to a file whose last line has no newline, or dropping a blank line, is no rewrite."""
    before = "# User\n\n- Name: Ada"
    plan = plan_file("USER.md", before, "# User\n- Name: Ada\n- More\n", [MANUAL] * 3, WritePolicy())
    assert not plan.held


def test_a_carriage_return_inside_a_line_above_does_not_move_a_pinned_section() -> None:
    """A line holding lone carriage returns (pasted text, an old Mac file) above a pinned section:
    the sections were read with each such return ending a line, and compared with lines that end
    only at a newline, so every return moved the section one line down. An edit of its first
    lines passed as one in the section above, and Dream rewrote pinned lines (found by an
    independent review)."""
    pinned = WritePolicy(files=(FileRule("USER.md", sections=(("Secrets", Rule(pin=True)),)),))
    before = "# User\n\n## Profile\n\n- note a\rb\rc\rd\n\n## Secrets\n- keep me\n- and me\n"
    after = before.replace("- keep me", "- Dream rewrote this")
    problem = pinned_problem("USER.md", before, after, pinned)
    assert problem is not None and "'Secrets'" in problem, problem
    lines = len(before.split("\n")) - 1
    plan = plan_file("USER.md", before, after, [DREAM] * lines, pinned)
    assert [plan.hunks[i].pinned for i in plan.held] == [True]
    assert pinned_problem("USER.md", before, before.replace("- note a", "- note A"), pinned) is None
