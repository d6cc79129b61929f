"""Dependencies point one way (docs/architecture.md): the rules are checked on every import.

Every import counts, at module level, inside a function or under TYPE_CHECKING. A failure names
the file, the line and the rule, e.g. ``core/search.py:12 imports dream_memory.entrypoints.cli
(core imports only core and errors)``.
"""

from __future__ import annotations

import ast

from arch_helpers import Module, imports, is_ours, is_third_party, layer, modules

# Which layers each layer may import (besides the standard library).
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset({"errors"}),
    "core": frozenset({"core", "errors"}),
    "settings": frozenset({"settings", "core", "errors"}),
    # root: ``from dream_memory import __version__`` (the package's __init__ loads nothing else).
    "adapters": frozenset({"adapters", "core", "settings", "errors", "root"}),
    "app": frozenset({"app", "adapters", "core", "settings", "errors", "root"}),
    "faces": frozenset({"faces", "app", "core", "settings", "errors", "root"}),
    # The test kit drives every face (hostile.run_cli is the CLI in process) and every layer.
    "testing": frozenset({"testing", "faces", "app", "adapters", "core", "settings", "errors", "root"}),
    "root": frozenset({"root", "faces", "errors"}),
}
RULE_TEXT = {
    "errors": "errors imports nothing of ours",
    "core": "core imports only core and errors",
    "settings": "settings imports only settings, core and errors",
    "adapters": "adapters never import app or the faces",
    "app": "app never imports the faces (entrypoints, api)",
    "faces": "the faces call app; adapters are app's business",
    "testing": "testing may import any layer",
    "root": "the package root loads only the API and the errors",
}

# Third-party packages and the only places that may import them (module name prefixes).
# testing/ is the test kit and may use any of them except litellm.
CONFINED: dict[str, tuple[str, ...]] = {
    "litellm": ("dream_memory.adapters.llm",),
    "tenacity": ("dream_memory.adapters.llm",),
    # The direct route to an OpenAI-compatible endpoint; the test kit's scripted server may use it.
    "httpx": ("dream_memory.adapters.openai_compat", "dream_memory.testing"),
    "tiktoken": ("dream_memory.adapters.tokens",),
    "tiktoken_ext": ("dream_memory.adapters.tokens",),  # the encoding's special-token names
    "dulwich": ("dream_memory.adapters.git", "dream_memory.testing"),
    "detect_secrets": ("dream_memory.adapters.secrets",),
    # Only for detect-secrets' modules, should they ever use it after loading without it.
    "requests": ("dream_memory.adapters.secrets",),
    "filelock": ("dream_memory.adapters",),
    "sqlite3": ("dream_memory.adapters.search_index",),
    # libc's inotify calls (standard library, but a foreign-function door): the store watcher only.
    "ctypes": ("dream_memory.adapters.store_watch",),
    "mcp": ("dream_memory.entrypoints.mcp_server",),
    "mcp_types": ("dream_memory.entrypoints.mcp_server",),
    "click": ("dream_memory.entrypoints.cli", "dream_memory.testing"),
    # The live progress bar: imported only when stderr is a terminal.
    "tqdm": ("dream_memory.entrypoints.cli.progress",),
    # pydantic: validating a config file the quick check is unsure of (the schema is plain
    # dataclasses, so most commands start without it), and the MCP server's argument types.
    "pydantic": (
        "dream_memory.settings.validation",
        "dream_memory.entrypoints.mcp_args",
    ),
    # Pure parsers (no I/O): frontmatter's YAML and lenient JSON for tool arguments.
    "yaml": ("dream_memory.core.frontmatter",),
    "json_repair": ("dream_memory.core.chat",),
    # Pure text algorithm (no I/O): the three-way merge of restore and of an accepted held change.
    "merge3": ("dream_memory.core.merge",),
    "patiencediff": ("dream_memory.core.merge",),
}

# Layer violations that exist today and are being removed (issue 16). The test fails when one is
# fixed and still listed, so the list can only shrink. Empty when issue 16 is done.
KNOWN_LAYER: set[str] = set()
KNOWN_THIRD_PARTY: set[str] = set()


def layer_problems(module: Module, tree: ast.Module | None = None) -> list[str]:
    own = layer(module.name)
    problems = []
    for imp in imports(tree or module.tree, module.name):
        if is_ours(imp.target):
            target_layer = layer(imp.target)
            if target_layer not in ALLOWED[own]:
                problems.append(f"{module.rel}:{imp.line} imports {imp.target} ({RULE_TEXT[own]})")
            elif module.name == "dream_memory.api" and imp.target.startswith("dream_memory.entrypoints"):
                problems.append(
                    f"{module.rel}:{imp.line} imports {imp.target} (the API is a face beside the CLI, not on it)"
                )
            elif own != "testing" and target_layer == "testing":
                problems.append(f"{module.rel}:{imp.line} imports {imp.target} (nothing but testing imports testing)")
    return problems


