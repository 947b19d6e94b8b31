"""The package's layers import only downwards, so no import cycle can come back.

`_added`, `_messages`, `_reasoning` and `tokens` -> `offload` -> `passes` -> `policy` ->
`rules` -> `state` -> `governor` -> the integrations. A module may import its own layer and
those below it, at the top of the file or inside a function alike.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_context_governance"
NAME = "langchain_context_governance"

# For each layer, the layers above it, which it must never import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "offload": ("passes", "policy", "rules", "state", "governor", "middleware", "langgraph"),
    "passes": ("policy", "rules", "state", "governor", "middleware", "langgraph"),
    "policy": ("rules", "state", "governor", "middleware", "langgraph"),
    "rules": ("state", "governor", "middleware", "langgraph"),
    "state": ("governor", "middleware", "langgraph"),
}


# The keep-recent cut (passes/snip.py) writes the note whose home is policy/note.py; the cut
# itself moves to policy/ with issue 26, and this exception with it.
ALLOWED = {"passes/snip.py": f"{NAME}.policy.note"}


def _allowed(path: str, module: str) -> bool:
    allowed = ALLOWED.get(path)
    return allowed is not None and (module == allowed or module.startswith(f"{allowed}."))


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


@pytest.mark.parametrize("layer", list(FORBIDDEN))
def test_a_layer_never_imports_a_layer_above_it(layer: str) -> None:
    offending = {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / layer).glob("*.py"))
        for module in imported_modules(path)
        for above in FORBIDDEN[layer]
        if module == f"{NAME}.{above}" or module.startswith(f"{NAME}.{above}.")
        if not _allowed(str(path.relative_to(PACKAGE)), module)
    }
    assert offending == set()


def test_the_helpers_below_the_passes_import_no_layer() -> None:
    for helper in ("_added.py", "_messages.py", "_reasoning.py"):
        modules = imported_modules(PACKAGE / helper)
        layered = {m for m in modules if m.startswith(NAME) and not m.startswith(f"{NAME}._")}
        assert layered == set(), helper
