"""No poisoning: what one conversation's replies report never moves another's budget, and
only a refusal for length, recognised by its type and code, raises a calibration, within
bounds and for a while (issue 28, item 4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.overflow import call_with_overflow_recovery
from langchain_context_governance.tokens.calibration import (
    MAX_STATED_SCALE,
    SHARED_MAX_FACTOR,
    UNCALIBRATED,
    Calibration,
    Overflow,
    SharedCalibration,
    forget_shared_calibrations,
    overflow_from_error,
    with_overflows,
)
from tests.builders import ai_calls, call, result, tool_loop

WINDOW = 20_000


@pytest.fixture(autouse=True)
def no_learned_defaults() -> Iterator[None]:
    forget_shared_calibrations()
    yield
    forget_shared_calibrations()


def governor() -> ContextGovernor:
    return ContextGovernor(context_window_tokens=WINDOW, max_output_tokens=0, safety_buffer=0)


def reporting(history: list[BaseMessage], input_tokens: int) -> list[BaseMessage]:
    """`history` with every assistant reply reporting `input_tokens` as its request's size."""
    usage = {"input_tokens": input_tokens, "output_tokens": 1, "total_tokens": input_tokens + 1}
    return [
        m.model_copy(update={"usage_metadata": usage}) if isinstance(m, AIMessage) else m
        for m in history
    ]


def bob_history() -> list[BaseMessage]:
    return tool_loop(70, size=1_100)


@pytest.mark.parametrize("reported", [1, 10**12])
def test_one_conversation_s_reports_never_move_another_s_request(reported: int) -> None:
    shared = governor()
    before = shared.govern(bob_history(), thread_id="bob").messages
    forget_shared_calibrations()
    for thread in ("alice", "mallory"):
        # The same attacker behind several threads: every reply reports `reported`.
        shared.govern(reporting(tool_loop(40, size=900), reported), thread_id=thread)
    after = governor().govern(bob_history(), thread_id="bob")
    assert after.messages == before
    assert after.report.calibration_factor == 1.0


def test_the_shared_default_moves_only_with_agreeing_conversations_within_its_band() -> None:
    shared = SharedCalibration()
    for conversation, ratio in enumerate((3.0, 3.5, 3.2, 0.2)):
        shared.observe(estimate=1_000, reported=int(1_000 * ratio), conversation=conversation)
    assert shared.value.factor == SHARED_MAX_FACTOR
    low = SharedCalibration()
    for conversation in range(5):
        low.observe(estimate=1_000, reported=600, conversation=conversation)
    assert low.value == UNCALIBRATED  # never below 1.0
    split = SharedCalibration()
    for conversation, ratio in enumerate((1.0, 2.0, 3.0, 4.0)):
        split.observe(estimate=1_000, reported=int(1_000 * ratio), conversation=conversation)
    assert split.value == UNCALIBRATED  # no three agree


def test_an_error_that_mentions_a_context_window_is_no_refusal() -> None:
    shared = governor()
    calls: list[Any] = []

    def model_call(governed: Any) -> str:
        calls.append(governed)
        raise ValueError("upstream proxy: invalid context window header")

    with pytest.raises(ValueError, match="invalid context window header"):
        call_with_overflow_recovery(
            lambda overflows: shared.govern(bob_history(), overflows=overflows),
            model_call,
            retries=2,
            mark=lambda reply, overflows: reply,
        )
    assert len(calls) == 1, "the error was taken for a refusal and retried"


def test_refusals_are_recognised_by_type_and_code() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {"message": "This model's maximum context length is 8192 tokens.", "code": None}

    def openai_error(code: str | None) -> openai.BadRequestError:
        response = httpx.Response(400, request=request)
        return openai.BadRequestError(
            "Error code: 400", response=response, body={**body, "code": code}
        )

    assert overflow_from_error(openai_error("context_length_exceeded"), estimate_tokens=9)
    assert overflow_from_error(openai_error("invalid_value"), estimate_tokens=9) is None
    mistral = {
        "object": "error",
        "message": "Prompt contains 40225 tokens and 0 draft tokens, too large for model with "
        "32768 maximum context length",
        "type": "invalid_request_error",
    }

    def http_error(status: int) -> httpx.HTTPStatusError:
        response = httpx.Response(status, request=request, content=json.dumps(mistral).encode())
        return httpx.HTTPStatusError(f"Error response {status}", request=request, response=response)

    assert overflow_from_error(http_error(400), estimate_tokens=9) == Overflow(9, 40_225, 32_768)
    assert overflow_from_error(http_error(500), estimate_tokens=9) is None


def test_a_stated_size_is_bounded_by_the_window() -> None:
    refusal = ContextOverflowError(f"prompt is too long: {10**12} tokens > {WINDOW} maximum")
    overflow = overflow_from_error(refusal, estimate_tokens=WINDOW - 500)
    assert overflow is not None and overflow.reported_tokens == 10**12
    raised = UNCALIBRATED.observe_overflow(overflow, budget=WINDOW)
    # What the retry is cut to: a share of the window, never a few tokens.
    assert raised.factor <= MAX_STATED_SCALE * WINDOW / (WINDOW - 500) * 1.1 + 1e-6
    tiny_limit = Overflow(WINDOW - 500, WINDOW + 10, limit_tokens=1)
    assert UNCALIBRATED.observe_overflow(tiny_limit, budget=WINDOW).factor <= 2 * 1.1 * 1.1


def test_what_a_refusal_added_decays_call_by_call() -> None:
    raised = UNCALIBRATED.observe_overflow(Overflow(1_000), budget=1_000)
    assert raised.factor > 1.2
    decayed = raised
    for _ in range(12):
        decayed = decayed.decayed()
    assert decayed == Calibration(factor=1.0, observations=1)
    # In a conversation: the retry's factor replays at its call point, then decays with
    # every later call the provider answered.
    history = tool_loop(30, size=900)
    estimate = governor().govern(history).report.tokens_after
    refused = Overflow(estimate_tokens=estimate)
    retry = governor().govern(history, overflows=[refused]).report.calibration_factor
    reply = with_overflows(ai_calls(call("r", "read_file")), [refused])
    later = [*history, reply, result("r", "ok")]
    factors = []
    for n in range(12):
        factors.append(governor().govern(later).report.calibration_factor)
        later = [*later, ai_calls(call(f"x{n}", "read_file")), result(f"x{n}", "ok")]
    assert factors[0] < retry and factors == sorted(factors, reverse=True)
    # Twelve calls later, less than a twentieth of what the refusal added is left.
    assert factors[-1] - 1.0 < (retry - 1.0) / 20
