"""Every default a user can change is written once, in settings/defaults.py.

The check looks for the distinctive default values as literals anywhere in src: a second copy of
``4096`` (the model's reply tokens) or of the git author is a default that can drift from the
config schema's. The same number with another meaning is listed in UNRELATED with that meaning.
"""

from __future__ import annotations

import ast

from arch_helpers import modules

OWNER = "settings/defaults.py"
# name in settings/defaults.py -> its value
DISTINCTIVE: dict[str, object] = {
    "MODEL_MAX_TOKENS": 4096,
    "MODEL_TIMEOUT_S": 120.0,
    "MODEL_CONTEXT_WINDOW_FALLBACK": 65_536,
    "CONTEXT_BUDGET": 8000,
    "BATCH_TOKENS": 12000,
    "FILE_CONTEXT_TOKENS": 6000,
    "GIT_AUTHOR": "dream-memory <dream-memory@localhost>",
}
# (file, the name the literal is assigned to) -> what it means instead
UNRELATED: dict[tuple[str, str], str] = {
    ("adapters/locks.py", "_HOLDER_READ_BYTES"): "bytes of the lock holder's record read",
    ("entrypoints/mcp_args.py", "MAX_PATH_CHARS"): "the longest path argument (Linux PATH_MAX)",
}


def _assigned_name(parents: dict[ast.AST, ast.AST], node: ast.AST) -> str:
    parent = parents.get(node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return parent.targets[0].id
    if isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name):
        return parent.target.id
    return ""


def copies() -> list[str]:
    values = {(type(v), v): k for k, v in DISTINCTIVE.items()}
    found = []
    for module in modules():
        if module.rel == OWNER:
            continue
        parents = {child: node for node in ast.walk(module.tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
                continue
            key = (type(node.value), node.value)
            if key not in values:
                continue
            name = _assigned_name(parents, node)
            if (module.rel, name) in UNRELATED:
                continue
            found.append(f"{module.rel}:{node.lineno} writes {node.value!r} ({values[key]} belongs in {OWNER})")
    return found


# Files still holding a copy (a part that adds one lists it here until it is moved). Empty now.
KNOWN_COPIES: set[str] = set()


def test_each_distinctive_default_has_one_owner() -> None:
    """4096, 8000, 12000, 6000, 65536, 120.0 and the git author appear only in settings/defaults.py."""
    found = copies()
    files = {c.split(":", 1)[0] for c in found}
    unexpected = [c for c in found if c.split(":", 1)[0] not in KNOWN_COPIES]
    assert not unexpected, "\n".join(unexpected)
    fixed = KNOWN_COPIES - files
    assert not fixed, f"clean now, so remove from KNOWN_COPIES: {sorted(fixed)}"
