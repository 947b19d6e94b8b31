"""Calibration: the factor learned from the provider's counts, refusals, and their marks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_context_governance._added import added_kind, mark_added
from langchain_context_governance.tokens.calibration import (
    LOWER_RATE,
    MAX_FACTOR,
    MIN_FACTOR,
    STATED_OVERFLOW_MARGIN,
    UNCALIBRATED,
    UNSTATED_OVERFLOW_SCALE,
    Calibration,
    Overflow,
    overflow_from_error,
    overflows_of,
    reported_input_tokens,
    shared_calibration,
    with_overflows,
)

# The project's hypothesis profiles (derandomized by default, `make fuzz` for more).
from tests import strategies as _hypothesis_profiles  # noqa: F401

# --- observe ---------------------------------------------------------------------------


def test_a_higher_ratio_is_taken_at_once() -> None:
    calibration = UNCALIBRATED.observe(estimate=1_000, reported=1_400)
    assert calibration == Calibration(factor=1.4, observations=1)
    assert calibration.observe(estimate=1_000, reported=1_600).factor == 1.6


def test_a_lower_ratio_is_approached_by_a_tenth_of_the_gap() -> None:
    calibration = Calibration(factor=1.4, observations=3)
    lowered = calibration.observe(estimate=1_000, reported=1_000)
    assert lowered.factor == pytest.approx(1.4 - 0.4 * LOWER_RATE)
    assert lowered.observations == 4
    for _ in range(200):
        lowered = lowered.observe(estimate=1_000, reported=1_000)
    assert lowered.factor == pytest.approx(1.0, abs=1e-3)


def test_the_factor_stays_within_its_bounds() -> None:
    assert UNCALIBRATED.observe(estimate=10, reported=1_000).factor == MAX_FACTOR
    low = UNCALIBRATED
    for _ in range(300):
        low = low.observe(estimate=1_000, reported=10)
    assert low.factor == pytest.approx(MIN_FACTOR, abs=1e-4)
    with pytest.raises(ValueError, match="factor must be in"):
        Calibration(factor=MAX_FACTOR * 2)


@pytest.mark.parametrize(("estimate", "reported"), [(0, 100), (100, 0), (-5, 100)])
def test_sizes_that_say_nothing_change_nothing(estimate: int, reported: int) -> None:
    calibration = Calibration(factor=1.2, observations=2)
    assert calibration.observe(estimate=estimate, reported=reported) is calibration


def test_the_same_observations_give_the_same_factor() -> None:
    pairs = [(1_000, 1_310), (2_000, 2_450), (5_000, 6_100), (800, 1_300), (3_000, 3_300)]
    first = second = UNCALIBRATED
    for estimate, reported in pairs:
        first = first.observe(estimate=estimate, reported=reported)
    for estimate, reported in pairs:
        second = second.observe(estimate=estimate, reported=reported)
    assert first == second
    assert first.factor == pytest.approx(1.625 - (1.625 - 1.1) * LOWER_RATE)


def test_corrected_and_limit_are_inverse_bounds() -> None:
    calibration = Calibration(factor=1.3)
    assert calibration.corrected(1_000) == 1_300
    assert calibration.corrected(1_001) == 1_302
    assert calibration.limit(1_300) == 1_000
    assert calibration.corrected(calibration.limit(12_345)) <= 12_345
    assert UNCALIBRATED.corrected(777) == UNCALIBRATED.limit(777) == 777


# --- the record ------------------------------------------------------------------------


def test_the_record_round_trips() -> None:
    calibration = UNCALIBRATED.observe(estimate=3_000, reported=3_917)
    data = calibration.to_dict()
    assert data == {"version": 2, "factor": calibration.factor, "observations": 1, "boost": 1.0}
    assert Calibration.from_dict(data) == calibration


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"version": 1, "factor": 1.0, "observations": 0, "boost": 1.0}, "version 2"),
        ({"factor": 1.0, "observations": 0, "boost": 1.0}, "version 2"),
        ({"version": 2, "factor": "1.2", "observations": 0, "boost": 1.0}, "factor must be a"),
        ({"version": 2, "factor": 1.2, "observations": 1.5, "boost": 1.0}, "observations must"),
        ({"version": 2, "factor": 9.0, "observations": 1, "boost": 1.0}, "factor must be in"),
        ({"version": 2, "factor": 1.0, "observations": -1, "boost": 1.0}, "observations must be"),
        ({"version": 2, "factor": 1.0, "observations": 0, "boost": 0.5}, "boost must be in"),
        ({"version": 2, "factor": float("nan"), "observations": 0, "boost": 1.0}, "finite"),
        ({"version": 2, "factor": 1.0, "observations": 0, "boost": 1.0, "x": 1}, "fields"),
    ],
)
def test_a_bad_record_is_refused_by_name(data: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Calibration.from_dict(data)


# --- refusals --------------------------------------------------------------------------


def test_a_stated_refusal_raises_the_factor_past_its_ratio() -> None:
    overflow = Overflow(estimate_tokens=10_000, reported_tokens=13_000, limit_tokens=128_000)
    raised = UNCALIBRATED.observe_overflow(overflow, budget=20_000)
    assert raised.factor == pytest.approx(1.3 * STATED_OVERFLOW_MARGIN)


def test_a_refusal_never_lowers_the_factor() -> None:
    overflow = Overflow(estimate_tokens=10_000, reported_tokens=10_500)
    calibration = Calibration(factor=1.5, observations=4)
    raised = calibration.observe_overflow(overflow, budget=9_000)
    assert raised.factor == 1.5
    assert raised.observations == 5


def test_an_unstated_refusal_assumes_a_quarter_more_than_the_larger_of_estimate_and_limit() -> None:
    calibration = Calibration(factor=1.2, observations=1)
    unstated = Overflow(estimate_tokens=10_000)
    assert calibration.observe_overflow(unstated, budget=9_000).factor == pytest.approx(
        1.2 * UNSTATED_OVERFLOW_SCALE
    )
    with_limit = Overflow(estimate_tokens=10_000, limit_tokens=16_000)
    assert calibration.observe_overflow(with_limit, budget=12_000).factor == pytest.approx(
        1.6 * UNSTATED_OVERFLOW_SCALE
    )


def test_a_limit_below_the_budget_scales_the_factor_so_that_the_retry_fits_it() -> None:
    overflow = Overflow(estimate_tokens=9_000, reported_tokens=9_000, limit_tokens=8_000)
    calibration = UNCALIBRATED.observe_overflow(overflow, budget=10_000)
    assert calibration.factor == pytest.approx(STATED_OVERFLOW_MARGIN * 10_000 / 8_000)
    # An estimate the budget admits now counts at most the limit, by the provider's count.
    admitted = calibration.limit(10_000)
    assert admitted * (9_000 / 9_000) <= 8_000


@pytest.mark.parametrize(
    ("message", "reported", "limit"),
    [
        (
            "Error code: 400 - {'error': {'message': \"This model's maximum context length is "
            "128000 tokens. However, your messages resulted in 130532 tokens. Please reduce "
            "the length of the messages.\", 'code': 'context_length_exceeded'}}",
            130_532,
            128_000,
        ),
        (
            "This model's maximum context length is 32768 tokens. However, you requested "
            "40000 tokens (39000 in the messages, 1000 in the completion).",
            40_000,
            32_768,
        ),
        ("prompt is too long: 208310 tokens > 200000 maximum", 208_310, 200_000),
        (
            "400 INVALID_ARGUMENT. The input token count (1200000) exceeds the maximum number "
            "of tokens allowed (1048576).",
            1_200_000,
            1_048_576,
        ),
        (
            "Prompt contains 131294 tokens and 0 draft tokens, too large for model with 131072 "
            "maximum context length",
            131_294,
            131_072,
        ),
    ],
)
def test_the_sizes_a_provider_states_are_read(message: str, reported: int, limit: int) -> None:
    overflow = overflow_from_error(ContextOverflowError(message), estimate_tokens=99)
    assert overflow == Overflow(estimate_tokens=99, reported_tokens=reported, limit_tokens=limit)


def test_a_context_overflow_error_without_sizes_is_a_refusal_of_unknown_size() -> None:
    error = ContextOverflowError("Your input exceeds the limit of this model.")
    assert overflow_from_error(error, estimate_tokens=5) == Overflow(estimate_tokens=5)


def test_a_refusal_is_found_in_the_error_it_was_raised_from() -> None:
    try:
        try:
            raise ContextOverflowError("prompt is too long: 300 tokens > 200 maximum")
        except ContextOverflowError as cause:
            raise RuntimeError("the model call failed") from cause
    except RuntimeError as error:
        overflow = overflow_from_error(error, estimate_tokens=250)
    assert overflow == Overflow(estimate_tokens=250, reported_tokens=300, limit_tokens=200)


@pytest.mark.parametrize(
    "message",
    [
        "rate limit reached",
        "invalid tool call id",
        "Error code: 500",
        "",
        # Words of a refusal in an error of no refusal's type (issue 28).
        "upstream proxy: invalid context window header",
        "prompt is too long: 300 tokens > 200 maximum",
        "context_length_exceeded",
    ],
)
def test_other_errors_are_no_refusal(message: str) -> None:
    assert overflow_from_error(ValueError(message), estimate_tokens=10) is None


# --- marks and usage -------------------------------------------------------------------


def test_the_refusals_travel_with_the_reply_and_keep_other_marks() -> None:
    overflows = [Overflow(100, 130, 120), Overflow(90)]
    reply = mark_added(AIMessage("ok", response_metadata={"model_name": "m"}), "assistant-turn")
    marked = with_overflows(reply, overflows)
    assert overflows_of(marked) == tuple(overflows)
    assert added_kind(marked) == "assistant-turn"
    assert marked.response_metadata["model_name"] == "m"
    assert overflows_of(reply) == ()
    assert with_overflows(reply, []) is reply


@pytest.mark.parametrize(
    "mark",
    [
        "text",
        {"overflows": "none"},
        {"overflows": [{"reported_tokens": 5}]},
        {"overflows": [{"estimate_tokens": -1}]},
    ],
)
def test_an_unreadable_mark_records_no_refusal(mark: Any) -> None:
    message = AIMessage("ok", response_metadata={"context_governance": mark})
    assert overflows_of(message) == ()


def test_reported_input_tokens_is_the_usage_of_a_reply_only() -> None:
    usage = {"input_tokens": 812, "output_tokens": 9, "total_tokens": 821}
    assert reported_input_tokens(AIMessage("a", usage_metadata=usage)) == 812
    assert reported_input_tokens(AIMessage("a")) is None
    zero = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    assert reported_input_tokens(AIMessage("a", usage_metadata=zero)) is None
    assert reported_input_tokens(HumanMessage("a")) is None
    assert reported_input_tokens(ToolMessage("a", tool_call_id="c")) is None


def test_the_shared_default_learns_from_conversations_that_agree() -> None:
    shared = shared_calibration("test_calibration: a model")
    assert shared is shared_calibration("test_calibration: a model")
    for conversation in ("a", "b", "c"):
        shared.observe(estimate=1_000, reported=1_250, conversation=conversation)
    assert shared_calibration("test_calibration: a model").value.factor == 1.25
    assert shared_calibration("test_calibration: another model").value == UNCALIBRATED


# --- properties ------------------------------------------------------------------------

observations = st.lists(
    st.tuples(st.integers(1, 200_000), st.integers(1, 400_000)), min_size=1, max_size=30
)


@given(observations)
def test_after_any_observations_the_factor_is_bounded_and_the_last_higher_ratio_is_covered(
    pairs: list[tuple[int, int]],
) -> None:
    calibration = UNCALIBRATED
    for estimate, reported in pairs:
        before = calibration.factor
        calibration = calibration.observe(estimate=estimate, reported=reported)
        assert MIN_FACTOR <= calibration.factor <= MAX_FACTOR
        if before <= reported / estimate <= MAX_FACTOR:
            # Raised at once: the request just reported is no longer under-counted.
            assert calibration.corrected(estimate) >= reported
        else:
            # Lowered slowly: never below the ratio, by at most a tenth of the gap.
            assert calibration.factor >= min(before, max(reported / estimate, MIN_FACTOR)) - 1e-6
            assert before - calibration.factor <= (before - MIN_FACTOR) * LOWER_RATE + 1e-6
    assert Calibration.from_dict(calibration.to_dict()) == calibration
