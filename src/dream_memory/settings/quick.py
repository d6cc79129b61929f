"""The quick check of a config file: most files are plainly valid, and those are read into
``settings.schema``'s dataclasses here, without pydantic (about 80 ms of every command's start).

It accepts only what it is sure of: exact JSON types (an int for an int, a string for a string),
values inside their ``Range``, each key once. Anything else, whether an error or a value pydantic
would coerce ("5" for 5, 1 for true), raises ``Unsure`` and pydantic decides, so every message
and every coercion stays pydantic's. tests/settings compares the two over generated files.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from dream_memory.settings import schema

__all__ = ["Unsure", "camel", "check_config"]


class Unsure(Exception):
    """This input is not plainly valid: the full (pydantic) validation decides."""


def camel(name: str) -> str:
    """A field's camelCase key (pydantic's ``to_camel`` for the schema's plain snake_case names)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@functools.cache
def _fields(section: type) -> dict[str, tuple[str, Any]]:
    """key (the name or its camelCase alias) -> (the field's name, its type)."""
    hints = typing.get_type_hints(section, include_extras=True)
    keys: dict[str, tuple[str, Any]] = {}
    for f in dataclasses.fields(section):
        keys[f.name] = keys[camel(f.name)] = (f.name, hints[f.name])
    return keys


def check_config(data: Mapping[str, Any]) -> tuple[schema.Config, dict[int, list[str]]]:
    """``data`` as a ``Config``, and the unknown keys of each section read from it (by the
    section's ``id``); ``Unsure`` unless every value is plainly valid."""
    extras: dict[int, list[str]] = {}
    config: schema.Config = _section(schema.Config, data, extras)
    return config, extras


def _section(section: type, data: Any, extras: dict[int, list[str]]) -> Any:
    if type(data) is not dict:
        raise Unsure
    keys = _fields(section)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in data.items():
        if key not in keys:
            unknown.append(key)
            continue
        name, hint = keys[key]
        if name in values:  # the name and its alias both given: which wins is pydantic's rule
            raise Unsure
        values[name] = _value(hint, raw, extras)
    try:
        made = section(**values)
    except TypeError:  # a required field (a preset's model) is missing
        raise Unsure from None
    extras[id(made)] = unknown
    return made


def _value(hint: Any, raw: Any, extras: dict[int, list[str]]) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _annotated(args[0], hint.__metadata__, raw, extras)
    if dataclasses.is_dataclass(hint):
        return _section(typing.cast(type, hint), raw, extras)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if raw is None and len(others) < len(args):
            return None
        if len(others) != 1:
            raise Unsure
        return _value(others[0], raw, extras)
    if origin is typing.Literal:
        if type(raw) is str and raw in args:
            return raw
        raise Unsure
    if origin is dict and type(raw) is dict:
        return {k: _value(args[1], v, extras) for k, v in raw.items()}
    if origin is list and type(raw) is list:
        return [_value(args[0], v, extras) for v in raw]
    return _scalar(hint, raw)


def _scalar(hint: Any, raw: Any) -> Any:
    if hint is float and type(raw) in (int, float):
        try:
            value = float(raw)
        except OverflowError:  # an integer too long for a float: pydantic's message
            raise Unsure from None
        if math.isfinite(value):
            return value
    if hint in (str, int, bool) and type(raw) is hint:
        return raw
    raise Unsure


def _annotated(base: Any, metadata: tuple[Any, ...], raw: Any, extras: dict[int, list[str]]) -> Any:
    for meta in metadata:
        if isinstance(meta, schema.Check) and meta.before:
            raw = _checked(meta, raw)
    value = _value(base, raw, extras)
    for meta in metadata:
        if isinstance(meta, schema.Range) and value is not None and not within(meta, value):
            raise Unsure
        if isinstance(meta, schema.Check) and not meta.before:
            value = _checked(meta, value)
    return value


def _checked(meta: schema.Check, value: Any) -> Any:
    try:
        return meta.check(value)
    except ValueError:
        raise Unsure from None


def within(bounds: schema.Range, value: float) -> bool:
    """``value`` inside ``bounds``: a finite number, as the config file's are (a NaN or an
    infinity is inside no bounds)."""
    return (
        (not isinstance(value, float) or math.isfinite(value))
        and (bounds.ge is None or value >= bounds.ge)
        and (bounds.gt is None or value > bounds.gt)
        and (bounds.le is None or value <= bounds.le)
    )
