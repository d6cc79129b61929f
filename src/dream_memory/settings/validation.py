"""The full validation of a config file: pydantic models made from ``settings.schema``'s
dataclasses (their ``Range`` as pydantic's bounds, their ``Check`` as validators), and the result
handed on as those dataclasses.

pydantic loads with this module, so only ``settings.loading`` imports it, and only for a file the
quick check (``settings.quick``) is not sure of: every error message is pydantic's.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import (
    AfterValidator,
    AliasGenerator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    create_model,
)
from pydantic.alias_generators import to_camel

from dream_memory.errors import ConfigError
from dream_memory.settings import schema
from dream_memory.settings.schema import Config

__all__ = ["pydantic_model", "validate"]

# camelCase and snake_case keys both accepted; unknown keys kept so they can be warned about.
_MODEL_CONFIG = ConfigDict(
    alias_generator=AliasGenerator(validation_alias=to_camel),
    populate_by_name=True,
    extra="allow",
    frozen=True,
)
_SECTIONS: dict[type[BaseModel], type[Any]] = {}  # each model -> the schema dataclass it stands for


@functools.cache
def pydantic_model(section: type[Any]) -> type[BaseModel]:
    """The pydantic model validating the schema dataclass ``section`` (its nested sections too)."""
    hints = typing.get_type_hints(section, include_extras=True)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        if f.default_factory is not dataclasses.MISSING:
            spec = Field(default_factory=f.default_factory)
        elif f.default is not dataclasses.MISSING:
            spec = Field(f.default)
        else:
            spec = Field()
        fields[f.name] = (_for_pydantic(hints[f.name]), spec)
    model: type[BaseModel] = create_model(section.__name__, __config__=_MODEL_CONFIG, **fields)
    _SECTIONS[model] = section
    return model


def _for_pydantic(hint: Any) -> Any:
    """``hint`` with each schema dataclass replaced by its model and ``Range``/``Check`` by
    pydantic's bounds and validators."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return pydantic_model(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return typing.Annotated[(_for_pydantic(args[0]), *(_marker(m) for m in hint.__metadata__))]
    if hint in (int, bool):
        # Strict: "5", 5.0 or true for an integer, "no" or 1 for a switch, are wrong types (exit 2),
        # never quietly read as 5, 5, 1 or False.
        return typing.Annotated[hint, Strict()]
    if hint is float:
        # An integer is a number (5 for 5.0); a string or a switch is not. NaN and infinity pass
        # every range check pydantic makes, and then break each run (a timeout the thread's join
        # overflows on, a temperature the provider refuses): not numbers here.
        return typing.Annotated[float, Strict(), AllowInfNan(False)]
    if origin is None or origin is typing.Literal or not args:
        return hint
    inner = tuple(_for_pydantic(a) for a in args)
    if inner == args:
        return hint
    if origin is dict:
        return dict[inner[0], inner[1]]  # type: ignore[valid-type]
    if origin is list:
        return list[inner[0]]  # type: ignore[valid-type]
    return typing.Union[inner]  # noqa: UP007 (X | None, rebuilt from its parts)


def _marker(meta: Any) -> Any:
    if isinstance(meta, schema.Range):
        return Field(ge=meta.ge, gt=meta.gt, le=meta.le)
    if isinstance(meta, schema.Check):
        return BeforeValidator(meta.check) if meta.before else AfterValidator(meta.check)
    return meta


def _as_section(value: Any, extras: dict[int, list[str]]) -> Any:
    """A validated model tree as the schema's dataclasses (defaults are dataclasses already),
    noting each section's unknown keys in ``extras``."""
    if isinstance(value, BaseModel):
        section = _SECTIONS[type(value)]
        made = section(**{f.name: _as_section(getattr(value, f.name), extras) for f in dataclasses.fields(section)})
        extras[id(made)] = list(value.model_extra or {})
        return made
    if isinstance(value, dict):
        return {k: _as_section(v, extras) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_section(v, extras) for v in value]
    return value


def _range_at(loc: tuple[int | str, ...]) -> schema.Range | None:
    """The ``Range`` of the field at ``loc`` (an error's location), so that a refused number is
    told what is allowed: "Input should be a finite number" alone does not say which numbers are."""
    from dream_memory.settings.quick import camel

    hint: Any = Config
    for part in loc:
        while True:  # down to the section, or the dict, holding the next key
            origin, args = typing.get_origin(hint), typing.get_args(hint)
            if origin is typing.Annotated:
                hint = args[0]
            elif origin in (typing.Union, types.UnionType):
                others = [a for a in args if a is not type(None)]
                if len(others) != 1:
                    return None
                hint = others[0]
            else:
                break
        if dataclasses.is_dataclass(hint):
            hints = typing.get_type_hints(hint, include_extras=True)
            by_key = {k: f.name for f in dataclasses.fields(hint) for k in (f.name, camel(f.name))}
            if part not in by_key:
                return None
            hint = hints[by_key[str(part)]]
        elif typing.get_origin(hint) is dict:
            hint = typing.get_args(hint)[1]
        else:
            return None
    if typing.get_origin(hint) is typing.Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, schema.Range)), None)
    return None


def validate(data: Mapping[str, Any], source: str) -> tuple[Config, dict[int, list[str]]]:
    """``data`` validated by pydantic, as the schema's dataclasses, with each section's unknown
    keys (by ``id``, as ``settings.quick`` gives them); ConfigError names ``source`` and the fields."""
    try:
        validated = pydantic_model(Config).model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            bounds = _range_at(err["loc"])
            problems.append(f"{where}: {err['msg']}" + (f" (allowed: {bounds.describe()})" if bounds else ""))
        raise ConfigError(
            f"invalid configuration in {source}: " + "; ".join(problems),
            hint="see docs/configuration.md for every setting and its type",
        ) from None
    extras: dict[int, list[str]] = {}
    config: Config = _as_section(validated, extras)
    return config, extras
