"""Counting like the provider: calibration from reported usage, and refusals recovered.

The scripted provider's tokenizer counts 1.3x the approximate estimate plus 40 tokens a
message, reports that count in `usage_metadata` where asked, and refuses a request above
its window with an OpenAI-worded `ContextOverflowError`: the governor's own count is an
estimate that under-counts by a third or more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_context_governance import ContextGovernor
from langchain_context_governance.langgraph import (
    GovernedMessagesState,
    build_pre_model_hook,
    with_overflow_recovery,
)
from langchain_context_governance.testing import ContextLengthExceeded, ScriptedChatModel
from langchain_context_governance.tokens.calibration import (
    forget_shared_calibrations,
    overflows_of,
)

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent

from langchain_context_governance.middleware import ContextGovernanceMiddleware

STEPS = 60
TRUE_WINDOW = 12_000
RECURSION_LIMIT = {"recursion_limit": 4 * STEPS + 20}


@tool
def read_chunk(n: int) -> str:
    """Read chunk n of the log."""
    return " ".join(f"line{n}-{i} value={i * n % 97}" for i in range(120))


@pytest.fixture(autouse=True)
def no_learned_defaults() -> Iterator[None]:
    """Each test's conversations start from no model default, and leave none behind: the
    scripted model's default would otherwise carry from one test (and module) to the next."""
    forget_shared_calibrations()
    yield
    forget_shared_calibrations()


def tool_loop_script(steps: int) -> list[AIMessage]:
    calls = [
        AIMessage(
            "",
            tool_calls=[
                {"name": "read_chunk", "args": {"n": n}, "id": f"call{n:05d}", "type": "tool_call"}
            ],
        )
        for n in range(steps)
    ]
    return [*calls, AIMessage("done")]


def provider(*, usage: bool, steps: int = STEPS, **settings: Any) -> ScriptedChatModel:
    """A provider whose tokenizer counts 1.3x the estimate + 40 a message."""
    return ScriptedChatModel(
        tool_loop_script(steps),
        max_input_tokens=TRUE_WINDOW,
        max_output_tokens=500,
        input_token_scale=1.3,
        input_tokens_per_message=40,
        report_usage=usage,
        **settings,
    )


def over_the_true_window(model: ScriptedChatModel) -> int:
    return sum(
        model.input_tokens(request, model.bound_tools) > TRUE_WINDOW for request in model.requests
    )


def governed_agent(model: ScriptedChatModel, **settings: Any) -> Any:
    governor = ContextGovernor.from_model(model, safety_buffer=200, **settings)
    return create_agent(model, [read_chunk], middleware=[ContextGovernanceMiddleware(governor)])


