"""What the governor is given: lists, prompt values, LangGraph states, and bad input."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_context_governance import ContextGovernor, validate_messages
from langchain_context_governance import _messages as messages_module
from langchain_context_governance._messages import (
    as_message_list,
    calls_encoded_once,
    message_fingerprint,
    messages_to_govern,
)
from langchain_context_governance.pipeline import Pipeline
from langchain_context_governance.state.record import stable_digest
from tests.builders import ai_calls, call, result
from tests.strategies import without_content
from tests.unit_tests.conftest import MutationGuard

COUNTERS = ("approximate", "tiktoken")


def history() -> list[BaseMessage]:
    return [
        SystemMessage("be brief", id="s"),
        HumanMessage("read a.py", id="u1"),
        ai_calls(call("c1")).model_copy(update={"id": "a1"}),
        result("c1", "print('a')").model_copy(update={"id": "t1"}),
        HumanMessage("thanks", id="u2"),
    ]


def contents(messages: list[BaseMessage]) -> list[Any]:
    return [message.content for message in messages]


@pytest.mark.parametrize("counter", COUNTERS)
def test_a_langgraph_state_is_governed_as_its_message_list(counter: str) -> None:
    governor = ContextGovernor(token_counter=counter)
    state = {"messages": history(), "remaining_steps": 3}
    assert contents(governor.invoke(state)) == contents(governor.invoke(history()))
    assert governor.govern(state).report.messages_before == len(history())


def test_a_mapping_without_messages_is_a_type_error_saying_what_to_pass() -> None:
    with pytest.raises(
        TypeError, match=r"list of messages, or a LangGraph state with a 'messages'"
    ):
        ContextGovernor().invoke({"input": "hi"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "says"),
    [("hi", "not a single string"), (HumanMessage("hi"), "put the one message in a list")],
)
def test_one_text_or_one_message_is_a_type_error(given: Any, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        ContextGovernor().invoke(given)


def test_a_prompt_value_is_governed_as_its_messages() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "be brief"), ("human", "{question}")])
    governed = ContextGovernor().invoke(prompt.invoke({"question": "why?"}))
    assert [(m.type, m.content) for m in governed] == [("system", "be brief"), ("human", "why?")]


@pytest.mark.parametrize("counter", COUNTERS)
def test_a_remove_message_removes_the_earlier_message_with_its_id(counter: str) -> None:
    removed = [*history(), RemoveMessage(id="u2"), HumanMessage("and b.py?")]
    governed = ContextGovernor(token_counter=counter).invoke(removed)
    assert contents(governed) == [*contents(history()[:4]), "and b.py?"]
    assert validate_messages(governed) == []


@pytest.mark.parametrize("counter", COUNTERS)
def test_remove_all_messages_removes_every_earlier_message(counter: str) -> None:
    reset = [*history(), RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("start over")]
    assert contents(ContextGovernor(token_counter=counter).invoke(reset)) == ["start over"]


@pytest.mark.parametrize("counter", COUNTERS)
def test_a_remove_message_that_removes_nothing_is_ignored_with_a_warning(
    counter: str, caplog: pytest.LogCaptureFixture
) -> None:
    stray = [*history()[:2], RemoveMessage(id="nope"), AIMessage("hello"), HumanMessage("hm")]
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governed = ContextGovernor(token_counter=counter).invoke(stray)
    assert [m.type for m in governed] == ["system", "human", "ai", "human"]
    [warning] = [r for r in caplog.records if "RemoveMessage" in r.getMessage()]
    assert "message 2: RemoveMessage(id='nope') removes no earlier message" in warning.getMessage()


@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemma"])
def test_content_none_reads_as_empty_content(counter: str, provider: str) -> None:
    messages = [without_content(message) for message in history()]
    guard = MutationGuard()
    guard.watch(messages)
    result = ContextGovernor(provider=provider, token_counter=counter).govern(messages)
    guard.check()
    assert not result.report.fell_back
    assert all(message.content is not None for message in result.messages)
    assert validate_messages(result.messages, provider=provider) == []


def test_content_none_is_read_as_empty_on_a_copy() -> None:
    emptied = without_content(HumanMessage("hi"))
    [read] = as_message_list([emptied])
    assert read.content == "" and read is not emptied and emptied.content is None
    plain = [HumanMessage("hi")]
    assert as_message_list(plain)[0] is plain[0]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (42, "message 1: content must be a string or a list of content blocks, got int"),
        ({"type": "text", "text": "x"}, "message 1: content must be a string or a list"),
        (["ok", 7], "message 1: a content block must be a string or a dict, got int"),
    ],
)
def test_content_of_another_type_is_a_value_error_naming_the_message(
    content: Any, problem: str
) -> None:
    broken = HumanMessage("x")
    broken.content = content
    with pytest.raises(ValueError, match=problem):
        ContextGovernor().invoke([SystemMessage("s"), broken])


@pytest.mark.parametrize("thread_id", [None, "t"])
def test_a_later_call_checks_the_contents_of_the_messages_it_has_not_read(
    thread_id: str | None,
) -> None:
    governor = ContextGovernor(context_window_tokens=8_000)
    messages = history()
    governor.govern(messages, thread_id=thread_id)
    broken = HumanMessage("x")
    broken.content = 42  # type: ignore[assignment]
    with pytest.raises(ValueError, match="message 6: content must be a string"):
        governor.govern([*messages, ai_calls(call("c2")), broken], thread_id=thread_id)
    # What was read before is not read again; the call after the error is governed whole.
    later = [*messages, AIMessage("done", id="a2"), HumanMessage("more", id="u3")]
    fresh = ContextGovernor(context_window_tokens=8_000).govern(later)
    assert governor.govern(later, thread_id=thread_id).messages == fresh.messages


def test_a_reloaded_history_equal_by_key_still_has_its_content_blocks_checked() -> None:
    governor = ContextGovernor(context_window_tokens=8_000)
    messages = history()
    messages[1] = HumanMessage(["read", "a.py"], id="u1")
    governor.govern(messages)
    broken = HumanMessage(["read", "a.py"], id="u1")
    broken.content = ["read", 7]  # type: ignore[list-item]
    reloaded = [message.model_copy() for message in messages]
    reloaded[1] = broken
    with pytest.raises(ValueError, match="message 1: a content block must be a string or a dict"):
        governor.govern(reloaded)


def test_a_reloaded_history_with_content_none_gives_the_request_of_a_fresh_governor() -> None:
    governor = ContextGovernor(context_window_tokens=8_000)
    messages = history()
    governor.govern(messages)
    for grown in (
        [*messages, without_content(AIMessage("", id="a2"))],
        [*messages, without_content(AIMessage("", id="a2")), HumanMessage("go on", id="u3")],
    ):
        reloaded = [message.model_copy() for message in grown]
        fresh = ContextGovernor(context_window_tokens=8_000).govern(reloaded)
        assert governor.govern(reloaded).messages == fresh.messages


def test_messages_to_govern_leaves_a_list_without_removals_as_read() -> None:
    messages = history()
    governed = messages_to_govern(messages)
    assert governed == messages and governed is not messages
    assert all(a is b for a, b in zip(governed, messages, strict=True))


def test_the_fallback_itself_never_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    governor = ContextGovernor()

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("unforeseen")

    monkeypatch.setattr(Pipeline, "run", fails)
    monkeypatch.setattr(Pipeline, "minimal_repair", fails)
    with caplog.at_level(logging.ERROR, logger="langchain_context_governance"):
        result = governor.govern(history())
    assert result.report.fell_back
    assert contents(result.messages) == contents(history())
    messages = [record.getMessage() for record in caplog.records]
    assert any("sending the minimal repair instead" in message for message in messages)
    assert any("sending the messages unchanged" in message for message in messages)


def negative(message: BaseMessage) -> int:
    return -5


def fractional(messages: list[BaseMessage]) -> float:
    return 2.5 * len(messages)


@pytest.mark.parametrize("counter", [negative, fractional])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemma"])
def test_a_counter_returning_no_token_count_is_an_error_naming_it(
    counter: Any, provider: str
) -> None:
    # Raised where the counter first counts: at construction for a list counter, whose
    # count of an empty request is taken then, else on the first call.
    with pytest.raises((ValueError, TypeError), match=r"token_counter \(callable\) must return"):
        ContextGovernor(
            provider=provider, token_counter=counter, context_window_tokens=9_000
        ).govern(history())


def test_a_call_encodes_the_tool_calls_of_a_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a governance call, the fingerprint and the record's digest of a message read
    one JSON of its tool calls; a copy with other calls is encoded anew; outside a call,
    each reads its own, and both give what they give within one."""
    message = ai_calls(call("c1", "grep"))
    other = message.model_copy(update={"tool_calls": [call("c2", "grep")]})
    encoded: list[object] = []
    dumps = json.dumps

    def counted(value: Any, **options: Any) -> str:
        encoded.append(value)
        return dumps(value, **options)

    monkeypatch.setattr(json, "dumps", counted)
    with calls_encoded_once():
        within = (message_fingerprint(message), stable_digest(message), stable_digest(other))
        assert len(encoded) == 2
    outside = (message_fingerprint(message), stable_digest(message), stable_digest(other))
    assert len(encoded) == 5
    assert within == outside
    assert within[1] != within[2]


