import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable

from langchain_context_governance import cut_note, snip_history
from tests.builders import ai_calls, block_texts, call, result, tool_loop


def tokens(messages):
    return count_tokens_approximately(messages)


def test_history_that_fits_is_unchanged(mutation_guard):
    history = mutation_guard.watch(tool_loop(2, size=100))
    snipped = snip_history(history, max_tokens=10_000)
    assert snipped is not history
    assert all(new is old for new, old in zip(snipped, history, strict=True))


def test_keeps_system_and_newest_messages_within_budget(mutation_guard):
    history = mutation_guard.watch(
        [SystemMessage("rules")] + [HumanMessage(f"question {n} " + "x" * 400) for n in range(10)]
    )
    snipped = snip_history(history, max_tokens=400)
    assert snipped[0].content == "rules"
    # The task, the note and the newest user turns meet at the front: one message whose
    # blocks hold each turn intact.
    assert block_texts(snipped[-1])[-1] == history[-1].content
    assert tokens(snipped) <= 400
    assert len(snipped) < len(history)


def test_long_tool_loop_pins_the_user_request_and_keeps_whole_groups(mutation_guard):
    history = mutation_guard.watch(tool_loop(40, size=800))
    snipped = snip_history(history, max_tokens=2_000)
    assert [m.type for m in snipped[:3]] == ["system", "human", "ai"]
    omitted = len(history) - len(snipped)
    assert block_texts(snipped[1]) == [history[1].content, cut_note(omitted)]
    assert tokens(snipped) <= 2_000
    for index, message in enumerate(snipped):
        if isinstance(message, ToolMessage):
            assert isinstance(snipped[index - 1], (AIMessage, ToolMessage))
    assert snipped[-1] is history[-1]


def test_cut_moves_forward_to_the_first_user_message_in_the_kept_part():
    history = [
        HumanMessage("old request " + "o" * 2000),
        ai_calls(call("a")),
        result("a", "r" * 2000),
        HumanMessage("new request"),
        ai_calls(call("b")),
        result("b", "small"),
    ]
    snipped = snip_history(history, max_tokens=600, pin_task=False)
    assert block_texts(snipped[0]) == [cut_note(3), "new request"]


def test_the_task_stays_pinned_cut_to_a_quarter_of_the_budget_with_the_note():
    history = [
        HumanMessage("old request " + "o" * 2000),
        ai_calls(call("a")),
        result("a", "r" * 2000),
        HumanMessage("new request"),
        ai_calls(call("b")),
        result("b", "small"),
    ]
    snipped = snip_history(history, max_tokens=600)
    task, note, request = block_texts(snipped[0])
    assert request == "new request"
    assert task.startswith("old request ooo") and "characters of this message were cut" in task
    assert note == cut_note(2)
    assert tokens([snipped[0]]) <= 600 // 4 + tokens([HumanMessage(cut_note(2))])
    assert [m.content for m in snipped[1:]] == ["", "small"]
    assert tokens(snipped) <= 600


def test_over_budget_only_when_user_message_and_newest_group_cannot_fit():
    history = [HumanMessage("do it"), ai_calls(call("a")), result("a", "z" * 8000)]
    snipped = snip_history(history, max_tokens=100)
    assert [m.type for m in snipped] == ["human", "ai", "tool"]


def test_oversized_last_user_message_is_kept_alone():
    history = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("q" * 4000)]
    # Over budget already: no note on top of it.
    assert snip_history(history, max_tokens=50, pin_task=False) == [history[-1]]


def test_without_any_user_message_keeps_last_four_in_whole_groups():
    history = [SystemMessage("s")] + [AIMessage("x" * 400) for _ in range(6)]
    history += [ai_calls(call("a"), call("b")), result("a", "y" * 400), result("b", "y" * 400)]
    snipped = snip_history(history, max_tokens=50)
    assert snipped[0].type == "system"
    assert snipped[-4:] == history[-4:]
    assert not isinstance(snipped[1], ToolMessage)


def test_kept_part_never_begins_with_results_whose_call_was_cut():
    history = [HumanMessage("go")]
    history += [ai_calls(call("a"), call("b"), call("c"))]
    history += [result(i, "w" * 600) for i in "abc"]
    history += [HumanMessage("now this")]
    snipped = snip_history(history, max_tokens=300)
    assert not isinstance(snipped[0], ToolMessage)


def test_tool_definitions_count_against_the_budget():
    history = [HumanMessage(f"msg {n} " + "x" * 200) for n in range(10)]
    tools = [
        {
            "type": "function",
            "function": {"name": f"tool_{n}", "description": "d" * 300, "parameters": {}},
        }
        for n in range(5)
    ]
    without = snip_history(history, max_tokens=800)
    with_tools = snip_history(history, max_tokens=800, tools=tools)
    assert len(with_tools) < len(without)


@pytest.mark.parametrize("bad", [0, -10])
def test_budget_must_be_positive(bad):
    with pytest.raises(ValueError, match="max_tokens"):
        snip_history([HumanMessage("x")], max_tokens=bad)


def test_accepts_callable_counter_like_trim_messages():
    history = [HumanMessage("a" * 100), HumanMessage("b" * 100), HumanMessage("c")]
    snipped = snip_history(history, max_tokens=1, token_counter=len, pin_task=False)
    assert [block_texts(m) for m in snipped] == [[cut_note(2), "c"]]


def test_runnable_form():
    runnable = snip_history(max_tokens=200)
    assert isinstance(runnable, Runnable)
    assert tokens(runnable.invoke(tool_loop(10))) > 0
