"""The benchmark that splits a steady call into its parts times the real steps and leaves
the package as it found it."""

from __future__ import annotations

import langchain_context_governance.governor as governor_module
import langchain_context_governance.pipeline as pipeline_module
from benchmarks.call_parts import CONTENT_KEYS, LCEL_RUN, call_parts_table, measure_call_parts
from langchain_context_governance import ContextGovernor


def test_every_step_is_timed_inside_the_calls_and_the_package_is_restored() -> None:
    steps, report_of, govern = (
        pipeline_module.STEPS,
        governor_module.report_of,
        ContextGovernor.govern,
    )
    parts = measure_call_parts("reloaded", size=80, budget=2_000, calls=3)
    assert pipeline_module.STEPS is steps
    assert governor_module.report_of is report_of
    assert ContextGovernor.govern is govern
    for name, _ in steps:
        assert parts.milliseconds[name] > 0, name
    assert parts.milliseconds[CONTENT_KEYS] > 0
    assert parts.milliseconds[LCEL_RUN] > 0
    # Timed inside the calls: the steps are part of each call, not beside it.
    assert 0 < sum(parts.milliseconds[name] for name, _ in steps) < parts.whole


def test_the_content_keys_are_timed_for_a_reloaded_history_only() -> None:
    fits = measure_call_parts("fits", size=60, budget=100_000, calls=2)
    assert CONTENT_KEYS not in fits.milliseconds
    table = call_parts_table([fits])
    assert "repair the history" in table and CONTENT_KEYS not in table