def _strip_lines(problems: list[str]) -> set[str]:
    """``core/x.py:12 imports y (rule)`` -> ``core/x.py imports y``: KNOWN survives line moves."""
    out = set()
    for p in problems:
        where, _, rest = p.partition(" imports ")
        out.add(f"{where.rsplit(':', 1)[0]} imports {rest.partition(' (')[0]}")
    return out


def third_party_problems(module: Module) -> list[str]:
    problems = []
    for imp in imports(module.tree, module.name):
        if not is_third_party(imp.target) and imp.target.split(".")[0] not in ("sqlite3", "ctypes"):
            continue
        top = imp.target.split(".")[0]
        homes = CONFINED.get(top)
        if homes is None:
            problems.append(f"{module.rel}:{imp.line} imports {top}, which no rule places (add it to CONFINED)")
        elif not any(module.name == h or module.name.startswith(h + ".") for h in homes):
            problems.append(f"{module.rel}:{imp.line} imports {top} (only {', '.join(homes)} may)")
    return problems


def test_each_layer_imports_only_the_layers_below_it() -> None:
    """core never reaches adapters, app or a face; adapters never reach app; app never reaches a
    face; nothing but the test kit imports the test kit."""
    found = [p for m in modules() for p in layer_problems(m)]
    unexpected = [p for p in found if next(iter(_strip_lines([p]))) not in KNOWN_LAYER]
    assert not unexpected, "\n".join(unexpected)
    fixed = KNOWN_LAYER - _strip_lines(found)
    assert not fixed, f"fixed, so remove from KNOWN_LAYER: {sorted(fixed)}"


def test_third_party_packages_stay_in_their_adapters() -> None:
    """litellm only in adapters/llm.py, dulwich only in adapters/git, click only in the CLI,
    pydantic only in the config schema and the MCP argument types, sqlite3 only in the search index."""
    found = [p for m in modules() for p in third_party_problems(m)]
    unexpected = [p for p in found if next(iter(_strip_lines([p]))) not in KNOWN_THIRD_PARTY]
    assert not unexpected, "\n".join(unexpected)
    fixed = KNOWN_THIRD_PARTY - _strip_lines(found)
    assert not fixed, f"fixed, so remove from KNOWN_THIRD_PARTY: {sorted(fixed)}"


def test_a_planted_forbidden_import_is_found() -> None:
    """The check is not blind: core/layout.py with ``from dream_memory.entrypoints import cli``
    added (inside a function, where it is easiest to miss) is reported, naming the rule."""
    layout = next(m for m in modules() if m.name == "dream_memory.core.layout")
    planted = layout.source + "\n\ndef _planted() -> None:\n    from dream_memory.entrypoints import cli  # noqa\n"
    problems = layer_problems(layout, ast.parse(planted))
    assert problems == [
        f"core/layout.py:{planted.count(chr(10))} imports dream_memory.entrypoints.cli "
        "(core imports only core and errors)"
    ]
    assert layer_problems(layout) == []


def _graph() -> dict[str, set[str]]:
    """Module-level imports between our modules (lazy imports inside functions break no cycle
    at import time, so they are not edges here; TYPE_CHECKING blocks are)."""
    graph: dict[str, set[str]] = {}
    for module in modules():
        edges = graph.setdefault(module.name, set())
        for node in module.tree.body:
            for sub in [node, *(node.body if isinstance(node, ast.If) else [])]:
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    wrapper = ast.Module(body=[sub], type_ignores=[])
                    edges |= {i.target for i in imports(wrapper, module.name) if is_ours(i.target)}
        edges.discard(module.name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _parent_packages(cycle: list[str]) -> bool:
    """A package whose __init__ re-exports its own submodules, which import it back, is the one
    harmless loop: Python finishes the package's __init__ first."""
    return any(all(other == name or other.startswith(name + ".") for other in cycle) for name in cycle)


KNOWN_CYCLES: list[list[str]] = []


def test_no_two_modules_import_each_other() -> None:
    """No import cycle between modules (config <-> settings was one: DEFAULT_GIT_AUTHOR)."""
    cycles = [c for c in _cycles(_graph()) if not _parent_packages(c)]
    assert cycles == KNOWN_CYCLES
