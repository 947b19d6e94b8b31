"""The tuning shares: each documented, and a change of one reaches the policy (the
trade-off benchmark varies them, and a variant that changed nothing would go unseen)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from benchmarks.policies import Variant, constants_of
from langchain_context_governance import ContextGovernor, tuning
from langchain_context_governance._added import added_kind
from tests.builders import tool_loop

TUNING = Path(tuning.__file__)


def test_every_share_has_a_docstring() -> None:
    body = ast.parse(TUNING.read_text(encoding="utf-8")).body
    names = [
        node.targets[0].id
        for node in body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    ]
    documented = {
        node.targets[0].id
        for node, after in itertools.pairwise(body)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    }
    assert names and set(names) == documented


def _data_turns(request: list) -> int:
    return sum(added_kind(message) == "cut-data" for message in request)


def test_a_variant_of_a_share_changes_what_the_policy_sends() -> None:
    history = tool_loop(60, size=1_500)
    default = ContextGovernor(context_window_tokens=8_000, max_output_tokens=500).invoke(history)
    with constants_of(Variant("no values", constants={"NOTE_VALUES_SHARE": 0.0})):
        without = ContextGovernor(context_window_tokens=8_000, max_output_tokens=500).invoke(
            history
        )
    assert tuning.NOTE_VALUES_SHARE > 0
    assert _data_turns(default) == 1
    assert _data_turns(without) == 0
