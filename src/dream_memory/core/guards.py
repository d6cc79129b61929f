"""When a batch's edits must wait for a person instead of landing (docs/reference/report.md, "How a batch ends").

A batch is held when it would delete a file, remove more net lines than ``deletionGuard`` allows,
give a skill ``always: true`` (it then reaches every prompt), or change SOUL.md while
``holdSoulChanges`` is set. Why: other assistants' background consolidation deleted 23
memory files in a day, and 745 of 931 memories in two days.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dream_memory.core import layout
from dream_memory.core.bounded import split_lines
from dream_memory.core.frontmatter import is_always_on, may_be_always_on

__all__ = ["GuardSettings", "hold_reasons", "is_always_on", "net_removed"]


@dataclass(frozen=True)
class GuardSettings:
    max_share: float = 0.3
    min_lines: int = 10
    hold_soul_changes: bool = False
    window_batches: int = 10  # the deletion guard also weighs Dream's last N batches (0: this batch only)


@dataclass(frozen=True)
class RecentRemovals:
    """What Dream's recent batches (the deletion window) did to one file: net lines removed, and
    the file's line count before the first of them."""

    removed: int
    baseline: int
    batches: int


def _count_lines(text: str | None) -> int:
    return 0 if not text else len(split_lines(text))


def net_removed(before: str | None, after: str | None) -> int:
    """Lines in ``before`` missing from ``after`` minus lines added (multiset difference)."""
    old = split_lines(before or "")
    new = split_lines(after or "")
    remaining: dict[str, int] = {}
    for line in new:
        remaining[line] = remaining.get(line, 0) + 1
    removed = 0
    for line in old:
        if remaining.get(line, 0) > 0:
            remaining[line] -= 1
        else:
            removed += 1
    added = sum(remaining.values())
    return removed - added


def hold_reasons(
    changes: Mapping[str, tuple[str | None, str | None]],
    settings: GuardSettings,
    *,
    is_template: Callable[[str, str | None], bool] = lambda path, text: False,
    recent: Mapping[str, RecentRemovals] | None = None,
) -> list[str]:
    """Why these changes (path -> (before, after)) must be held; empty when they may land.

    A durable file that still holds its template is exempt from the line guard: the first Dream
    on a fresh workspace replaces template lines on purpose. ``recent`` holds what Dream's last
    batches removed from each file: a batch that removes lines is held when, added to them, the
    removal passes the same limits (a model removing a few lines per batch, "salami" deletion,
    is stopped as surely as one removing them at once).
    """
    reasons: list[str] = []
    for path, (before, after) in sorted(changes.items()):
        if before is not None and after is None:
            reasons.append(f"would delete {path}")
            continue
        if path == layout.SOUL and settings.hold_soul_changes and before != after:
            reasons.append("changes SOUL.md while holdSoulChanges is set")
        # Every form nanobot honours (always: true, metadata.nanobot.always, metadata.openclaw.always,
        # as YAML: flow maps, quoted keys and values), and an always key in broken YAML too.
        if path.startswith(layout.SKILLS_DIR + "/") and may_be_always_on(after) and not is_always_on(before):
            reasons.append(f"would make {path} always-on (an always-on skill reaches every prompt)")
        if before is None or is_template(path, before):
            continue
        lost = net_removed(before, after)
        total = _count_lines(before)
        if lost >= settings.min_lines and total and lost > settings.max_share * total:
            reasons.append(f"would remove {lost} of {total} lines from {path}")
            continue
        window = (recent or {}).get(path)
        if lost > 0 and window is not None and window.batches:
            overall = window.removed + lost
            baseline = max(window.baseline, total)
            if overall >= settings.min_lines and baseline and overall > settings.max_share * baseline:
                reasons.append(
                    f"would remove {overall} of {baseline} lines from {path} over the last "
                    f"{window.batches + 1} batches ({lost} in this one)"
                )
    return reasons


def window_removals(
    path: str,
    versions: Iterable[tuple[str | None, str | None]],
    *,
    is_template: Callable[[str, str | None], bool] = lambda path, text: False,
) -> RecentRemovals:
    """The deletion window of ``path`` from Dream's recent batches, newest first, each given as
    (text before, text after). A batch that replaced the file's template does not count."""
    removed = batches = 0
    baseline = 0
    for before, after in versions:
        if before == after:
            continue
        batches += 1
        if before is not None and not is_template(path, before):
            # Only batches that removed count: lines another batch added earn no credit.
            removed += max(net_removed(before, after), 0)
        baseline = _count_lines(before)
    return RecentRemovals(removed, baseline, batches)
