"""Dream's schedule: ``cron`` or ``intervalH`` from the config, as one portable cron expression.

Pure: no clock, no environment, no files. The expression is the 5-field form that both GitHub
Actions (``on.schedule``) and a Kubernetes CronJob (``spec.schedule``) accept, so macros such as
``@daily`` are expanded, and forms one of them refuses (``?``, ``L``, ``W``, ``#``, ``a/n``
without a range, day-of-week 7, a time-zone prefix) are refused here with the field named.

``intervalH`` N becomes the coarsest expression that never waits longer than N hours between two
runs (cron cannot express every interval exactly, and a late Dream is worse than an early one):

- N hours dividing 24 (1, 2, 3, 4, 6, 8, 12): ``0 */N * * *`` (1 -> ``0 * * * *``), exact;
- other whole hours below 24 round *down* to the largest divisor of 24 (5 -> every 4 h,
  7 -> every 6 h, 9..11 -> every 8 h, 13..23 -> every 12 h);
- fractions of an hour below 1 h round down to a divisor of 60 minutes (0.5 -> ``*/30 * * * *``,
  0.3 (18 min) -> every 15 min); other fractions above 1 h round down to whole hours first;
- 24 h and longer: whole days D, ``0 0 */D * *`` (day of month, so the gap at a month's end is
  shorter, never longer), 24 -> ``0 0 * * *``, 31 days or more -> monthly ``0 0 1 * *``.

Set ``cron`` for anything else (a fixed time of day, weekdays only, weekly): it always wins.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dream_memory.core.frontmatter import yaml_scalar
from dream_memory.core.schedule_templates import GITHUB_WORKFLOW_TEMPLATE, K8S_CRONJOB_TEMPLATE
from dream_memory.errors import ConfigError, UsageError

CRON_SETTING = "agents.defaults.dream.cron"
INTERVAL_SETTING = "agents.defaults.dream.intervalH"

FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {name: i + 1 for i, name in enumerate(_MONTHS)},
    {name: i for i, name in enumerate(_DAYS)},
)
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DIVISORS_24 = (1, 2, 3, 4, 6, 8, 12)
_DIVISORS_60 = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
_ITEM = re.compile(r"^(?P<base>\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/(?P<step>[0-9]+))?$")


class CronError(ConfigError):
    """A cron expression that GitHub Actions or Kubernetes would refuse (exit 2)."""

    def __init__(self, message: str, *, field: int | None = None, setting: str = CRON_SETTING) -> None:
        where = f"{setting}: " if setting else ""
        if field is not None:
            where += f"field {field + 1} ({FIELD_NAMES[field]}): "
        hint = (
            f"a finite number of hours above 0, e.g. 2 (every 2 hours); or set {CRON_SETTING}, which wins"
            if setting == INTERVAL_SETTING
            else 'five fields "minute hour day-of-month month day-of-week", e.g. "0 */2 * * *" '
            '(every 2 hours) or "30 3 * * 1-5" (03:30 on weekdays), or a macro such as @daily'
        )
        super().__init__(where + message, hint=hint)
        self.field = field


@dataclass(frozen=True)
class Schedule:
    """The effective schedule: a 5-field cron expression and where it came from."""

    expression: str
    source: str  # CRON_SETTING or INTERVAL_SETTING
    exact: bool  # False when an intervalH had to be rounded down to fit cron
    note: str | None = None  # a sentence for humans when something was rounded or expanded


def _value(token: str, index: int) -> int:
    names = _NAMES[index]
    if token in names:
        return names[token]
    if not token.isdigit():
        if names:
            allowed = ", ".join(names)
            raise CronError(f"{token!r} is neither a number nor one of {allowed}", field=index)
        raise CronError(f"{token!r} is not a number", field=index)
    low, high = _BOUNDS[index]
    value = int(token)
    if not low <= value <= high:
        extra = " (use 0 for Sunday)" if index == 4 and value == 7 else ""
        raise CronError(f"{value} is out of range {low}-{high}{extra}", field=index)
    return value


def _check_field(text: str, index: int) -> str:
    low, high = _BOUNDS[index]
    items = text.lower().split(",")
    for item in items:
        if not item:
            raise CronError(f"{text!r} has an empty list item", field=index)
        if any(ch in item for ch in "?lw#") and not _NAMES[index]:
            raise CronError(f"{item!r} uses ?, L, W or # which GitHub Actions does not accept", field=index)
        match = _ITEM.match(item)
        if match is None:
            raise CronError(f"{item!r} is not *, N, N-M or one of them with /STEP", field=index)
        base, step = match.group("base"), match.group("step")
        if base != "*":
            if "-" in base:
                first, last = (_value(part, index) for part in base.split("-", 1))
                if first > last:
                    raise CronError(f"range {base!r} runs backwards", field=index)
                span = last - first + 1
            else:
                _value(base, index)
                if step is not None:
                    raise CronError(f"{item!r}: a step needs * or a range (write {base}-{high}/{step})", field=index)
                span = 1
        else:
            span = high - low + 1
        if step is not None:
            size = int(step)
            if size < 1 or size > span:
                raise CronError(f"step {size} in {item!r} must be between 1 and {span}", field=index)
    return text.lower()


def validate_cron(expression: str, *, setting: str = CRON_SETTING) -> str:
    """The expression normalised (macros expanded, single spaces, lower case), or CronError."""
    text = " ".join(expression.split())
    if not text:
        raise CronError("is empty", setting=setting)
    if text.startswith("@"):
        if text.lower() == "@reboot":
            raise CronError("@reboot is not a schedule a job runner can keep", setting=setting)
        if text.lower() not in MACROS:
            raise CronError(f"unknown macro {text!r} (known: {', '.join(MACROS)})", setting=setting)
        return MACROS[text.lower()]
    if re.match(r"^(CRON_)?TZ=", text):
        raise CronError(
            "a time-zone prefix is not portable (Kubernetes has spec.timeZone; GitHub runs in UTC)",
            setting=setting,
        )
    fields = text.split(" ")
    if len(fields) != 5:
        raise CronError(f"has {len(fields)} fields; exactly 5 are needed", setting=setting)
    return " ".join(_check_field(field, i) for i, field in enumerate(fields))


def interval_to_cron(hours: float) -> tuple[str, bool]:
    """``intervalH`` as a cron expression that never waits longer; and whether it is exact."""
    if not math.isfinite(hours) or hours <= 0:
        raise CronError(f"must be a positive, finite number of hours (got {hours:g})", setting=INTERVAL_SETTING)
    minutes = hours * 60
    if minutes < 60:
        whole = max(1, math.floor(minutes + 1e-9))
        step = max(d for d in _DIVISORS_60 if d <= whole)
        exact = math.isclose(minutes, step)
        return ("* * * * *" if step == 1 else f"*/{step} * * * *"), exact
    if hours < 24:
        whole_h = math.floor(hours + 1e-9)
        step = max(d for d in _DIVISORS_24 if d <= whole_h)
        exact = math.isclose(hours, step)
        return ("0 * * * *" if step == 1 else f"0 */{step} * * *"), exact
    days = math.floor(hours / 24 + 1e-9)
    exact = math.isclose(hours, 24.0)
    if days == 1:
        return "0 0 * * *", exact
    if days >= 31:
        return "0 0 1 * *", False
    return f"0 0 */{days} * *", False


def _describe_hours(hours: float) -> str:
    return f"{hours:g} hour" + ("" if hours == 1 else "s")


def effective_schedule(cron: str | None, interval_h: float) -> Schedule:
    """``cron`` wins over ``intervalH`` (docs/reference/config.md)."""
    if cron is not None and cron.strip():
        expression = validate_cron(cron)
        note = None
        if cron.strip().startswith("@"):
            note = f"{cron.strip()} expanded to {expression!r} (GitHub Actions has no cron macros)"
        return Schedule(expression, CRON_SETTING, True, note)
    expression, exact = interval_to_cron(interval_h)
    note = None
    if not exact and interval_h * 60 < 1:
        # Cron's finest step is a minute: the promise "never further apart than intervalH" cannot
        # be kept, so say what the expression really does.
        note = (
            f"intervalH {interval_h:g} is shorter than a minute, the finest step cron has; "
            f"{expression!r} runs once a minute (0.0167 hours apart), the most often a schedule can "
            f"(set {CRON_SETTING} for a precise schedule)"
        )
    elif not exact:
        note = (
            f"intervalH {interval_h:g} cannot be expressed exactly in cron; {expression!r} runs more "
            f"often, so runs are never more than {_describe_hours(interval_h)} apart "
            f"(set {CRON_SETTING} for a precise schedule)"
        )
    return Schedule(expression, INTERVAL_SETTING, exact, note)


def min_gap_minutes(expression: str) -> int | None:
    """Minutes between runs for the simple ``*/N`` minute forms, else None (for GitHub's 5-minute floor)."""
    minute, hour = expression.split(" ")[:2]
    if hour != "*":
        return None
    if minute == "*":
        return 1
    if minute.startswith("*/"):
        return int(minute[2:])
    return None


# ----- ready-to-use files, filled with the expression ---------------------------------------------
# The same text as docs/examples/dream-pr.yml and deploy/kubernetes/cronjob-pvc.yaml (a test keeps
# them in step, core.schedule_templates holds them), with the schedule and the action reference
# filled in.

DEFAULT_ACTION = "dream-memory/dream-memory"


_FULL_SHA = re.compile(r"@[0-9a-f]{40}$")
UNPINNED_NOTE = "  # zizmor: ignore[unpinned-uses] (a release tag; pin its SHA)"


# Docker's reference grammar (distribution/reference): [host[:port]/]path[/path...][:tag][@digest].
_IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?/)?"
    rf"{_IMAGE_PATH}(?:/{_IMAGE_PATH})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
