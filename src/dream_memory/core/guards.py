"""When a batch's edits must wait for a person instead of landing (CONTRACT section 6a).

A batch is held when it would delete a file, remove more net lines than ``deletionGuard`` allows,
give a skill ``always: true`` (it then reaches every prompt), or change SOUL.md while
``holdSoulChanges`` is set. LESSONS: other assistants' background consolidation deleted 23
memory files in a day, and 745 of 931 memories in two days.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dream_memory.core import layout
from dream_memory.core.frontmatter import is_always_on, may_be_always_on

__all__ = ["GuardSettings", "hold_reasons", "is_always_on", "net_removed"]


@dataclass(frozen=True)
class GuardSettings:
    max_share: float = 0.3
    min_lines: int = 10
    hold_soul_changes: bool = False


def _count_lines(text: str | None) -> int:
    return 0 if not text else len(text.splitlines())


def net_removed(before: str | None, after: str | None) -> int:
    """Lines in ``before`` missing from ``after`` minus lines added (multiset difference)."""
    old = (before or "").splitlines()
    new = (after or "").splitlines()
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
) -> list[str]:
    """Why these changes (path -> (before, after)) must be held; empty when they may land.

    A durable file that still holds its template is exempt from the line guard: the first Dream
    on a fresh workspace replaces template lines on purpose.
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
    return reasons
