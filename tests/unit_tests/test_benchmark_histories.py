"""The damaged and reloaded histories and the interleaved conversations `make bench` measures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from benchmarks.concurrency import run_conversations
from benchmarks.histories import (
    DAMAGED_HISTORY_MIN_MESSAGES,
    RESUMED_AFTER_INTERRUPTION,
    UNANSWERED_CALL_STEPS,
    HistoryGenerator,
    build_damaged_history,
    reload_messages,
)
from langchain_context_governance.rules.validate import validate_messages


@settings(max_examples=15, deadline=None)
@given(
    n_messages=st.integers(min_value=DAMAGED_HISTORY_MIN_MESSAGES, max_value=150),
    seed=st.integers(min_value=0, max_value=1_000),
)
def test_damaged_history_has_the_length_and_only_the_old_defects(
    n_messages: int, seed: int
) -> None:
    history = build_damaged_history(n_messages, seed=seed)

    assert len(history) == n_messages
    assert isinstance(history[-1], AIMessage) and not history[-1].tool_calls
    unanswered = [
        v for v in validate_messages(history, provider="openai") if v.rule == "unanswered-tool-call"
    ]
    assert len(unanswered) == UNANSWERED_CALL_STEPS
    resumed = [m for m in history if m.content == RESUMED_AFTER_INTERRUPTION]
    assert len(resumed) == UNANSWERED_CALL_STEPS
    assert all(isinstance(m, HumanMessage) for m in resumed)
    assert history == build_damaged_history(n_messages, seed=seed)


def test_damaged_history_keeps_growing_after_its_trailing_answer() -> None:
    generator = HistoryGenerator(seed=3)
    history = build_damaged_history(40, generator=generator)
    grown = [*history, *generator.iteration()]

    assert grown[:40] == history
    assert isinstance(grown[40], AIMessage)


def test_damaged_history_refuses_a_length_it_cannot_hold() -> None:
    with pytest.raises(ValueError, match="n_messages must be at least"):
        build_damaged_history(DAMAGED_HISTORY_MIN_MESSAGES - 1)


def test_reloaded_messages_are_equal_new_objects() -> None:
    history = build_damaged_history(30, seed=1)
    reloaded = reload_messages(history)

    assert reloaded == history
    assert all(a is not b for a, b in zip(reloaded, history, strict=True))


def test_interleaved_conversations_time_every_call_and_check_every_later_one() -> None:
    result = run_conversations(3, iterations=6, seed=0, measure_memory=True)

    assert result.calls == 3 * 7
    assert result.later_calls == 3 * 6
    assert 0 <= result.prefix_unknown <= result.later_calls
    # Each conversation is called at 2, 4, ..., 14 messages: 12 and 14 are near 20.
    assert len(result.seconds_by_bucket[20]) == 3 * 2
    assert result.seconds_by_bucket[80] == [] and result.seconds_by_bucket[160] == []
    assert result.retained_bytes is not None and result.retained_bytes > 0
