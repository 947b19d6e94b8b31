from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import drop_orphan_tool_results
from tests.builders import ai_calls, call, result


def test_result_without_any_call_is_dropped(mutation_guard):
    history = mutation_guard.watch([HumanMessage("hi"), result("ghost"), HumanMessage("again")])
    assert [m.content for m in drop_orphan_tool_results(history)] == ["hi", "again"]


def test_result_before_its_call_counts_as_orphan(mutation_guard):
    history = mutation_guard.watch(
        [HumanMessage("hi"), result("c1", "early"), ai_calls(call("c1")), result("c1", "late")]
    )
    kept = drop_orphan_tool_results(history)
    assert [m.content for m in kept if isinstance(m, ToolMessage)] == ["late"]


def test_second_result_for_the_same_call_is_dropped(mutation_guard):
    history = mutation_guard.watch(
        [HumanMessage("hi"), ai_calls(call("c1")), result("c1", "first"), result("c1", "second")]
    )
    kept = drop_orphan_tool_results(history)
    assert [m.content for m in kept if isinstance(m, ToolMessage)] == ["first"]


def test_answered_calls_are_left_alone_and_list_is_new(mutation_guard):
    history = mutation_guard.watch(
        [HumanMessage("hi"), ai_calls(call("a"), call("b")), result("a"), result("b")]
    )
    kept = drop_orphan_tool_results(history)
    assert kept == history
    assert kept is not history
    assert all(new is old for new, old in zip(kept, history, strict=True))


def test_calls_declared_in_invalid_tool_calls_and_tool_use_blocks_count():
    invalid = AIMessage(
        "",
        invalid_tool_calls=[{"name": "grep", "args": "{oops", "id": "bad", "error": "json"}],
    )
    blocks = AIMessage(
        [{"type": "tool_use", "id": "tu1", "name": "grep", "input": {}}],
    )
    history = [HumanMessage("hi"), invalid, result("bad"), blocks, result("tu1")]
    assert len(drop_orphan_tool_results(history)) == len(history)


def test_accepts_message_dicts_and_returns_messages():
    kept = drop_orphan_tool_results(
        [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x", "tool_call_id": "z"}]
    )
    assert [type(m) for m in kept] == [HumanMessage]


def test_called_without_messages_returns_runnable():
    runnable = drop_orphan_tool_results()
    assert isinstance(runnable, Runnable)
    assert runnable.invoke([HumanMessage("hi"), result("ghost")]) == [HumanMessage("hi")]
