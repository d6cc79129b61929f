"""What the architecture tests read: every module under src/dream_memory, its layer, its imports.

Parsed with ``ast``, never imported, so a test can name the line that breaks a rule.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "dream_memory"


@dataclass(frozen=True)
class Module:
    name: str  # dream_memory.core.layout
    path: Path

    @property
    def rel(self) -> str:
        """The path as the failure messages show it: core/layout.py."""
        return self.path.relative_to(PACKAGE).as_posix()

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def tree(self) -> ast.Module:
        return _parse(self.path)


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def modules() -> tuple[Module, ...]:
    return tuple(Module(module_name(p), p) for p in sorted(PACKAGE.rglob("*.py")))


@cache
def module_names() -> frozenset[str]:
    return frozenset(m.name for m in modules())


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # the module imported: dream_memory.core.layout, or a third-party top-level name


def imports(tree: ast.Module, importer: str = "") -> Iterator[Import]:
    """Every import in the tree: at module level, inside functions and under TYPE_CHECKING (a
    type dependency is a dependency). ``from pkg import name`` targets ``pkg.name`` when that is
    one of our modules, else ``pkg``."""
    known = module_names()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importer's package
                package = importer.split(".")[: -node.level] if importer else []
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield Import(node.lineno, full if full in known else base)


def is_ours(target: str) -> bool:
    return target == "dream_memory" or target.startswith("dream_memory.")


def is_third_party(target: str) -> bool:
    return not is_ours(target) and target.split(".", maxsplit=1)[0] not in sys.stdlib_module_names


# The layers of docs/architecture.md, by module name prefix (longest prefix wins).
LAYER_PREFIXES = {
    "dream_memory": "root",
    "dream_memory.errors": "errors",
    "dream_memory.settings": "settings",
    "dream_memory.core": "core",
    "dream_memory.adapters": "adapters",
    "dream_memory.app": "app",
    "dream_memory.api": "faces",
    "dream_memory.entrypoints": "faces",
    "dream_memory.testing": "testing",
}


def layer(name: str) -> str:
    best = ""
    for prefix in LAYER_PREFIXES:
        if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return LAYER_PREFIXES[best]
