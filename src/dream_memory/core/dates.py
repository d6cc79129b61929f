"""Relative dates made absolute, and the dates ``--as-of`` reads (docs/memory-model.md, "Dated
facts"). Pure: strings and dates in, strings and dates out; the day a fact was said comes from
its history entries' ``timestamp``, never from a clock.

A fact is read later than it was said: "remind me tomorrow" stored as it is means a different
day every time memory is read. ``absolute_dates`` rewrites the expressions below into calendar
dates counted from the day of the entry that said them (English only; anything else is left as
it is, which is never worse than before):

    today, tonight, this morning|afternoon|evening   -> 2026-04-03
    tomorrow, yesterday, the day after tomorrow,
    the day before yesterday                          -> 2026-04-04, 2026-04-02, ...
    in 3 days|weeks, 3 days|weeks ago (digits, a, one..twelve)
    next|this|last Friday (any weekday)               -> Friday 2026-04-10
    next|this|last week                               -> the week of 2026-04-06 (its Monday)
    this|next|last weekend                            -> the weekend of 2026-04-04 (its Saturday)
    next|this|last month, next|this|last year         -> 2026-05, 2027

"next Friday" is the first Friday after the entry's day, "this Friday" the first on or after it,
"last Friday" the last before it. A bare weekday ("on Friday") is left alone: it may be either.
Day expressions read "on 2026-04-04" unless a preposition already stands before them ("by
tomorrow" -> "by 2026-04-04"). Absolute dates match nothing, so rewriting twice changes nothing.

This is written by hand rather than with dateparser or parsedatetime: those parse a string that
*is* a date, or search free text with many false hits ("may", "second", "now"), pull in large
dependencies, and neither rewrites a span in place; the set above is small, fixed and tested.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from dream_memory.errors import InputError

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBERS) + r")"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_PREPOSITIONS = frozenset(
    {
        "on",
        "by",
        "until",
        "till",
        "til",
        "from",
        "since",
        "before",
        "after",
        "for",
        "of",
        "to",
        "in",
        "during",
        "over",
        "at",
    }
)

_EXPRESSION = re.compile(
    r"\b(?:"
    r"(?P<after2>the\s+day\s+after\s+tomorrow)"
    r"|(?P<before2>the\s+day\s+before\s+yesterday)"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?P<yesterday>yesterday)"
    r"|(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))"
    r"|in\s+" + _COUNT + r"\s+(?P<later_unit>days?|weeks?)"
    r"|(?P<count_ago>\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?P<ago_unit>days?|weeks?)\s+ago"
    r"|(?P<which>next|this|last)\s+"
    r"(?:" + _WEEKDAY + r"|(?P<period>week|weekend|month|year))"
    r")\b",
    re.IGNORECASE,
)


def entry_day(timestamp: str) -> date | None:
    """The calendar day of a history entry's ``timestamp`` ("2026-04-03 10:15", ISO forms too),
    or None when it holds no date."""
    match = re.match(r"\s*(\d{4})-(\d{2})-(\d{2})", timestamp or "")
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def weekday_name(day: date) -> str:
    return WEEKDAYS[day.weekday()].capitalize()


def has_relative_dates(text: str) -> bool:
    return _EXPRESSION.search(text) is not None


def expressions(text: str) -> list[str]:
    """The relative expressions ``text`` holds, lowercased, in order."""
    return [" ".join(m.group().casefold().split()) for m in _EXPRESSION.finditer(text)]


def _count(value: str) -> int:
    return int(value) if value.isdigit() else _NUMBERS[value.casefold()]


def _days(unit: str) -> int:
    return 7 if unit.casefold().startswith("week") else 1


def _month(day: date, step: int) -> str:
    index = day.year * 12 + day.month - 1 + step
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def _weekday(day: date, which: str, name: str) -> date:
    target = WEEKDAYS.index(name.casefold())
    ahead = (target - day.weekday()) % 7
    if which == "next":
        return day + timedelta(days=ahead or 7)
    if which == "this":
        return day + timedelta(days=ahead)
    return day - timedelta(days=(day.weekday() - target) % 7 or 7)


def _period(day: date, which: str, period: str) -> tuple[str, str]:
    """(the text, the preposition it reads with) for next|this|last week|weekend|month|year."""
    step = {"next": 1, "this": 0, "last": -1}[which]
    if period == "week":
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=step)
        return f"the week of {monday.isoformat()}", "in"
    if period == "weekend":
        saturday = day + timedelta(days=(5 - day.weekday()) % 7)
        if day.weekday() == 6 and step == 0:
            saturday = day - timedelta(days=1)  # said on a Sunday, "this weekend" is the one under way
        return f"the weekend of {(saturday + timedelta(weeks=step)).isoformat()}", "on"
    if period == "month":
        return _month(day, step), "in"
    return f"{day.year + step:04d}", "in"


def _resolve(match: re.Match[str], day: date) -> tuple[str, str]:
    """What one expression becomes, and the preposition it reads with ("on 2026-04-04")."""
    g = match.groupdict()
    offsets = {"after2": 2, "before2": -2, "tomorrow": 1, "yesterday": -1, "today": 0}
    for key, offset in offsets.items():
        if g[key]:
            return (day + timedelta(days=offset)).isoformat(), "on"
    if g["later_unit"]:
        return (day + timedelta(days=_count(g["count"]) * _days(g["later_unit"]))).isoformat(), "on"
    if g["ago_unit"]:
        return (day - timedelta(days=_count(g["count_ago"]) * _days(g["ago_unit"]))).isoformat(), "on"
    which = g["which"].casefold()
    if g["weekday"]:
        found = _weekday(day, which, g["weekday"])
        return f"{weekday_name(found)} {found.isoformat()}", "on"
    return _period(day, which, g["period"].casefold())


def absolute_dates(text: str, day: date) -> str:
    """``text`` with its relative date expressions written as dates counted from ``day``."""

    def replace(match: re.Match[str]) -> str:
        value, preposition = _resolve(match, day)
        before = text[: match.start()].rstrip().rsplit(None, 1)
        previous = before[-1].casefold() if before else ""
        # "by tomorrow" keeps its own preposition; "today's plan" is a noun, not a time.
        if previous in _PREPOSITIONS or text[match.end() : match.end() + 2] in ("'s", "’s"):
            return value
        capital = match.start() == 0 and match.group()[:1].isupper()
        return f"{preposition.capitalize() if capital else preposition} {value}"

    return _EXPRESSION.sub(replace, text)


@dataclass(frozen=True)
class Said:
    """One history entry a fact cites: its text and its timestamp."""

    content: str
    timestamp: str


def day_said(text: str, cited: Sequence[Said]) -> date | None:
    """The day a fact's relative dates count from: the day of the cited entry that holds the same
    expression (the latest such, when several do), else of the latest cited entry; None when no
    cited entry carries a date."""
    wanted = set(expressions(text))
    holding = [s for s in cited if wanted & set(expressions(s.content))]
    days = [d for s in holding or cited if (d := entry_day(s.timestamp)) is not None]
    return max(days) if days else None


# --- --as-of --------------------------------------------------------------------------------------

_AS_OF = re.compile(
    r"^\s*(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[T ](?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?)?\s*$"
)


@dataclass(frozen=True)
class AsOf:
    """A moment ``--as-of`` reads the store at. ``wall`` is a wall-clock time (naive): a commit is
    compared by its own local time, as git log shows it. With an offset, ``instant`` holds the
    exact moment instead (and ``wall`` is None)."""

    text: str
    wall: datetime | None
    instant: datetime | None

    def includes(self, commit_time: int, commit_offset_seconds: int) -> bool:
        """Whether a commit made at ``commit_time`` (epoch seconds; its zone's offset) is at or
        before this moment."""
        if self.instant is not None:
            return commit_time <= self.instant.timestamp()
        local = datetime.fromtimestamp(commit_time, timezone(timedelta(seconds=commit_offset_seconds)))
        assert self.wall is not None
        return local.replace(tzinfo=None) <= self.wall


def parse_as_of(text: str) -> AsOf:
    """``2026-04-03`` (the end of that day), ``2026-04-03 10:00`` or ``2026-04-03T10:00:30``
    (that minute or second, inclusive), optionally with ``Z`` or ``+02:00``; InputError otherwise."""
    match = _AS_OF.match(text)
    hint = "give a date as YYYY-MM-DD, or a time as 'YYYY-MM-DD HH:MM' (optionally :SS and an offset like +02:00)"
    if match is None:
        raise InputError.naming(lambda o: (f"{o('--as-of')} {text!r} is not a date", hint))
    try:
        day = date.fromisoformat(match["date"])
        if match["hour"] is None:
            wall = datetime(day.year, day.month, day.day, 23, 59, 59)
        else:
            wall = datetime(
                day.year, day.month, day.day, int(match["hour"]), int(match["minute"]), int(match["second"] or 59)
            )
    except ValueError as exc:
        reason = str(exc)  # the name ``exc`` is gone once the block ends, before a face words the error
        raise InputError.naming(lambda o: (f"{o('--as-of')} {text!r} is not a date: {reason}", hint)) from exc
    zone = match["zone"]
    if zone is None:
        return AsOf(text.strip(), wall, None)
    if zone == "Z":
        offset = timedelta(0)
    else:
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        offset = -offset if zone[0] == "-" else offset
        if int(digits[2:]) > 59 or abs(offset) >= timedelta(hours=24):
            raise InputError.naming(
                lambda o: (f"{o('--as-of')} {text!r} is not a date: the offset {zone} is no time zone", hint)
            )
    return AsOf(text.strip(), None, wall.replace(tzinfo=timezone(offset)))


# --- the dated trail ------------------------------------------------------------------------------

MAX_TRAIL = 3  # old values a line keeps: a trail is a reminder, git keeps the whole history
_DAY = r"\d{4}-\d{2}-\d{2}"
_UNDATED_WAS = re.compile(r"\((?:was|previously|formerly)\s+(?P<old>[^()]+?)\s*\)", re.IGNORECASE)
_TRAIL = re.compile(r"\s*\(was\s+(?P<items>[^()]*?\buntil\s+" + _DAY + r")\)", re.IGNORECASE)


def add_trail_date(text: str, day: date) -> str:
    """A correction's ``(was X)`` dated as the day it was said: ``(was X until 2026-04-03)``.
    A text already dated, or without ``(was ...)``, comes back unchanged."""

    def dated(match: re.Match[str]) -> str:
        if re.search(r"\buntil\s+" + _DAY, match["old"]):
            return match.group()
        return f"(was {match['old']} until {day.isoformat()})"

    return _UNDATED_WAS.sub(dated, text, count=1)


def split_trail(text: str) -> tuple[str, list[str]]:
    """``"Lives in Porto (was Lyon until 2026-04-03; Paris until 2025-01-10)"`` ->
    ``("Lives in Porto", ["Lyon until 2026-04-03", "Paris until 2025-01-10"])``."""
    match = _TRAIL.search(text)
    if match is None:
        return text, []
    items = [item.strip() for item in match["items"].split(";") if item.strip()]
    return (text[: match.start()] + text[match.end() :]).rstrip(), items


def merged_trail(new_line: str, old_line: str) -> str:
    """The line replacing ``old_line``: its own trail first, then the old line's, at most
    ``MAX_TRAIL`` old values in one pair of parentheses. A new line without a trail is unchanged."""
    text, items = split_trail(new_line)
    if not items:
        return new_line
    _, older = split_trail(old_line.rstrip("\n"))
    kept = list(dict.fromkeys([*items, *older]))[:MAX_TRAIL]
    return f"{text} (was {'; '.join(kept)})"
