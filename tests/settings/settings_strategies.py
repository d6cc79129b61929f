"""Config files shaped like ``settings.schema`` for property tests: every section and field, under
its snake_case or camelCase key, with values valid, at and past their bounds, of the wrong type,
or ones pydantic coerces ("5", 1 for true), and unknown keys mixed in."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from hypothesis import strategies as st

from dream_memory.settings import schema
from dream_memory.settings.quick import camel

# Fixed lists (hypothesis draws each about as often: in a one_of it favours the numbers).
_ODD_SCALARS = [None, True, False, 0, 1, -1, 2.5, 1e300, 10**400]
_ODD_OTHERS = ["", "x", "5", "1.5", "true", "apply", "hold", "tools", "a <b>", "[", "Ann <a@b>", [], {}, ["("]]
ODD = st.sampled_from([*_ODD_SCALARS, *_ODD_OTHERS])


def _mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` three times in four, else an odd value: a file is accepted only when all of its
    values are, so most must be valid for the odd one to be the file's only problem."""
    return st.sampled_from((0, 1, 2, 3)).flatmap(lambda n: ODD if n == 0 else valid)


def _bounds(meta: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    edges = [v for m in meta if isinstance(m, schema.Range) for v in (m.ge, m.gt, m.le) if v is not None]
    near = [e + d for e in edges for d in (-1, 0, 1, 0.5)]
    return st.sampled_from(near) if near else st.nothing()


def _value(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return st.one_of(_value(args[0], depth), _bounds(hint.__metadata__))
    if dataclasses.is_dataclass(hint):
        return sections(typing.cast(type, hint), depth + 1) if depth < 6 else st.just({})
    if origin is typing.Literal:
        return _mostly(st.sampled_from(args))
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_value(a, depth) for a in args if a is not type(None)), st.none())
    if origin is dict:
        keys = st.sampled_from(["a", "b*", "USER.md", "cli:*", "night"])
        return _mostly(st.dictionaries(keys, _value(args[1], depth), max_size=2))
    if origin is list:
        return _mostly(st.lists(st.sampled_from(["ok", "a+", "(", "[a-z]"]), max_size=3))
    # small sets, like ODD's: hypothesis does not repeat itself, so a wide range would crowd out the rest
    plain = {
        bool: st.booleans(),
        int: st.sampled_from([0, 1, 2, 5, 20, 1000, 8000, 300_000]),
        float: st.sampled_from([0.0, 0.5, 1, 2, 3.5, 120.0, 1e6]),
        str: st.sampled_from(["offline", "night", "openai/gpt", "Ann <a@b>", "x <y>", "${K}"]),
    }
    return _mostly(plain[hint]) if hint in plain else ODD


def _section_of(hint: Any) -> tuple[type | None, bool]:
    """The section a field holds (itself, or as the values of a dict), and whether by name."""
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg, False
        if typing.get_origin(arg) is dict:
            inner, _ = _section_of(typing.get_args(arg)[1])
            if inner is not None:
                return inner, True
    return None, False


@st.composite
def _leaf(draw: st.DrawFn, section: type) -> tuple[list[str], Any]:
    """One key path down the schema (a random walk, snake or camel keys) and the value it ends on."""
    path: list[str] = []
    while True:
        hints = typing.get_type_hints(section, include_extras=True)
        fields = dataclasses.fields(section)
        # half the walks go down a section, so the deep fields (agents.defaults.dream.*) get drawn
        deeper = [f for f in fields if _section_of(hints[f.name])[0] is not None]
        f = draw(st.sampled_from(deeper if deeper and draw(st.booleans()) else fields))
        path.append(draw(st.sampled_from([f.name, camel(f.name), f.name, camel(f.name), "zzz"])))
        inner, named = _section_of(hints[f.name])
        if inner is None or path[-1] == "zzz" or draw(st.integers(0, 5)) == 0:
            return path, draw(_value(hints[f.name], 6))
        if named:
            path.append(draw(st.sampled_from(["a", "night", "USER.md", "b*"])))
        section = inner


def configs() -> st.SearchStrategy[dict[str, Any]]:
    """Whole config files: a few leaves anywhere in the schema, merged into one mapping."""

    def merge(leaves: list[tuple[list[str], Any]]) -> dict[str, Any]:
        root: dict[str, Any] = {}
        for path, value in leaves:
            node = root
            for key in path[:-1]:
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            node[path[-1]] = value
        return root

    return st.one_of(st.lists(_leaf(schema.Config), min_size=1, max_size=4).map(merge), sections(schema.Config))


def sections(section: type, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping for ``section``: some of its fields (either key), maybe an unknown key."""
    hints = typing.get_type_hints(section, include_extras=True)
    items = [
        st.tuples(st.sampled_from([f.name, camel(f.name)]), _value(hints[f.name], depth))
        for f in dataclasses.fields(section)
    ]
    unknown = st.tuples(st.sampled_from(["zzz", "pinned", "maxBatch", "MaxShare"]), ODD)
    return st.lists(st.one_of(*items, unknown), max_size=6).map(dict)


def leaf_paths(section: type = schema.Config, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field's key path under its camelCase key (a dict of sections by the key "night")."""
    hints = typing.get_type_hints(section, include_extras=True)
    found: list[tuple[str, ...]] = []
    for f in dataclasses.fields(section):
        path = (*prefix, camel(f.name))
        inner, named = _section_of(hints[f.name])
        found.append(path)
        if inner is not None:
            found += leaf_paths(inner, (*path, "night") if named else path)
    return found


ODD_VALUES = [*_ODD_SCALARS, *_ODD_OTHERS, 3, 0.5, 20, 21, 1e6, float("inf"), "${K}", "offline"]


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for the path ("a", "b")."""
    for key in reversed(path):
        value = {key: value}
    return typing.cast(dict[str, Any], value)
