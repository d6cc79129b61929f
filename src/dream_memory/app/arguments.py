"""The Python API's arguments, judged against the annotations of the method they are handed to.

Python itself checks no argument types: a wrong one travelled into a service and surfaced as a
TypeError or AttributeError from deep inside (``versions(limit="3")``, ``search(None)``) or, worse,
was taken as something else (``limit=True`` read as 1, a string iterated as its characters). One
rule, read from each method's own signature, so a method added later is judged too and no list of
checks can fall out of step with the annotations. The services still judge the values (a range,
a date); this decides only whether a value is of a kind the method takes at all.

The rules are stricter than ``isinstance``: a bool is not an integer (``True`` is a flag, not a
count), a string is not a list of strings, and None passes only where the annotation names it.
An int passes for a float (PEP 484's numeric tower). A Protocol (``ChatModel``, ``Clock``) is met
by any object with its members. An annotation this module does not know lets every value through:
the service behind it judges the value, as before.
"""

from __future__ import annotations

import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from dream_memory.errors import InputError

__all__ = ["checked_arguments", "wrap_public_methods"]

_Class = TypeVar("_Class", bound=type)

_SEQUENCES = {list, tuple, Sequence, Iterable, Collection}
_MAPPINGS = {dict, Mapping}
_UNIONS = {typing.Union, types.UnionType}
_SINGULAR = {bool: "True or False", int: "an integer", float: "a number", str: "a string", os.PathLike: "a path"}
_PLURAL = {bool: "booleans", int: "integers", float: "numbers", str: "strings", os.PathLike: "paths"}
# bool is a subclass of int, but True given as a count is a mistake, never a count of 1.
_NUMBERS: dict[Any, Callable[[Any], bool]] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}
# Longer strings are not shown: an argument may be a key or a token passed to the wrong place.
_SHOWN_CHARS = 20


def checked_arguments(names: Callable[[], Mapping[str, Any]]) -> Callable[[_Class], _Class]:
    """A class decorator: each public method (and ``__init__``) refuses an argument its
    annotations do not allow with an InputError naming the method, the argument, what was given
    and what is expected. ``names`` resolves the annotations' names that the defining module
    imports only for type checking; it is called once, at the first call of any method."""

    def decorate(cls: _Class) -> _Class:
        return wrap_public_methods(
            cls, lambda name, member: _checking(member, cls.__name__ if name == "__init__" else name, names)
        )

    return decorate


def wrap_public_methods(cls: _Class, wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]) -> _Class:
    """Each public method of ``cls`` and its ``__init__`` replaced by ``wrap(name, method)``: the
    calls a caller makes, which the API's boundary judges and words (api.py)."""
    for name, member in list(vars(cls).items()):
        if inspect.isfunction(member) and (name == "__init__" or not name.startswith("_")):
            setattr(cls, name, wrap(name, member))
    return cls


def _checking(method: Callable[..., Any], label: str, names: Callable[[], Mapping[str, Any]]) -> Callable[..., Any]:
    rules: list[tuple[inspect.Signature, dict[str, Any]]] = []

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not rules:
            rules.append(_rules_of(method, names()))
        signature, hints = rules[0]
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return method(*args, **kwargs)  # a missing or unknown argument: Python's own message
        for name, value in bound.arguments.items():
            if name in hints:
                _judge(label, signature.parameters[name], value, hints[name])
        return method(*args, **kwargs)

    return call


