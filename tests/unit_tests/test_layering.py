"""The package's layers import only downwards, and no module imports itself back.

`LAYERS` lists the modules from the bottom up; a module may import its own layer and those
below it, at the top of the file, inside a function, or for type checking alike. The
decisions (`policy`) sit below the public passes, which are thin wrappers over them. The
integrations are layers too: the LangGraph node and the overflow recovery work with any
governor (`tracing.Governs`), so the governor may build them without a circle; the
middleware, which makes governors, sits above it; the command line and the demo above all.

Inside a layer, modules import each other freely, so the graph of the package's modules,
every import counted, must have no circle either.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_context_governance"
NAME = "langchain_context_governance"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "_added",
        "_messages",
        "_model_classes",
        "_reasoning",
        "_packing",
        "errors",
        "tokens",
        "tuning",
        "anthropic_messages",
    ),
    ("offload",),
    ("policy",),
    ("passes",),
    ("rules",),
    ("state", "testing"),
    ("report",),
    ("tracing",),
    ("overflow",),
    ("langgraph",),
    ("settings", "model_settings", "pipeline"),
    ("governor",),
    ("middleware",),
    ("transcripts",),
    ("demo",),
    ("cli", "__main__", "__init__"),
)
_LAYER_OF = {name: depth for depth, names in enumerate(LAYERS) for name in names}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _top_name(path: Path) -> str:
    """The first part of a module's name inside the package (`state` for state/record.py)."""
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "data" not in path.relative_to(PACKAGE).parts
    ]


def test_every_module_has_a_layer() -> None:
    assert {_top_name(path) for path in _modules()} - set(_LAYER_OF) == set()


def _module_name(path: Path) -> str:
    """`langchain_context_governance.rules.templates` for rules/templates.py; a package's
    __init__.py is the package."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((NAME, *parts))


def imported_package_modules(path: Path, modules: Collection[str]) -> set[str]:
    """The modules among `modules` that the file `path` imports, wherever the import stands.

    `from package import name` imports the module `package.name` where there is one, else
    `package`: rules/table.py's `from langchain_context_governance.rules import ids` depends
    on rules/ids.py, not on rules/__init__.py, which imports the table back (through the
    profile).
    """
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return found & set(modules)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    paths = {_module_name(path): path for path in _modules()}
    return {name: imported_package_modules(path, paths) - {name} for name, path in paths.items()}


def _strongly_connected(graph: Mapping[str, Collection[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of `graph`."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = lowest[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                lowest[node] = min(lowest[node], lowest[target])
            elif target in on_stack:
                lowest[node] = min(lowest[node], index[target])
        if lowest[node] == index[node]:
            component: set[str] = set()
            while node not in component:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _shortest_circle(
    start: str, component: Collection[str], graph: Mapping[str, Collection[str]]
) -> tuple[str, ...]:
    """The fewest imports from `start` back to it, inside its strongly connected component."""
    came_from: dict[str, str] = {}
    frontier = deque([start])
    while frontier:
        node = frontier.popleft()
        for target in sorted(graph[node]):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return (*reversed(path), start)
            if target in component and target not in came_from:
                came_from[target] = node
                frontier.append(target)
    raise ValueError(f"{start} is on no circle")


def import_circles(graph: Mapping[str, Collection[str]]) -> list[tuple[str, ...]]:
    """The shortest circle through each module on one, each once, from its first module
    in sorted order (`(a, b, a)`)."""
    circles: set[tuple[str, ...]] = set()
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        for module in component:
            circle = _shortest_circle(module, component, graph)[:-1]
            first = circle.index(min(circle))
            rotated = circle[first:] + circle[:first]
            circles.add((*rotated, rotated[0]))
    return sorted(circles)


def test_import_circles_are_found_and_listed_from_their_first_module() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"b", "d"}, "d": set(), "e": {"e"}}
    assert import_circles(graph) == [("a", "b", "a"), ("b", "c", "b")]


def test_the_import_graph_sees_imports_inside_functions() -> None:
    """Templates import the sandbox only when they render (jinja2 is optional)."""
    rules = f"{NAME}.rules"
    assert f"{rules}._bounded_jinja" in import_graph()[f"{rules}.templates"]


def test_the_package_has_no_import_circle() -> None:
    """An import inside a function or for type checking closes a circle too: it only
    delays the failure to the first call, or hides it from the type checker."""
    circles = import_circles(import_graph())
    listed = "\n".join(" -> ".join(m.removeprefix(f"{NAME}.") for m in c) for c in circles)
    assert circles == [], f"import circles:\n{listed}"


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_never_imports_a_layer_above_it(path: Path) -> None:
    own = _LAYER_OF[_top_name(path)]
    offending = set()
    for module in imported_modules(path):
        if not module.startswith(f"{NAME}."):
            continue
        target = module.split(".")[1]
        if target in _LAYER_OF and _LAYER_OF[target] > own:
            offending.add(module)
    assert offending == set()


def test_the_helpers_below_the_passes_import_no_layer() -> None:
    for helper in ("_added.py", "_messages.py", "_model_classes.py", "_reasoning.py"):
        modules = imported_modules(PACKAGE / helper)
        layered = {m for m in modules if m.startswith(NAME) and not m.startswith(f"{NAME}._")}
        assert layered == set(), helper


def test_importing_the_package_leaves_the_tools_apart_from_the_hook_unimported() -> None:
    """The command line, the demo, the transcripts and the Anthropic body converters are
    not on the import path of the governor, the node or the middleware."""
    code = (
        "import sys, langchain_context_governance as p; p.ContextGovernanceMiddleware; "
        "print(sorted(m for m in sys.modules if m.startswith('langchain_context_governance')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    for tool in ("cli", "demo", "transcripts", "anthropic_messages"):
        assert f"{NAME}.{tool}'" not in loaded
    assert f"{NAME}.governor'" in loaded
