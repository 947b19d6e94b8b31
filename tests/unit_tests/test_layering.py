"""The package's layers import only downwards, so no import circle can come back.

`LAYERS` lists the modules from the bottom up; a module may import its own layer and those
below it, at the top of the file, inside a function, or for type checking alike. The
decisions (`policy`) sit below the public passes, which are thin wrappers over them. The
integrations are layers too: the LangGraph node and the overflow recovery work with any
governor (`tracing.Governs`), so the governor may build them without a circle; the
middleware, which makes governors, sits above it; the command line and the demo above all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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
