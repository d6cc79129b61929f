"""Phase-1 tagged lines and the guards that hold risky batches back."""

from __future__ import annotations

import pytest

from dream_memory.core.facts import Fact, parse_facts
from dream_memory.core.guards import GuardSettings, hold_reasons, is_always_on, net_removed
from dream_memory.errors import BadReply


def test_tagged_lines_are_read_through_decoration() -> None:
    """Bullets, bold tags and chatter around the list do not hide the facts."""
    reply = "Here is what I found:\n- [USER] Prefers dark mode\n**[MEMORY]** Uses PostgreSQL 16\n1. [SOUL] Be brief\n"
    facts = parse_facts(reply)
    assert [f.render() for f in facts.facts] == [
        "[USER] Prefers dark mode",
        "[MEMORY] Uses PostgreSQL 16",
        "[SOUL] Be brief",
    ]
    assert facts.ignored == ("Here is what I found:",)


def test_named_tags_and_their_targets() -> None:
    """[SKILL] and [ENTITY] carry a name that decides their file."""
    facts = parse_facts(
        "[SKILL] Release Checklist: how to release\n[ENTITY] ledger-api: a Go service\n[OBSERVATION] builds slow"
    )
    assert [f.target for f in facts.facts] == [
        "skills/release-checklist/SKILL.md",
        "entities/ledger-api.md",
        "observations.md",
    ]


def test_skip_and_duplicates() -> None:
    """[SKIP] alone means nothing to add; repeated facts count once."""
    assert parse_facts("[SKIP]").nothing_to_add
    facts = parse_facts("[USER] a\n[USER] A\n[SKIP]")
    assert facts.facts == (Fact("USER", "a"),)
    assert not facts.skip


@pytest.mark.parametrize("reply", ["", "I could not find anything.", "[FOO] bar", "[SKILL] no name here"])
def test_a_reply_without_any_tagged_line_is_a_bad_reply(reply: str) -> None:
    """Unparseable phase-1 output is a content failure, never an empty success."""
    with pytest.raises(BadReply):
        parse_facts(reply)


def test_deleting_a_file_or_many_lines_is_held() -> None:
    """Deletions beyond the guard are held; small edits are not."""
    body = "".join(f"- fact {i}\n" for i in range(20))
    settings = GuardSettings()
    assert hold_reasons({"USER.md": (body, None)}, settings) == ["would delete USER.md"]
    cut = "".join(f"- fact {i}\n" for i in range(5))
    assert hold_reasons({"USER.md": (body, cut)}, settings) == ["would remove 15 of 20 lines from USER.md"]
    small = body.replace("- fact 3\n", "- fact three\n")
    assert hold_reasons({"USER.md": (body, small)}, settings) == []
    assert net_removed(body, small) == 0


def test_template_files_are_never_held_for_line_removal() -> None:
    """The first Dream on a template workspace may rewrite template lines freely."""
    template = "".join(f"line {i}\n" for i in range(30))
    reasons = hold_reasons({"USER.md": (template, "new\n")}, GuardSettings(), is_template=lambda p, t: True)
    assert reasons == []


def test_always_on_skills_and_soul_changes_are_held_when_configured() -> None:
    """A skill gaining always: true is held; SOUL.md changes are held only with holdSoulChanges."""
    skill_before = "---\nname: x\ndescription: d\n---\nbody\n"
    skill_after = "---\nname: x\ndescription: d\nalways: true\n---\nbody\n"
    assert is_always_on(skill_after) and not is_always_on(skill_before)
    reasons = hold_reasons({"skills/x/SKILL.md": (skill_before, skill_after)}, GuardSettings())
    assert reasons and "always-on" in reasons[0]
    soul = {"SOUL.md": ("# Soul\n", "# Soul\n- be brief\n")}
    assert hold_reasons(soul, GuardSettings()) == []
    assert hold_reasons(soul, GuardSettings(hold_soul_changes=True)) == ["changes SOUL.md while holdSoulChanges is set"]
