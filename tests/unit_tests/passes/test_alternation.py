import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import SYNTHETIC_USER_CONTENT, enforce_role_alternation
from langchain_context_governance._added import user_parts
from tests.builders import ai_calls, call, result


def test_consecutive_user_turns_become_separate_blocks_each_intact(mutation_guard):
    history = mutation_guard.watch([HumanMessage("a"), HumanMessage("b"), HumanMessage("c")])
    [merged] = enforce_role_alternation(history)
    assert merged.content == [{"type": "text", "text": text} for text in "abc"]
    assert [kind for _, kind in user_parts(merged)] == ["user", "user", "user"]


def test_list_contents_are_concatenated_block_by_block():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [HumanMessage("look"), HumanMessage([{"type": "text", "text": "at"}, image])]
    merged = enforce_role_alternation(history)
    assert merged[0].content == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": "at"},
        image,
    ]


def test_assistant_with_tool_calls_absorbs_a_plain_neighbour_and_keeps_every_call():
    history = [
        HumanMessage("go"),
        AIMessage("thinking out loud"),
        ai_calls(call("a"), call("b"), content="calling"),
        result("a"),
        result("b"),
    ]
    merged = enforce_role_alternation(history)
    assistant = merged[1]
    assert isinstance(assistant, AIMessage)
    assert assistant.content == "thinking out loud\n\ncalling"
    assert [c["id"] for c in assistant.tool_calls] == ["a", "b"]
    assert [m.type for m in merged] == ["human", "ai", "tool", "tool"]


def test_merging_tool_use_blocks_keeps_them_consistent_with_tool_calls():
    first = AIMessage(
        [{"type": "tool_use", "id": "a", "name": "grep", "input": {}}],
        tool_calls=[call("a", "grep")],
    )
    second = AIMessage(
        [{"type": "tool_use", "id": "b", "name": "grep", "input": {}}],
        tool_calls=[call("b", "grep")],
    )
    merged = enforce_role_alternation([HumanMessage("go"), first, second, result("a")])[1]
    block_ids = [block["id"] for block in merged.content if block.get("type") == "tool_use"]
    assert block_ids == [c["id"] for c in merged.tool_calls] == ["a", "b"]


def test_system_and_tool_messages_are_never_merged():
    history = [
        SystemMessage("one"),
        SystemMessage("two"),
        HumanMessage("go"),
        ai_calls(call("a"), call("b")),
        result("a"),
        result("b"),
    ]
    assert len(enforce_role_alternation(history)) == len(history)


def test_trailing_assistant_messages_are_dropped(mutation_guard):
    history = mutation_guard.watch(
        [HumanMessage("go"), ai_calls(call("a")), result("a"), AIMessage("done")]
    )
    assert [m.type for m in enforce_role_alternation(history)] == ["human", "ai", "tool"]


def test_only_system_left_turns_last_assistant_into_user():
    history = [SystemMessage("rules"), AIMessage("first"), AIMessage("second")]
    repaired = enforce_role_alternation(history)
    assert [m.type for m in repaired] == ["system", "human"]
    assert repaired[1].content == "first\n\nsecond"


def test_leading_assistant_gets_a_synthetic_user_turn_before_it():
    history = [SystemMessage("rules"), AIMessage("hello"), HumanMessage("hi")]
    repaired = enforce_role_alternation(history)
    assert [m.type for m in repaired] == ["system", "human", "ai", "human"]
    assert repaired[1].content == SYNTHETIC_USER_CONTENT


def test_leading_assistant_with_tool_calls_also_gets_a_user_turn():
    repaired = enforce_role_alternation([ai_calls(call("a")), result("a")])
    assert [m.type for m in repaired] == ["human", "ai", "tool"]


def test_legal_history_comes_back_as_the_same_objects(mutation_guard):
    history = mutation_guard.watch(
        [SystemMessage("s"), HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    )
    repaired = enforce_role_alternation(history)
    assert repaired is not history
    assert all(new is old for new, old in zip(repaired, history, strict=True))


def test_merged_messages_are_new_objects_and_inputs_untouched(mutation_guard):
    history = mutation_guard.watch([HumanMessage("a", id="1"), HumanMessage("b", id="2")])
    merged = enforce_role_alternation(history)
    assert merged[0] is not history[0]
    assert merged[0].id == "1"


@pytest.mark.parametrize("blocks_type", ["thinking", "redacted_thinking"])
def test_two_responses_with_signed_thinking_are_not_merged(blocks_type):
    def signed(text):
        return AIMessage([{"type": blocks_type, "thinking": text, "signature": "sig"}])

    history = [HumanMessage("go"), signed("x"), signed("y"), HumanMessage("next")]
    repaired = enforce_role_alternation(history)
    assert [m.content for m in repaired[1:3]] == [history[1].content, history[2].content]


def test_runnable_form():
    assert isinstance(enforce_role_alternation(), Runnable)
    assert len(enforce_role_alternation().invoke([HumanMessage("a"), HumanMessage("b")])) == 1
