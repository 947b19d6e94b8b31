"""Every docstring example of the package runs as written."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import langchain_context_governance

MODULES = sorted(
    module.name
    for module in pkgutil.walk_packages(
        langchain_context_governance.__path__, prefix="langchain_context_governance."
    )
    if ".data" not in module.name and not module.name.endswith("__main__")
)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
