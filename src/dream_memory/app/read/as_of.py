"""``--as-of DATE``: the commit a read goes to when it asks for the store as it was on a day
(docs/read-side.md, "Reading the past"). The last commit, along HEAD's first parents, made at or
before the end of that day (or that exact time); each commit is compared by its own local time,
as ``git log`` and ``dream log`` show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from dream_memory.core.dates import parse_as_of
from dream_memory.errors import InputError, UsageError


@dataclass(frozen=True)
class AsOfCommit:
    """The commit ``--as-of`` chose, and when it was made (its local time, as git shows it)."""

    sha: str
    time: str
    subject: str


def _local(seconds: int, offset: int) -> str:
    return datetime.fromtimestamp(seconds, timezone(timedelta(seconds=offset))).strftime("%Y-%m-%d %H:%M:%S %z")


def commit_as_of(root: Path, text: str) -> AsOfCommit:
    """The commit the store read ``--as-of text`` goes to; InputError (exit 2) for a bad date,
    a store without commits, or a date before the first commit."""
    # Imported here: dulwich is loaded only by a read that asks for the past (`dream search` and
    # `dream entity` without --at/--as-of start without it).
    from dream_memory.adapters.git import open_readonly

    moment = parse_as_of(text)
    git = open_readonly(root)
    if git is None:
        raise UsageError.naming(
            lambda o: (
                f"{o('--as-of')} needs a store versioned in git, and {root} is not inside a git repository",
                f"drop {o('--as-of')} to read the files as they are now",
            )
        )
    try:
        shallow = git.is_shallow
        oldest = None
        for commit in git.first_parent_chain():
            if moment.includes(commit.commit_time, commit.commit_timezone):
                subject = commit.message.decode("utf-8", errors="replace").split("\n", 1)[0]
                return AsOfCommit(
                    commit.id.decode("ascii"), _local(commit.commit_time, commit.commit_timezone), subject
                )
            oldest = commit
    finally:
        git.close()
    if oldest is None:
        raise InputError.naming(
            lambda o: (
                f"{o('--as-of')} {text}: the store has no commits yet",
                f"drop {o('--as-of')}, or run `dream run` first",
            )
        )
    first = _local(oldest.commit_time, oldest.commit_timezone)
    where = " (the oldest this shallow clone holds: `git fetch --unshallow` brings the rest)" if shallow else ""
    raise InputError.naming(
        lambda o: (
            f"{o('--as-of')} {text} is before the store's first commit, made {first}{where}",
            "give a date on or after that one",
        )
    )
