#!/usr/bin/env python3
"""Write docs/reference/report.schema.json from the report types (dream_memory.app.reports).

.venv/bin/python scripts/gen_report_schema.py          # rewrite the schema
.venv/bin/python scripts/gen_report_schema.py --check  # exit 1 if it is out of date

One JSON Schema (draft 2020-12) holding the three reports under $defs (DreamRun, Consolidate,
Eval); the document itself accepts exactly one of them. Every object is closed (no key its type
does not declare) and requires every key that is not NotRequired, so a key added to a report
without its type fails tests/reference. A field's docstring becomes its description.

The types are the standard library's TypedDicts, and the mapping below covers exactly what they
use (int, float, str, bool, None, Literal, unions with None, list, dict[str, X], nested
TypedDicts, NotRequired). pydantic could derive a schema too, but on Python 3.11 it reads only
typing_extensions' TypedDict, which would put a third-party import into app/.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from dream_memory.app import reports

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "reference" / "report.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS: dict[Any, dict[str, str]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


def _docstrings(module: types.ModuleType) -> dict[str, dict[str, str]]:
    """{class name: {"": class docstring, field: the string literal right after its annotation}}."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = found.setdefault(node.name, {})
        if (doc := ast.get_docstring(node)) is not None:
            docs[""] = doc
        for field, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[field.target.id] = inspect.cleandoc(after.value.value)
    return found


def _is_typed_dict(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, dict) and hasattr(value, "__required_keys__")


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.docs = _docstrings(reports)

    def schema(self, hint: Any) -> dict[str, Any]:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.NotRequired:
            return self.schema(args[0])
        if hint in _SCALARS:
            return dict(_SCALARS[hint])
        if origin is typing.Literal:
            if not all(isinstance(a, str) for a in args):
                raise SystemExit(f"only string literals are mapped: {hint}")
            return {"type": "string", "enum": list(args)}
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.schema(a) for a in args]}
        if origin is list:
            return {"type": "array", "items": self.schema(args[0])}
        if origin is dict and args[0] is str:
            return {"type": "object", "additionalProperties": self.schema(args[1])}
        if _is_typed_dict(hint):
            return {"$ref": f"#/$defs/{self.object(hint)}"}
        raise SystemExit(f"no JSON Schema mapping for {hint!r}: extend scripts/gen_report_schema.py")

    def object(self, cls: type, name: str | None = None) -> str:
        name = name or cls.__name__
        if name in self.defs:
            return name
        self.defs[name] = {}  # reserved first: a type may refer to itself
        docs = self.docs.get(cls.__name__, {})
        properties: dict[str, Any] = {}
        for field, hint in typing.get_type_hints(cls, include_extras=True).items():
            properties[field] = self.schema(hint)
            if field in docs:
                properties[field]["description"] = docs[field]
        node: dict[str, Any] = {"type": "object"}
        if "" in docs:
            node["description"] = docs[""]
        node["properties"] = properties
        node["required"] = [f for f in properties if f in cls.__required_keys__]  # type: ignore[attr-defined]
        if not node["required"]:
            del node["required"]
        node["additionalProperties"] = False
        self.defs[name] = node
        return name


def render() -> str:
    builder = _Builder()
    for name, cls in reports.REPORTS.items():
        builder.object(cls, name)
    document: dict[str, Any] = {
        "$schema": DIALECT,
        "title": "dream-memory reports",
        "description": (
            "The JSON reports of `dream run` ($defs/DreamRun), `dream consolidate` ($defs/Consolidate) "
            "and `dream eval --json` ($defs/Eval). Generated by scripts/gen_report_schema.py from "
            "dream_memory.app.reports; explained in docs/reference/report.md."
        ),
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in reports.REPORTS],
        "$defs": dict(sorted(builder.defs.items())),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = SCHEMA.read_text(encoding="utf-8") if SCHEMA.exists() else ""
        if current != text:
            print(f"{SCHEMA} is out of date: run scripts/gen_report_schema.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