def _rules_of(method: Callable[..., Any], names: Mapping[str, Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The method's signature and its parameters' annotations as objects. The return annotation
    is left out: it names report types whose modules the call has not needed to import yet."""
    signature = inspect.signature(method)
    raw = {p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty}
    raw.pop("self", None)
    owner = types.SimpleNamespace(__annotations__=raw)
    module_names = getattr(inspect.unwrap(method), "__globals__", {})
    return signature, typing.get_type_hints(owner, globalns=dict(module_names), localns=dict(names))


def _judge(label: str, parameter: inspect.Parameter, value: Any, hint: Any) -> None:
    if parameter.kind is parameter.VAR_POSITIONAL:
        for i, item in enumerate(value):
            _judge_one(f"{label}({parameter.name}[{i}]=...)", item, hint)
    elif parameter.kind is parameter.VAR_KEYWORD:
        for key, item in value.items():
            _judge_one(f"{label}({key}=...)", item, hint)
    else:
        _judge_one(f"{label}({parameter.name}=...)", value, hint)


def _judge_one(where: str, value: Any, hint: Any) -> None:
    if _fits(value, hint):
        return
    expected = _describe(hint)
    container = next((h for h in _members_of(hint) if _fits_container(value, h)), None)
    if container is not None:
        which, item = next((n, v) for n, v, h in _items(value, container) if not _fits(v, h))
        raise InputError(f"{where}: expected {expected}, got {_shown(value)} whose {which} is {_shown(item)}")
    hint_text = None
    if isinstance(value, str | bytes | Mapping) and _wants_many(hint):
        hint_text = "one value where a list belongs (iterated, a string is its characters): wrap it in a list, [...]"
    elif isinstance(value, bool):
        hint_text = "True and False are flags here, not numbers: give the number itself"
    raise InputError(f"{where}: expected {expected}, got {_shown(value)}", hint=hint_text)


def _fits(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS:
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Annotated:
        return _fits(value, args[0])
    if origin is typing.Literal:
        return value in args
    if hint in _NUMBERS:
        return _NUMBERS[hint](value)
    if origin in _SEQUENCES or origin in _MAPPINGS:
        return _fits_container(value, hint) and all(_fits(v, h) for _, v, h in _items(value, hint))
    return _fits_class(value, origin if isinstance(origin, type) else hint)


def _fits_class(value: Any, hint: Any) -> bool:
    if not isinstance(hint, type):
        return True
    if getattr(hint, "_is_protocol", False) and not getattr(hint, "_is_runtime_protocol", False):
        return all(hasattr(value, member) for member in _members(hint))
    return isinstance(value, hint)


def _members_of(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in _UNIONS else (hint,)


def _fits_container(value: Any, hint: Any) -> bool:
    """The value is of the container kind the annotation asks for, whatever its items."""
    origin = typing.get_origin(hint)
    if origin in _MAPPINGS:
        return isinstance(value, Mapping)
    if origin not in _SEQUENCES or isinstance(value, str | bytes | Mapping):
        return False
    return isinstance(value, list | tuple) if origin in (list, tuple) else isinstance(value, Iterable)


def _items(value: Any, hint: Any) -> list[tuple[str, Any, Any]]:
    """Each item to judge, named, with its annotation: a mapping's keys and values, a list's
    items. A generator is the service's to consume, so its items are left to the service."""
    args = typing.get_args(hint) or (Any,)
    if isinstance(value, Mapping):
        keys = [("key", k, args[0]) for k in value]
        return keys + [(f"value for {_key(k)}", v, args[-1]) for k, v in value.items()]
    return [(f"item [{i}]", v, args[0]) for i, v in enumerate(value)] if isinstance(value, list | tuple) else []


def _wants_many(hint: Any) -> bool:
    if typing.get_origin(hint) in _UNIONS:
        return any(_wants_many(a) for a in typing.get_args(hint)) and not any(a is str for a in typing.get_args(hint))
    return typing.get_origin(hint) in _SEQUENCES


def _members(protocol: type) -> set[str]:
    own = {n for n in vars(protocol) if not n.startswith("_")}
    return own | set(getattr(protocol, "__annotations__", {}))


def _describe(hint: Any, *, many: bool = False) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS:
        parts = [_describe(a, many=many) for a in args if a is not type(None)]
        parts += ["None"] if type(None) in args and not many else []
        # "a list of strings or paths, or None": the comma keeps the list's own "or" apart
        last = ", or " if any(" or " in p for p in parts) else " or "
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + last + parts[-1]
    if origin is typing.Annotated:
        return _describe(args[0], many=many)
    if hint is Any:
        return "values" if many else "any value"
    if hint is None or hint is type(None):
        return "None"
    if origin in _SEQUENCES:
        inner = f" of {_describe(args[0], many=True)}" if args and args[0] is not Any else ""
        return f"lists{inner}" if many else f"a list{inner}"
    if origin in _MAPPINGS:
        inner = f" of {_describe(args[0], many=True)} to {_describe(args[-1], many=True)}" if args else ""
        inner = "" if args and args[-1] is Any else inner
        return f"dicts{inner}" if many else f"a dict{inner}"
    base = origin if isinstance(origin, type) else hint
    if base in _SINGULAR:
        return _PLURAL[base] if many else _SINGULAR[base]
    name = getattr(base, "__name__", str(base))
    return f"{name} objects" if many else f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def _key(key: Any) -> str:
    return repr(key) if isinstance(key, str) and len(key) <= _SHOWN_CHARS else "one key"


def _shown(value: Any) -> str:
    if value is None:
        return "None"
    kind = type(value).__name__
    if isinstance(value, bool | int | float):
        return f"{kind} {value!r}"
    if isinstance(value, str):
        return f"{kind} {value!r}" if len(value) <= _SHOWN_CHARS else f"a {kind} of {len(value)} characters"
    return kind
