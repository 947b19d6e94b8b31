"""The replay's calibration hook: each reply's usage is observed at its call point."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.tokens.calibration import (
    UNCALIBRATED,
    Overflow,
    SharedCalibration,
    with_overflows,
)
from langchain_context_governance.tokens.counter import get_token_counter

BUDGET = 4_000


def usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}


def window(shared: SharedCalibration | None = None) -> CacheAwareReplay:
    return CacheAwareReplay(
        max_tokens=BUDGET, counter=get_token_counter("approximate"), shared_calibration=shared
    )


def loop(rounds: int, *, scale: float | None, result_chars: int = 800) -> list[BaseMessage]:
    """A tool loop whose replies report `scale` x the window's estimate of their request."""
    counter = get_token_counter("approximate")
    history: list[BaseMessage] = [HumanMessage("start")]
    for n in range(rounds):
        call = {"name": "read", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}
        estimate = counter.count_messages(history)
        reply = AIMessage("", tool_calls=[call])
        if scale is not None:
            reply = reply.model_copy(update={"usage_metadata": usage(int(estimate * scale))})
        history += [reply, ToolMessage("r" * result_chars, tool_call_id=f"c{n}")]
    return history


def test_the_factor_comes_from_the_replies_usage() -> None:
    plan = window().plan(loop(3, scale=1.5))
    assert plan.calibration.observations == 3
    assert plan.calibration.factor == 1.5


def test_the_corrected_total_triggers_the_cut_earlier() -> None:
    history = loop(16, scale=1.5)
    uncalibrated = window().plan(loop(16, scale=None))
    calibrated = window().plan(history)
    assert uncalibrated.cut == 0
    assert calibrated.cut > 0
    assert calibrated.calibration.corrected(calibrated.tokens_after) <= BUDGET


def test_a_reply_whose_request_was_over_the_budget_is_not_observed() -> None:
    # The last resort shortened that request: the estimate is not of what was sent.
    huge = [HumanMessage("x" * 40_000), AIMessage("ok", usage_metadata=usage(3_000))]
    plan = window().plan([*huge, HumanMessage("next")])
    assert plan.calibration == UNCALIBRATED


def test_the_models_default_is_used_until_the_history_reports_a_size() -> None:
    shared = SharedCalibration()
    for conversation in range(3):
        shared.observe(estimate=1_000, reported=2_000, conversation=conversation)
    assert window(shared).plan(loop(2, scale=None)).calibration.factor == 2.0
    own = window(shared).plan(loop(2, scale=1.1)).calibration
    assert own.factor == pytest.approx(1.1, abs=0.01)
    assert own.observations == 2


def test_the_shared_default_learns_from_the_final_history_of_several_conversations() -> None:
    shared = SharedCalibration()
    history = loop(4, scale=1.2)
    for _ in range(3):
        replay = window(shared)
        replay.plan(history)
        replay.plan(history)
    # One latest ratio a conversation, each counted once.
    assert shared.value.observations == 3
    assert shared.value.factor == 1.2


def test_a_refusal_recorded_on_a_reply_is_replayed_at_its_call_point() -> None:
    history = loop(10, scale=None)
    live = window()
    estimate = live.plan(history).tokens_after
    refused = Overflow(estimate_tokens=estimate, reported_tokens=2 * estimate)
    retry = live.plan(history, overflows=[refused])
    assert retry.calibration.factor > 2.0
    assert retry.compacted + retry.cut > 0
    assert retry.calibration.corrected(retry.tokens_after) <= BUDGET
    assert window().plan(history, overflows=[refused]).messages == retry.messages
    # The reply reports the size of the retry's request: replayed as the retry was made, the
    # estimate at that call point is the retry's; replayed without the refusal, it would be
    # the refused request's, and the factor learned lower.
    reported = round(retry.calibration.factor * retry.tokens_after)
    reply = AIMessage("done", usage_metadata=usage(reported))
    replayed = window().plan([*history, with_overflows(reply, [refused]), HumanMessage("more")])
    assert replayed.calibration.observations == 2
    # The retry cut: the replay counts the note as a message of its own, while the request
    # joins it with the task (a few tokens less), so the factor is learned within 1%.
    assert replayed.calibration.factor == pytest.approx(retry.calibration.factor, rel=1e-2)
    forgotten = window().plan([*history, reply, HumanMessage("more")])
    assert forgotten.calibration.factor < 0.9 * replayed.calibration.factor
