"""I/O lives in adapters/: core/ and app/ never touch a file, a process or the network themselves.

Checked on the syntax tree: calls of ``os`` functions that reach the system, the builtin
``open``, ``shutil``, ``tempfile``, ``subprocess``, ``socket``, and the pathlib methods that read,
write or look at the disk. A call through one of our adapter modules (``fsutil.read_text(...)``)
is the adapter's I/O and fine. ``app/runtime.py`` is the composition root: it opens the adapters
(``GitStore.open``, a repository with an author and a clock, is built there and nowhere else in
app/), so it is not checked.
"""

from __future__ import annotations

import ast

from arch_helpers import Module, imports, modules

# os functions that are pure (strings in, strings out) and may be used anywhere.
PURE_OS = {"fspath", "fsdecode", "fsencode", "strerror", "getenv"}
PURE_OS_PATH = {"join", "basename", "dirname", "splitext", "normpath", "isabs", "split", "commonpath", "sep"}
SYSTEM_MODULES = {"shutil", "tempfile", "subprocess", "socket", "signal", "sqlite3"}
# pathlib methods that reach the disk (receivers are not typed here, so names only: these are
# not names our own objects use for anything else).
PATH_IO = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "mkdir",
    "unlink",
    "iterdir",
    "glob",
    "rglob",
    "exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "touch",
    "rmdir",
    "lstat",
    "samefile",
    "chmod",
    "symlink_to",
}


def _adapter_aliases(tree: ast.Module) -> set[str]:
    """Names bound to our adapter modules in this file (``from dream_memory.adapters import fsutil``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dream_memory.adapters"):
            names |= {a.asname or a.name for a in node.names}
    return names


def raw_io(module: Module, tree: ast.Module | None = None) -> list[str]:
    tree = tree or module.tree
    adapters = _adapter_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        what = None
        if isinstance(fn, ast.Name) and fn.id == "open":
            what = "open()"
        elif isinstance(fn, ast.Attribute):
            owner = fn.value
            if isinstance(owner, ast.Name) and owner.id == "os" and fn.attr not in PURE_OS:
                what = f"os.{fn.attr}"
            elif (
                isinstance(owner, ast.Attribute)
                and isinstance(owner.value, ast.Name)
                and owner.value.id == "os"
                and fn.attr not in PURE_OS_PATH
            ):
                what = f"os.{owner.attr}.{fn.attr}"
            elif isinstance(owner, ast.Name) and owner.id in SYSTEM_MODULES:
                what = f"{owner.id}.{fn.attr}"
            elif fn.attr in PATH_IO and not (isinstance(owner, ast.Name) and owner.id in adapters):
                what = f".{fn.attr}()"
            elif fn.attr == "open" and isinstance(owner, ast.Name) and owner.id == "GitStore":
                what = "GitStore.open"
        if what is not None:
            found.append(f"{module.rel}:{node.lineno} {what}")
    for imp in imports(tree, module.name):
        if imp.target.split(".")[0] in SYSTEM_MODULES:
            found.append(f"{module.rel}:{imp.line} import {imp.target}")
    return found


COMPOSITION_ROOT = "dream_memory.app.runtime"


def _checked() -> list[Module]:
    return [
        m
        for m in modules()
        if m.name.startswith(("dream_memory.core", "dream_memory.app")) and m.name != COMPOSITION_ROOT
    ]


# Files that still do I/O themselves (issue 16 moves it into adapters). The test fails when one is
# clean and still listed, so the list can only shrink. Empty when issue 16 is done.
KNOWN_RAW_IO: set[str] = set()


def test_core_and_app_do_no_io_themselves() -> None:
    """Every read, write, listing, process and socket of core/ and app/ goes through adapters/."""
    found = {m.rel: raw_io(m) for m in _checked()}
    dirty = {rel for rel, calls in found.items() if calls}
    unexpected = sorted(dirty - KNOWN_RAW_IO)
    assert not unexpected, "\n".join(c for rel in unexpected for c in found[rel])
    fixed = KNOWN_RAW_IO - dirty
    assert not fixed, f"clean now, so remove from KNOWN_RAW_IO: {sorted(fixed)}"


def test_the_check_sees_raw_io() -> None:
    """The check is not blind: a planted ``os.listdir`` and ``path.read_text()`` are reported."""
    planted = ast.parse("import os\ndef f(p):\n    os.listdir(p)\n    return p.read_text()\n")
    calls = raw_io(_checked()[0], planted)
    assert [c.split(" ", 1)[1] for c in calls] == ["os.listdir", ".read_text()"]
