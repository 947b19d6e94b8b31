"""ScriptedChatModel: replays its script, records requests, rejects what a provider would."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from pydantic import ValidationError

from langchain_context_governance.testing import (
    ContextLengthExceeded,
    ProviderRejectedRequest,
    ScriptedChatModel,
    ScriptExhausted,
)
from tests.builders import ai_calls, call, result


@tool
def search(query: str) -> str:
    """Search the web for `query`."""
    return f"3 results for {query}"


def two_step_script() -> list[AIMessage]:
    return [ai_calls(call("call00001", "search", query="cats")), AIMessage("Cats are great.")]


def test_replays_the_script_in_order() -> None:
    model = ScriptedChatModel(two_step_script())
    first = model.invoke([HumanMessage("tell me about cats")])
    second = model.invoke([HumanMessage("tell me about cats"), first, result("call00001")])
    assert first.tool_calls[0]["id"] == "call00001"
    assert second.content == "Cats are great."


def test_records_a_copy_of_every_request() -> None:
    model = ScriptedChatModel([AIMessage("one"), AIMessage("two")])
    question = HumanMessage("first")
    model.invoke([question])
    model.invoke([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
    question.content = "changed after the call"
    assert [[m.content for m in request] for request in model.requests] == [
        ["first"],
        ["a", "b", "c"],
    ]
    assert model.requests[0][0] is not question


def test_replies_get_fresh_ids_and_the_script_is_not_touched() -> None:
    script = [AIMessage("one"), AIMessage("two"), AIMessage("three", id="kept")]
    model = ScriptedChatModel(script)
    replies = [model.invoke([HumanMessage("q")]) for _ in range(3)]
    assert replies[0].id and replies[1].id
    assert replies[0].id != replies[1].id
    assert replies[2].id == "kept"
    assert [message.id for message in script] == [None, None, "kept"]


def test_running_out_of_script_is_a_clear_error() -> None:
    model = ScriptedChatModel([AIMessage("only")])
    model.invoke([HumanMessage("q")])
    with pytest.raises(ScriptExhausted, match=r"all 1 scripted replies; call 2 has none"):
        model.invoke([HumanMessage("q")])


def test_callable_script_sees_the_request() -> None:
    model = ScriptedChatModel(lambda request: AIMessage(f"{len(request)} messages"))
    reply = model.invoke([SystemMessage("s"), HumanMessage("a")])
    assert reply.content == "2 messages"
    assert reply.id


def test_callable_script_must_return_an_ai_message() -> None:
    model = ScriptedChatModel(lambda request: HumanMessage("wrong"))
    with pytest.raises(
        TypeError, match="script must return an AIMessage; it returned HumanMessage"
    ):
        model.invoke([HumanMessage("q")])


# --- Rejecting what a provider would reject ------------------------------------------------


def test_rejects_an_unanswered_tool_call_like_a_400() -> None:
    """OpenAI: "An assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'."."""
    model = ScriptedChatModel(two_step_script())
    asked = model.invoke([HumanMessage("cats?")])
    with pytest.raises(ProviderRejectedRequest) as raised:
        model.invoke([HumanMessage("cats?"), asked, HumanMessage("well?")])
    error = raised.value
    assert error.provider == "openai"
    assert [(v.index, v.rule) for v in error.violations] == [(1, "unanswered-tool-call")]
    assert "Error code: 400" in str(error)
    assert "messages[1] [unanswered-tool-call]" in str(error)
    assert "call00001" in str(error)


def test_a_rejected_request_is_recorded_and_does_not_use_up_a_reply() -> None:
    model = ScriptedChatModel([AIMessage("answer")])
    with pytest.raises(ProviderRejectedRequest):
        model.invoke([HumanMessage("a"), HumanMessage("b")])
    assert model.invoke([HumanMessage("a")]).content == "answer"
    assert [len(request) for request in model.requests] == [2, 1]


def test_check_requests_false_accepts_anything() -> None:
    model = ScriptedChatModel([AIMessage("fine")], check_requests=False)
    assert model.invoke([AIMessage("prefill")]).content == "fine"


def test_provider_profile_decides_what_is_rejected() -> None:
    """langchain-anthropic: "System message must be at beginning of message list."."""
    request = [HumanMessage("hi"), AIMessage("hello"), SystemMessage("be brief"), HumanMessage("?")]
    assert ScriptedChatModel([AIMessage("ok")]).invoke(request).content == "ok"
    with pytest.raises(ProviderRejectedRequest, match="system-not-first") as raised:
        ScriptedChatModel([AIMessage("ok")], provider="anthropic").invoke(request)
    assert raised.value.provider == "anthropic"


@pytest.mark.parametrize(
    "setting", [{"provider": "claude"}, {"max_input_tokens": 0}, {"max_output_tokens": -1}]
)
def test_bad_settings_are_named(setting: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match=next(iter(setting))):
        ScriptedChatModel([AIMessage("x")], **setting)


# --- The context window -------------------------------------------------------------------


def test_request_over_the_window_gets_openais_context_length_error() -> None:
    request = [HumanMessage("word " * 200)]
    tokens = count_tokens_approximately(request)
    model = ScriptedChatModel([AIMessage("x")], max_input_tokens=tokens - 1)
    with pytest.raises(ContextLengthExceeded) as raised:
        model.invoke(request)
    assert raised.value.request_tokens == tokens
    assert str(raised.value).endswith(
        f"This model's maximum context length is {tokens - 1} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )


def test_request_exactly_at_the_window_is_accepted() -> None:
    request = [HumanMessage("word " * 200)]
    model = ScriptedChatModel(
        [AIMessage("x")], max_input_tokens=count_tokens_approximately(request)
    )
    assert model.invoke(request).content == "x"


def test_bound_tools_count_toward_the_window() -> None:
    request = [HumanMessage("find cats")]
    model = ScriptedChatModel(
        [AIMessage("x")], max_input_tokens=count_tokens_approximately(request)
    )
    with pytest.raises(ContextLengthExceeded):
        model.bind_tools([search]).invoke(request)


def test_profile_carries_the_window_for_governors() -> None:
    model = ScriptedChatModel([AIMessage("x")], max_input_tokens=8_000, max_output_tokens=512)
    assert model.profile is not None
    assert model.profile["max_input_tokens"] == 8_000
    assert model.profile["max_output_tokens"] == 512
    assert model.profile["tool_calling"] is True


def test_an_explicit_profile_is_kept() -> None:
    model = ScriptedChatModel([AIMessage("x")], profile={"max_input_tokens": 123})
    assert model.profile == {"max_input_tokens": 123}


def test_token_counts_match_the_window_check() -> None:
    model = ScriptedChatModel([AIMessage("x")])
    messages: list[BaseMessage] = [HumanMessage("hello there"), AIMessage("hi")]
    assert model.get_num_tokens_from_messages(messages) == count_tokens_approximately(messages)
    assert model.get_num_tokens_from_messages(messages, tools=[search]) > (
        model.get_num_tokens_from_messages(messages)
    )
    assert model.get_num_tokens("12345678") == 2


# --- bind_tools, async, batch and agents --------------------------------------------------


def test_bind_tools_returns_a_binding_that_records_on_the_same_model() -> None:
    model = ScriptedChatModel(two_step_script())
    bound = model.bind_tools([search], tool_choice="auto")
    reply = bound.invoke([HumanMessage("cats?")])
    assert reply.tool_calls[0]["name"] == "search"
    assert [t["function"]["name"] for t in model.bound_tools] == ["search"]
    assert len(model.requests) == 1


async def test_async_calls_replay_and_record() -> None:
    model = ScriptedChatModel(two_step_script())
    first = await model.ainvoke([HumanMessage("cats?")])
    second = await model.ainvoke([HumanMessage("cats?"), first, result("call00001")])
    assert second.content == "Cats are great."
    assert len(model.requests) == 2


async def test_async_calls_are_checked_too() -> None:
    model = ScriptedChatModel([AIMessage("x")])
    with pytest.raises(ProviderRejectedRequest):
        await model.ainvoke([HumanMessage("a"), result("call00001")])


def test_batch_gives_each_reply_exactly_once() -> None:
    script = [AIMessage(f"reply {n}") for n in range(20)]
    model = ScriptedChatModel(script)
    replies = model.batch(
        [[HumanMessage(f"q{n}")] for n in range(20)], config={"max_concurrency": 8}
    )
    assert sorted(reply.content for reply in replies) == sorted(m.content for m in script)
    assert len(model.requests) == 20


async def test_concurrent_async_calls_give_each_reply_exactly_once() -> None:
    model = ScriptedChatModel([AIMessage(f"reply {n}") for n in range(10)])
    replies = await asyncio.gather(*(model.ainvoke([HumanMessage("q")]) for _ in range(10)))
    assert len({reply.content for reply in replies}) == 10


def test_a_langchain_agent_runs_its_tool_loop_against_the_script() -> None:
    from langchain.agents import create_agent

    model = ScriptedChatModel(two_step_script())
    agent = create_agent(model, tools=[search])
    state = agent.invoke({"messages": [HumanMessage("tell me about cats")]})
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][2].content == "3 results for cats"
    assert state["messages"][-1].content == "Cats are great."
    assert [len(request) for request in model.requests] == [1, 3]


def test_an_ungoverned_broken_history_fails_loudly_in_an_agent() -> None:
    from langchain.agents import create_agent

    agent = create_agent(ScriptedChatModel([AIMessage("x")]), tools=[search])
    broken = [
        HumanMessage("hi"),
        ai_calls(call("call00009", "search")),
        HumanMessage("still there?"),
    ]
    with pytest.raises(ProviderRejectedRequest, match="unanswered-tool-call"):
        agent.invoke({"messages": broken})


def test_governor_from_model_reads_the_window() -> None:
    from langchain_context_governance import ContextGovernor

    model = ScriptedChatModel([AIMessage("x")], max_input_tokens=8_000, max_output_tokens=512)
    governor = ContextGovernor.from_model(model.bind_tools([search]))
    assert governor.context_window_tokens == 8_000
    assert governor.max_output_tokens == 512


def test_governor_piped_into_the_model_repairs_the_history() -> None:
    from langchain_context_governance import ContextGovernor

    model = ScriptedChatModel(
        [AIMessage("Still here.")], provider="strict", max_input_tokens=8_000, max_output_tokens=512
    )
    broken = [
        HumanMessage("hi"),
        ai_calls(call("call00009", "search")),
        HumanMessage("still there?"),
    ]
    with pytest.raises(ProviderRejectedRequest):
        model.invoke(broken)
    reply = (ContextGovernor.from_model(model, provider="strict") | model).invoke(broken)
    assert reply.content == "Still here."