def test_the_provider_refuses_what_the_estimate_lets_through_without_calibration() -> None:
    model = provider(usage=False)
    agent = governed_agent(model, overflow_retries=0)
    with pytest.raises(ContextLengthExceeded) as raised:
        agent.invoke({"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT)
    assert isinstance(raised.value, ContextOverflowError)
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "overflow_retries=0, so it was not governed again" in notes
    assert "the provider counted" in notes


def test_with_usage_reported_a_60_step_agent_never_overflows() -> None:
    model = provider(usage=True)
    result = governed_agent(model).invoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    assert len(model.requests) == STEPS + 1
    assert over_the_true_window(model) == 0
    replies = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert all(not overflows_of(reply) for reply in replies)


def test_without_usage_a_60_step_agent_recovers_each_overflow_by_a_retry() -> None:
    model = provider(usage=False)
    result = governed_agent(model).invoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    overflowed = over_the_true_window(model)
    # Each refusal raises the factor past the refused request's ratio; the ratio of this
    # provider grows with the messages, so a later request can still be refused once.
    assert 1 <= overflowed <= 2
    assert len(model.requests) == STEPS + 1 + overflowed
    retried = [m for m in result["messages"] if isinstance(m, AIMessage) and overflows_of(m)]
    assert len(retried) == overflowed
    for reply in retried:
        (refusal,) = overflows_of(reply)
        assert refusal.limit_tokens == TRUE_WINDOW
        assert refusal.reported_tokens is not None and refusal.reported_tokens > TRUE_WINDOW


async def test_the_async_agent_recovers_the_same_way() -> None:
    model = provider(usage=False)
    result = await governed_agent(model).ainvoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    assert 1 <= over_the_true_window(model) <= 2


def test_a_second_refusal_raises_the_first_error_with_what_was_tried() -> None:
    # A system prompt larger than the window: no cut can make the request fit.
    model = provider(usage=False, steps=1)
    governor = ContextGovernor.from_model(model, safety_buffer=200)
    agent = create_agent(
        model,
        [read_chunk],
        system_prompt="rules " * 12_000,
        middleware=[ContextGovernanceMiddleware(governor)],
    )
    with pytest.raises(ContextLengthExceeded) as raised:
        agent.invoke({"messages": [HumanMessage("read every chunk")]})
    assert len(model.requests) == 2
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "refused for its length 2 times" in notes
    assert "check context_window_tokens" in notes


def test_errors_other_than_refusals_pass_through_untouched() -> None:
    def failing(request: list[BaseMessage]) -> AIMessage:
        raise RuntimeError("rate limited")

    model = ScriptedChatModel(failing, max_input_tokens=TRUE_WINDOW)
    agent = governed_agent(model)
    with pytest.raises(RuntimeError, match="rate limited") as raised:
        agent.invoke({"messages": [HumanMessage("hi")]})
    assert not any("context governance" in note for note in getattr(raised.value, "__notes__", []))
    assert len(model.requests) == 1


def test_a_fresh_governor_replays_the_same_factor_from_the_history() -> None:
    model = provider(usage=True, steps=30)
    governor = ContextGovernor.from_model(model, safety_buffer=200)
    agent = create_agent(model, [read_chunk], middleware=[ContextGovernanceMiddleware(governor)])
    history = agent.invoke({"messages": [HumanMessage("read")]}, RECURSION_LIMIT)["messages"]
    tools = [read_chunk]
    live = governor.with_tools(tools).govern(history[:-1]).report
    worker = ContextGovernor.from_model(model, safety_buffer=200).with_tools(tools)
    replayed = worker.govern(history[:-1]).report
    assert live.calibration_factor == replayed.calibration_factor > 1.3
    assert live.corrected_tokens_after == replayed.corrected_tokens_after
    assert "x " in str(replayed) and f"{replayed.corrected_tokens_after:,}" in str(replayed)


def pre_model_node_graph(model: ScriptedChatModel, *, recovering: bool) -> Any:
    bound = model.bind_tools([read_chunk])
    governor = ContextGovernor.from_model(model, safety_buffer=200)

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["llm_input_messages"])]}

    graph = StateGraph(GovernedMessagesState)
    graph.add_node("tools", ToolNode([read_chunk]))
    if recovering:
        graph.add_node("model", with_overflow_recovery(call_model, governor))
        graph.add_edge(START, "model")
        graph.add_edge("tools", "model")
    else:
        graph.add_node("govern", build_pre_model_hook(governor))
        graph.add_node("model", call_model)
        graph.add_edge(START, "govern")
        graph.add_edge("govern", "model")
        graph.add_edge("tools", "govern")
    graph.add_conditional_edges("model", tools_condition, ["tools", END])
    return graph.compile()


def test_a_pre_model_node_loop_with_usage_in_the_history_stays_in_the_true_window() -> None:
    model = provider(usage=True)
    result = pre_model_node_graph(model, recovering=False).invoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    assert over_the_true_window(model) <= 1


def test_the_graph_helper_recovers_overflows_without_usage() -> None:
    model = provider(usage=False)
    result = pre_model_node_graph(model, recovering=True).invoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    overflowed = over_the_true_window(model)
    assert 1 <= overflowed <= 2
    assert sum(bool(overflows_of(m)) for m in result["messages"]) == overflowed


async def test_the_graph_helper_recovers_under_ainvoke() -> None:
    model = provider(usage=False)
    result = await pre_model_node_graph(model, recovering=True).ainvoke(
        {"messages": [HumanMessage("read every chunk")]}, RECURSION_LIMIT
    )
    assert result["messages"][-1].content == "done"
    assert 1 <= over_the_true_window(model) <= 2
