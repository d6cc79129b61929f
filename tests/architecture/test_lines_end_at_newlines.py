"""A line of a memory file, a history line, a model's reply or a commit message ends at a newline
(``\\n``, ``\\r\\n``, ``\\r``), as git, markdown and JSON lines count them. ``str.splitlines()``
also ends one at U+2028, U+2029, U+0085, form feed, vertical tab and U+001C..1E, which chat
text holds and JSON leaves raw in a string: every such split cut a line in two
(tests/dream/test_review_line_separators.py shows what users saw). So the package splits lines
with ``core.bounded.split_lines``; ``splitlines(keepends=True)`` stays allowed where the pieces
are only joined back (chunking: nothing is cut, only divided), and bytes split only at ``\\n``
and ``\\r`` anyway.
"""

from __future__ import annotations

import ast

from arch_helpers import modules

# Receivers known to be bytes (bytes.splitlines breaks only at \n, \r\n and \r), by module.
BYTES_RECEIVERS = {("adapters/git/prune.py", "path.read_bytes()")}


def test_no_line_is_split_at_anything_but_a_newline() -> None:
    found: list[str] = []
    for module in modules():
        for node in ast.walk(module.tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "splitlines":
                continue
            keepends = any(k.arg == "keepends" and ast.literal_eval(k.value) is True for k in node.keywords)
            if keepends or (module.rel, ast.unparse(node.func.value)) in BYTES_RECEIVERS:
                continue
            found.append(f"{module.rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "use core.bounded.split_lines (see this module's docstring):\n" + "\n".join(found)
