"""ContinuedRepair gives exactly what Profile.repair gives, looking only at what is new."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance._messages import message_fingerprint
from langchain_context_governance.rules.continued import CLASSIFIED_RULES, ContinuedRepair
from langchain_context_governance.rules.profile import resolve_profile
from langchain_context_governance.rules.table import RULES
from langchain_context_governance.rules.validate import PROVIDERS
from tests.strategies import budgets, histories

every_profile = pytest.mark.parametrize("provider", PROVIDERS)


def prints(messages: Sequence[BaseMessage]) -> array[int]:
    return array("q", map(message_fingerprint, messages))


def dumps(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [message.model_dump() for message in messages]


@st.composite
def with_reasoning_content(draw: st.DrawFn, messages: list[BaseMessage]) -> list[BaseMessage]:
    """`messages` where some responses with tool calls carry DeepSeek's reasoning_content."""
    output = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls and draw(st.booleans()):
            kwargs = {**message.additional_kwargs, "reasoning_content": "thought"}
            message = message.model_copy(update={"additional_kwargs": kwargs})
        output.append(message)
    return output


def call(number: int, **kwargs: Any) -> list[BaseMessage]:
    call_id = f"call{number:05d}"  # nine letters or digits: every profile takes it
    step = {"name": "grep", "args": {"n": number}, "id": call_id}
    return [
        AIMessage("", tool_calls=[step], **kwargs),
        ToolMessage(f"hit {number}", tool_call_id=call_id),
    ]


def test_every_rule_is_classified() -> None:
    """A rule this module has not reasoned about would make every request cost it whole."""
    assert {rule.name for rule in RULES} <= CLASSIFIED_RULES


@every_profile
@given(
    history=histories(),
    new=histories(max_size=6).flatmap(with_reasoning_content),
    budget=st.one_of(st.none(), budgets),
)
def test_a_request_that_continues_a_legal_one_is_repaired_as_profile_repair_does(
    provider: str, history: list[BaseMessage], new: list[BaseMessage], budget: int | None
) -> None:
    """Whatever comes after a legal request, legal or not, the result is Profile.repair's."""
    profile = resolve_profile(provider)
    first = ContextGovernor(
        provider=provider, context_window_tokens=budget, max_output_tokens=0, safety_buffer=0
    ).invoke(history)
    repairs = ContinuedRepair(profile)
    assert dumps(repairs.repair(first, prints=prints(first))[0]) == dumps(profile.repair(first)[0])
    request = [*first, *new]
    repaired, changes = repairs.repair(request, prints=prints(request))
    expected, expected_changes = profile.repair(request)
    assert dumps(repaired) == dumps(expected)
    assert changes == expected_changes
    # And the next call, on what came out of it.
    following = [*expected, *new[:2]]
    repaired, changes = repairs.repair(following, prints=prints(following))
    expected, expected_changes = profile.repair(following)
    assert (dumps(repaired), changes) == (dumps(expected), expected_changes)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "strict", "mistral", "gemma"])
def test_a_growing_tool_loop_is_decided_on_its_last_group(provider: str) -> None:
    profile = resolve_profile(provider)
    repairs = ContinuedRepair(profile)
    request: list[BaseMessage] = [HumanMessage("find it")]
    for number in range(30):
        request = [*request, *call(number)]
        repaired, changes = repairs.repair(request, prints=prints(request))
        expected, expected_changes = profile.repair(request)
        assert (dumps(repaired), changes) == (dumps(expected), expected_changes)
        request = expected
    # Gemma writes tool traffic as text: every request needs a repair, each one whole.
    assert repairs.windows == (0 if provider == "gemma" else 29)


def test_a_reused_call_id_far_back_is_found_without_reading_back() -> None:
    profile = resolve_profile("anthropic")
    repairs = ContinuedRepair(profile)
    request: list[BaseMessage] = [HumanMessage("find it"), *call(1), *call(2)]
    repairs.repair(request, prints=prints(request))
    reused = [*request, *call(1)]
    assert dumps(repairs.repair(reused, prints=prints(reused))[0]) == dumps(
        profile.repair(reused)[0]
    )
    assert repairs.repair(reused, prints=prints(reused))[0] is not reused


def test_reasoning_content_lost_after_the_window_is_written_as_text() -> None:
    profile = resolve_profile("openai")
    repairs = ContinuedRepair(profile)
    thinking = {"reasoning_content": "let me see"}
    request = [HumanMessage("go"), *call(1, additional_kwargs=thinking), *call(2, **{})]
    first = profile.repair(request)[0]
    repairs.repair(first, prints=prints(first))
    longer = [*first, *call(3)]
    assert dumps(repairs.repair(longer, prints=prints(longer))[0]) == dumps(
        profile.repair(longer)[0]
    )


def test_a_loop_whose_opening_lost_its_thinking_is_found_from_the_window() -> None:
    profile = resolve_profile("anthropic")
    repairs = ContinuedRepair(profile)
    thinking = {"type": "thinking", "thinking": "next", "signature": "EqQB"}
    loop = [HumanMessage("go"), *call(1), *call(2)]
    repairs.repair(loop, prints=prints(loop))
    assert repairs.repair(loop, prints=prints(loop))[0] is loop
    step = {"name": "grep", "args": {}, "id": "toolu_9"}
    signed = [AIMessage([thinking], tool_calls=[step]), ToolMessage("x", tool_call_id="toolu_9")]
    longer = [*loop, *signed]
    repaired = repairs.repair(longer, prints=prints(longer))[0]
    assert dumps(repaired) == dumps(profile.repair(longer)[0])
    assert repaired is not longer


def test_without_fingerprints_the_request_is_repaired_whole() -> None:
    profile = resolve_profile("strict")
    repairs = ContinuedRepair(profile)
    request: list[BaseMessage] = [HumanMessage("find it"), *call(1)]
    repairs.repair(request, prints=prints(request))
    repairs.repair([*request, *call(2)], prints=None)
    assert repairs.windows == 0