# What `uses:` takes for an action in another repository: OWNER/REPO[/PATH]@REF.
_ACTION = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*"
    r"@[A-Za-z0-9_][A-Za-z0-9._/+-]*$"
)


def check_action_ref(action_ref: str) -> str:
    """The ``--action`` reference, or UsageError (exit 2) saying what one looks like."""
    if not _ACTION.match(action_ref) or ".." in action_ref or action_ref.endswith((".", "/", ".lock")):
        raise UsageError(
            f"--action {action_ref!r} is not an action reference GitHub's `uses:` accepts",
            hint=f"give OWNER/REPO@REF, e.g. {DEFAULT_ACTION}@v0.1.0, or pinned to a release's full "
            "commit SHA: OWNER/dream-memory@FULL_COMMIT_SHA (40 hex digits)",
        )
    return action_ref


def check_image(image: str) -> str:
    """The ``--image`` reference, or UsageError (exit 2) saying what one looks like."""
    if not _IMAGE.match(image) or len(image) > 255:
        raise UsageError(
            f"--image {image!r} is not a container image reference",
            hint="give [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST] with a lower-case NAME and no spaces, "
            "e.g. registry.example.com/team/dream-memory:0.1.0",
        )
    return image


def render_github_workflow(expression: str, action_ref: str) -> str:
    """The pull-request workflow; an action reference not pinned to a full SHA says so in place."""
    ref = yaml_scalar(check_action_ref(action_ref))
    uses = ref if _FULL_SHA.search(action_ref) else ref + UNPINNED_NOTE
    return GITHUB_WORKFLOW_TEMPLATE.replace("@@CRON@@", expression).replace("@@ACTION@@", uses)


def render_k8s_cronjob(expression: str, image: str) -> str:
    return K8S_CRONJOB_TEMPLATE.replace("@@CRON@@", expression).replace("@@IMAGE@@", yaml_scalar(check_image(image)))