def test_a_steady_call_reads_as_messages_only_what_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """The items a conversation read before, passed again as the same objects, are not
    looked at again: a long history costs a look at what is new only. A history reloaded
    from a checkpoint (new objects) is read whole, and one with a non-message item after
    what was read still gets the error naming it."""
    governor = ContextGovernor(context_window_tokens=50_000)
    history: list[BaseMessage] = [HumanMessage("fix it")]
    for n in range(300):
        history += [ai_calls(call(f"c{n}")), result(f"c{n}", f"line {n}")]
    governor.govern(history, thread_id="t")
    looked: list[int] = []
    real = messages_module._as_messages

    def counting(items: list[Any], *, start: int = 0) -> Any:
        looked.append(len(items) - start)
        return real(items, start=start)

    monkeypatch.setattr(messages_module, "_as_messages", counting)
    grown = [*history, ai_calls(call("new")), result("new", "more")]
    governor.govern(grown, thread_id="t")
    assert looked and max(looked) <= 4
    looked.clear()
    governor.govern(messages_from_dict(messages_to_dict(grown)), thread_id="t")
    assert looked == [len(grown)]
    with pytest.raises(ValueError, match=f"message {len(grown)} cannot be read"):
        governor.govern([*grown, object()], thread_id="t")  # type: ignore[list-item]
