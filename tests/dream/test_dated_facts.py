"""Dated facts: relative dates in history ("tomorrow", "next Friday") land in memory as the
calendar dates they meant on the day they were said, whichever model wrote the fact."""

from __future__ import annotations

import re
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import Cli, make_workspace
from test_real_model_paths import by_phase, use_preset

from dream_memory.core.dates import Said, absolute_dates, day_said, expressions
from dream_memory.core.history import HistoryEntry
from dream_memory.core.prompts import render_entry
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

OFFLINE = {"DREAM_MODEL": "offline"}
FRIDAY = date(2026, 4, 3)  # 2026-04-03 is a Friday


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("remind me tomorrow", "remind me on 2026-04-04"),
        ("by tomorrow", "by 2026-04-04"),
        ("Tomorrow I fly to Oslo", "On 2026-04-04 I fly to Oslo"),
        ("the review was yesterday", "the review was on 2026-04-02"),
        ("the day after tomorrow", "on 2026-04-05"),
        ("today's standup moved", "2026-04-03's standup moved"),
        ("tonight we deploy", "on 2026-04-03 we deploy"),
        ("call mom next Friday", "call mom on Friday 2026-04-10"),
        ("call mom this Friday", "call mom on Friday 2026-04-03"),
        ("met Ana last Friday", "met Ana on Friday 2026-03-27"),
        ("dentist next Monday", "dentist on Monday 2026-04-06"),
        ("moved house last week", "moved house in the week of 2026-03-23"),
        ("holiday next week", "holiday in the week of 2026-04-06"),
        ("hiking this weekend", "hiking on the weekend of 2026-04-04"),
        ("release in 3 days", "release on 2026-04-06"),
        ("release in two weeks", "release on 2026-04-17"),
        ("quit smoking 10 days ago", "quit smoking on 2026-03-24"),
        ("a week ago", "on 2026-03-27"),
        ("review next month", "review in 2026-05"),
        ("until next month", "until 2026-05"),
        ("moves abroad next year", "moves abroad in 2027"),
    ],
)
def test_relative_expressions_become_calendar_dates(said: str, stored: str) -> None:
    """Each documented expression, said on Friday 2026-04-03, reads as the date it meant."""
    assert absolute_dates(said, FRIDAY) == stored


def test_rewriting_is_stable_and_leaves_other_words_alone() -> None:
    """A dated text rewritten again is unchanged; a bare weekday, 'next time', 'May' and
    absolute dates are left as they are; month and year ends roll over."""
    once = absolute_dates("remind me tomorrow and next Friday", FRIDAY)
    assert absolute_dates(once, FRIDAY) == once
    for text in ("on Friday", "next time", "in May", "on 2026-04-04", "a second opinion", "now"):
        assert absolute_dates(text, FRIDAY) == text
    assert absolute_dates("tomorrow", date(2026, 12, 31)) == "on 2027-01-01"
    assert absolute_dates("next month", date(2026, 12, 15)) == "in 2027-01"
    assert absolute_dates("this weekend", date(2026, 4, 5)) == "on the weekend of 2026-04-04"  # said on Sunday


def test_the_day_comes_from_the_entry_that_said_it() -> None:
    """A fact citing two entries of different days counts from the one holding the expression;
    with none holding it, from the latest; with no dated entry, there is no day."""
    cited = [Said("I will call the bank tomorrow", "2026-04-03 09:00"), Said("ok", "2026-04-07 10:00")]
    assert day_said("Calls the bank tomorrow", cited) == date(2026, 4, 3)
    assert day_said("Calls the bank soon next week", [Said("a", "2026-04-03"), Said("b", "2026-04-05")]) == date(
        2026, 4, 5
    )
    assert day_said("tomorrow", [Said("tomorrow", "")]) is None
    assert expressions("Tomorrow, and next  Friday") == ["tomorrow", "next friday"]


def test_the_prompt_shows_each_entry_date_and_weekday() -> None:
    """The analysis prompt's entry header carries its timestamp and weekday, so a model can count
    "next Friday" from it."""
    header = render_entry(HistoryEntry(7, "2026-04-03 10:15", "hi", "telegram:1")).splitlines()[0]
    assert header == "### Entry 7 (2026-04-03 10:15, Friday, session telegram:1)"


def _user_md(cli: Cli) -> str:
    return (cli.workspace / "USER.md").read_text(encoding="utf-8")


def test_offline_run_writes_tomorrow_as_the_next_day(isolated: Cli) -> None:
    """`dream run --model offline` on "remind me tomorrow" written on 2026-04-03 commits a USER.md
    line saying 2026-04-04, and no line saying "tomorrow"."""
    make_workspace(isolated, ["- [durable] User asked: remind me tomorrow to renew the passport."])
    result = isolated.run("run", "--model", "offline")
    assert result.exit_code == 0, result.output
    text = _user_md(isolated)
    assert "remind me on 2026-04-04 to renew the passport" in text
    assert "tomorrow" not in text


