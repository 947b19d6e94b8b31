"""The engine decides nothing: the governor's request is the plain policy's.

The governor makes each call cheap with an engine: the repair stream (each group repaired
once), the incremental replay (each call point replayed once), the request assembly's
reuse of what it made for the objects of the previous call, the continued request rules,
and the record a new worker takes up. None of it may change a request. The plain policy
is the same decisions run with none of that: the provider rules over the whole history,
a fresh replay of every call point with a fresh assembly (`CacheAwareReplay`, as
`compact_in_batches` runs it), the provider rules over the whole request (planned again
with what they add counted, where that takes the request over budget), then the last
resort (`truncate_oversized_messages`), which changes only a request still over budget.

On growing tool-calling histories every call is governed one of three ways, at random:
by the worker that served the call before (given the very objects again), by that worker
given the history reloaded (new objects), or by a new worker given the history reloaded
and the record of the call before. Each must send exactly the plain policy's request.

Reasoning is out of scope here (no thinking blocks): test_reasoning_state.py and
test_thinking_agents.py check what an edit does to it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_context_governance import (
    ContextGovernor,
    apply_provider_rules,
    truncate_oversized_messages,
)
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.tokens.counter import get_token_counter
from tests.builders import ai_calls, call, result

pytestmark = pytest.mark.fuzz

EXAMPLES = 300 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else 12
PROVIDERS = ("openai", "anthropic", "mistral", "strict")
MAX_OUTPUT = 200
KEEP_RECENT = 2
MIN_CHARS = 100
EXCLUDED = "grep"


@st.composite
def tool_agent_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A well-formed tool-calling agent's history: results of every size (those of `grep`
    excluded from compaction where the settings say so), parallel calls, answers and
    follow-up questions, an id on every message as LangGraph gives them."""
    messages: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("fix it")]
    for step in range(draw(st.integers(4, 24))):
        kind = draw(st.sampled_from(("call", "call", "call", "calls", "follow-up")))
        size = draw(st.sampled_from((40, 300, 900, 2_500)))
        tool = draw(st.sampled_from(("read_file", EXCLUDED, "exec")))
        if kind == "call":
            messages += [ai_calls(call(f"c{step}", tool)), result(f"c{step}", "x" * size, tool)]
        elif kind == "calls":
            calls = [call(f"c{step}a", tool), call(f"c{step}b", EXCLUDED)]
            results = [
                result(f"c{step}a", f"id-{step} " * (size // 8), tool),
                result(f"c{step}b", "z", EXCLUDED),
            ]
            messages += [ai_calls(*calls), *results]
        else:
            messages += [AIMessage(f"done {step}"), HumanMessage(f"now step {step}")]
    return [
        message.model_copy(update={"id": f"m{index}"}) for index, message in enumerate(messages)
    ]


def call_points(history: Sequence[BaseMessage]) -> list[int]:
    """The lengths at which the agent calls the model: after a user message or after the
    last result of a call."""
    return [
        end
        for end in range(3, len(history) + 1)
        if isinstance(history[end - 1], (HumanMessage, ToolMessage))
        and not (end < len(history) and isinstance(history[end], ToolMessage))
    ]


def reloaded(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What a checkpointer gives back: equal messages, new objects."""
    return messages_from_dict(messages_to_dict(list(history)))


def dumps(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [message.model_dump() for message in messages]


def plain_policy(
    history: Sequence[BaseMessage], *, provider: str, window: int, exclude: bool
) -> list[BaseMessage]:
    """The request the policy makes of `history` with no state and no engine: the steps
    of `pipeline.STEPS` that act on these histories, each over the whole list."""
    budget = window - MAX_OUTPUT
    counter = get_token_counter("approximate")
    fixed = counter.request_overhead
    compaction = ResultCompaction(
        keep_recent=KEEP_RECENT,
        min_chars=MIN_CHARS,
        exclude_tools={EXCLUDED} if exclude else (),
    )
    repaired = apply_provider_rules(history, provider=provider)

    def planned(rules_tokens: int) -> tuple[int, list[BaseMessage]]:
        replay = CacheAwareReplay(max_tokens=budget, counter=counter, compaction=compaction)
        plan = replay.plan(repaired, fixed_tokens=fixed, rules_tokens=rules_tokens)
        return plan.tokens_after, apply_provider_rules(plan.messages, provider=provider)

    planned_tokens, request = planned(0)
    with_rules = counter.count_messages(request)
    if planned_tokens <= budget < with_rules:
        # What the request rules add is counted, and the call planned again (step 4).
        _, request = planned(with_rules - planned_tokens)
    return truncate_oversized_messages(
        request,
        max_tokens=budget,
        min_chars=MIN_CHARS,
        exclude_tools={EXCLUDED} if exclude else (),
        token_counter="approximate",
    )


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    history=tool_agent_histories(),
    provider=st.sampled_from(PROVIDERS),
    window=st.integers(1_200, 8_000),
    exclude=st.booleans(),
    ways=st.lists(st.sampled_from(("same objects", "reloaded", "new worker")), min_size=60),
)
def test_every_call_sends_the_plain_policys_request(
    history: list[BaseMessage], provider: str, window: int, exclude: bool, ways: list[str]
) -> None:
    def make() -> ContextGovernor:
        return ContextGovernor(
            provider=provider,
            context_window_tokens=window,
            max_output_tokens=MAX_OUTPUT,
            safety_buffer=0,
            keep_recent=KEEP_RECENT,
            min_chars=MIN_CHARS,
            exclude_tools={EXCLUDED} if exclude else frozenset(),
            token_counter="approximate",
        )

    worker, record = make(), None
    for end, way in zip(call_points(history), ways, strict=False):
        now = history[:end]
        if way == "same objects":
            outcome = worker.govern(now, thread_id="t")
        elif way == "reloaded":
            outcome = worker.govern(reloaded(now), thread_id="t")
        else:
            worker = make()
            outcome = worker.govern(reloaded(now), thread_id="t", record=record)
        record = outcome.record
        expected = plain_policy(now, provider=provider, window=window, exclude=exclude)
        assert dumps(outcome.messages) == dumps(expected), (end, way)


def test_the_histories_make_the_policy_compact_and_cut() -> None:
    """The property above is about the engine's edits: its histories must make them."""
    steps: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("fix it")]
    for n in range(40):
        steps += [ai_calls(call(f"x{n}", "read_file")), result(f"x{n}", "y" * 2_500, "read_file")]
    request = plain_policy(steps, provider="openai", window=4_000, exclude=True)
    assert len(request) < len(steps)
    assert any("Output cleared" in str(message.content) for message in request)
