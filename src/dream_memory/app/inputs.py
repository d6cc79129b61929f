"""The numbers a caller hands a service (a run's batch size and budgets, a consolidation's or a
context block's token budget), judged here and nowhere else: the CLI, the API and MCP pass them
on as given, so each face gives the same answer, exit 2, with the same message. Where a config
setting stands for the same number, its ``Range`` (settings/schema.py) is the rule, so a value the
file refuses is refused as an argument too, and the other way round.
"""

from __future__ import annotations

import typing
from typing import Any

from dream_memory.errors import InputError
from dream_memory.settings.quick import within
from dream_memory.settings.schema import Range

__all__ = ["check_number", "setting_range"]


def setting_range(section: type, name: str) -> Range:
    """The ``Range`` of the schema field ``section.name``."""
    hint = typing.get_type_hints(section, include_extras=True)[name]
    return next(m for m in hint.__metadata__ if isinstance(m, Range))


def check_number(
    value: Any, what: str, bounds: Range, *, whole: bool, names: tuple[str, str], hint: str | None = None
) -> Any:
    """``value`` when it is a number (an int when ``whole``; never a bool or a string: "500" is
    not 500) inside ``bounds`` and finite; else InputError (exit 2) saying what ``what`` allows.
    ``names`` are the argument's (the API's keyword) and the CLI's flag: a face names the number
    as it takes it, the CLI by both."""
    kind = (int,) if whole else (int, float)
    allowed = f"{'a whole number' if whole else 'a number'}, {bounds.describe()}"
    if type(value) not in kind or not within(bounds, value):
        argument, flag = names
        raise InputError.naming(
            lambda o: (
                f"{what} ({', '.join(dict.fromkeys(n for n in (argument, o(flag)) if n))}) must be {allowed} "
                f"(got {value!r})",
                hint,
            )
        )
    return value