def test_a_model_writing_tomorrow_gets_the_date_committed(isolated: Cli) -> None:
    """A scripted model whose phase-1 fact says "tomorrow" and whose phase-2 edit writes the fact
    as it was handed over: the committed line says 2026-04-04, and phase 2 was handed the dated
    fact (the model never saw "tomorrow" among the facts to apply)."""
    make_workspace(isolated, ["user: remind me tomorrow to call the dentist"])
    seen: list[str] = []

    def edit(request: dict[str, Any]) -> Reply:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        if any(m["role"] == "tool" for m in request["messages"]):
            return Reply("Done.")
        fact = re.search(r"^1\. \[USER\] (.+)$", user, re.MULTILINE)
        assert fact is not None, user
        seen.append(fact[1])
        return Reply(
            tool_calls=[
                tool_call(
                    "edit_file",
                    path="USER.md",
                    old_text="## Preferences\n",
                    new_text=f"## Preferences\n\n- {fact[1]}\n",
                    facts=[1],
                )
            ]
        )

    phase1 = Reply("[USER] Wants a reminder tomorrow to call the dentist [from 1]")
    with ScriptedLLMServer(responder=by_phase(lambda _: phase1, edit)) as server:
        use_preset(isolated, server)
        code, report = isolated.run_json("run")
    assert code == 0, report
    assert report["batches"][0]["outcome"] == "committed"
    assert seen == ["Wants a reminder on 2026-04-04 to call the dentist"]
    assert "- Wants a reminder on 2026-04-04 to call the dentist" in _user_md(isolated)
    assert "tomorrow" not in _user_md(isolated)


def test_a_fact_whose_entries_carry_no_date_keeps_its_words_and_says_so(isolated: Cli) -> None:
    """History without timestamps: the fact is filed with "tomorrow" kept (never dropped), and the
    batch's notes say it could not be dated."""
    make_workspace(isolated, [HistoryEntry(1, "", "- [durable] User asked: remind me tomorrow to water plants.")])
    code, report = isolated.run_json("run", env=OFFLINE)
    assert code == 0, report
    assert "remind me tomorrow to water plants" in _user_md(isolated)
    assert any("keep a relative date" in n for n in report["batches"][0]["notes"]), report


# --- the dated trail -------------------------------------------------------------------------------


def test_a_trail_is_dated_merged_newest_first_and_kept_short() -> None:
    """'(was X)' gets the day it was said; replacing a line that has its own trail keeps both,
    newest first, at most three old values; a line without a trail is unchanged."""
    from dream_memory.core.dates import add_trail_date, merged_trail, split_trail

    assert add_trail_date("Lives in Porto (was Lyon)", FRIDAY) == "Lives in Porto (was Lyon until 2026-04-03)"
    assert add_trail_date("Lives in Porto", FRIDAY) == "Lives in Porto"
    dated = "Lives in Porto (was Lyon until 2026-04-03)"
    assert add_trail_date(dated, date(2027, 1, 1)) == dated
    assert split_trail("- A (was B until 2026-04-03; C until 2025-01-10)") == (
        "- A",
        ["B until 2026-04-03", "C until 2025-01-10"],
    )
    old = "- In Porto (was Lyon until 2026-01-01; Paris until 2025-01-01; Rome until 2024-01-01)"
    assert merged_trail("- In Oslo (was Porto until 2026-06-01)", old) == (
        "- In Oslo (was Porto until 2026-06-01; Lyon until 2026-01-01; Paris until 2025-01-01)"
    )
    assert merged_trail("- In Oslo", old) == "- In Oslo"


def test_placement_keeps_a_dated_trail_and_drops_an_undated_note() -> None:
    """The rules that file facts (offline engine, facts protocol): "(was X)" replaces X's line
    and is dropped; "(was X until DATE)" replaces it and stays; a value named only in a line's
    trail is not matched again."""
    from dream_memory.core.placement import add_fact

    user = "# User\n\n## Profile\n\n- Lives in Lyon\n"
    assert "- Lives in Porto\n" in add_fact(user, "USER.md", "Lives in Porto (was Lyon)")
    trailed = add_fact(user, "USER.md", "Lives in Porto (was Lyon until 2026-04-03)")
    assert "- Lives in Porto (was Lyon until 2026-04-03)\n" in trailed and "- Lives in Lyon" not in trailed
    again = add_fact(trailed, "USER.md", "Lives in Madrid (was Porto until 2026-06-01)")
    assert "- Lives in Madrid (was Porto until 2026-06-01; Lyon until 2026-04-03)\n" in again
    # "Lyon" is only in the trail now: a fact superseding Lyon does not overwrite the Madrid line.
    assert "- Lives in Madrid" in add_fact(again, "USER.md", "Works in Nice (was Lyon until 2026-07-01)")


def _config(cli: Cli, **dream: object) -> None:
    import json

    path = cli.home / "dream.json"
    # The init commit wrote "Lyon": replacing a line a person wrote would wait for review.
    dream = {"writePolicy": {"manual": "apply"}, **dream}
    path.write_text(json.dumps({"agents": {"defaults": {"dream": dream}}}), encoding="utf-8")
    cli.env["DREAM_CONFIG"] = str(path)


USER_IN_LYON = "# User\n\n## Profile\n\n- User lives in Lyon\n"


def _entry(cursor: int, when: str, text: str) -> HistoryEntry:
    return HistoryEntry(cursor, when, text)


def test_offline_run_keeps_a_dated_trail_only_when_asked(isolated: Cli, tmp_path: Path) -> None:
    """datedTrail on: a correction said on 2026-04-03 lands as "(was Lyon until 2026-04-03)", and
    a second one said on 2026-06-01 adds to it, newest first. Off (the default): the old value
    is replaced and no trail is written."""
    entry = _entry(1, "2026-04-03 09:00", "- [correction] User lives in Porto (was Lyon)")
    make_workspace(isolated, [entry], files={"USER.md": USER_IN_LYON})
    _config(isolated, datedTrail=True)
    assert isolated.run("run", env=OFFLINE).exit_code == 0
    assert "- User lives in Porto (was Lyon until 2026-04-03)\n" in _user_md(isolated)
    with (isolated.workspace / "memory" / "history.jsonl").open("a", encoding="utf-8") as history:
        history.write(_entry(2, "2026-06-01 18:30", "- [correction] User lives in Madrid (was Porto)").to_json_line())
        history.write("\n")
    assert isolated.run("run", env=OFFLINE).exit_code == 0
    text = _user_md(isolated)
    assert "- User lives in Madrid (was Porto until 2026-06-01; Lyon until 2026-04-03)\n" in text
    assert "Lives in Porto" not in text.replace("Madrid (was Porto", "")

    other = Cli(isolated.home, tmp_path / "off", dict(isolated.env))
    make_workspace(other, [entry], files={"USER.md": USER_IN_LYON})
    _config(other)
    assert other.run("run", env={**OFFLINE, "DREAM_WORKSPACE": str(other.workspace)}).exit_code == 0
    off = (other.workspace / "USER.md").read_text(encoding="utf-8")
    assert "- User lives in Porto\n" in off and "until" not in off


def test_a_real_model_is_asked_for_the_trail_only_when_it_is_on(isolated: Cli) -> None:
    """With datedTrail on, phase 2's system prompt carries the dated-trail rule and the fact it is
    handed reads "(was Lyon until 2026-04-03)"; the line the model writes keeps it. Off, the
    rule is absent and the fact keeps its plain "(was Lyon)"."""
    seen: dict[str, list[str]] = {"system": [], "fact": []}

    def edit(request: dict[str, Any]) -> Reply:
        if any(m["role"] == "tool" for m in request["messages"]):
            return Reply("Done.")
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        fact = re.search(r"^1\. \[USER\] (.+)$", user, re.MULTILINE)
        assert fact is not None
        seen["system"].append(system)
        seen["fact"].append(fact[1])
        return Reply(
            tool_calls=[
                tool_call(
                    "edit_file", path="USER.md", old_text="- User lives in Lyon\n", new_text=f"- {fact[1]}\n", facts=[1]
                )
            ]
        )

    phase1 = Reply("[USER] User lives in Porto (was Lyon) [from 1]")
    for on in (True, False):
        make_workspace(isolated, ["user: I moved from Lyon to Porto"], files={"USER.md": USER_IN_LYON})
        with ScriptedLLMServer(responder=by_phase(lambda _: phase1, edit)) as server:
            use_preset(isolated, server)
            config = isolated.home / "dream.json"
            import json

            data = json.loads(config.read_text())
            data["agents"]["defaults"]["dream"] = {"datedTrail": on, "writePolicy": {"manual": "apply"}}
            config.write_text(json.dumps(data))
            code, report = isolated.run_json("run")
        assert code == 0 and report["batches"][0]["outcome"] == "committed", report
        if on:
            assert "- User lives in Porto (was Lyon until 2026-04-03)\n" in _user_md(isolated)
            shutil.rmtree(isolated.workspace)
    assert ["Dated trail:" in s for s in seen["system"]] == [True, False]
    assert seen["fact"] == ["User lives in Porto (was Lyon until 2026-04-03)", "User lives in Porto (was Lyon)"]
