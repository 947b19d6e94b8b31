from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import BACKFILL_CONTENT, backfill_missing_tool_results
from tests.builders import ai_calls, call, result


def test_unanswered_call_gets_placeholder_right_after_existing_results(mutation_guard):
    history = mutation_guard.watch(
        [
            HumanMessage("go"),
            ai_calls(call("a", "grep"), call("b", "read_file")),
            result("a", "found"),
            HumanMessage("next"),
        ]
    )
    filled = backfill_missing_tool_results(history)
    assert [m.type for m in filled] == ["human", "ai", "tool", "tool", "human"]
    placeholder = filled[3]
    assert isinstance(placeholder, ToolMessage)
    assert placeholder.content == BACKFILL_CONTENT
    assert placeholder.tool_call_id == "b"
    assert placeholder.name == "read_file"


def test_interrupted_call_at_the_end_is_answered(mutation_guard):
    history = mutation_guard.watch([HumanMessage("go"), ai_calls(call("a"))])
    filled = backfill_missing_tool_results(history)
    assert [m.type for m in filled] == ["human", "ai", "tool"]


def test_result_separated_from_its_call_is_moved_back_not_lost(mutation_guard):
    history = mutation_guard.watch(
        [HumanMessage("go"), ai_calls(call("a")), HumanMessage("hurry"), result("a", "data")]
    )
    filled = backfill_missing_tool_results(history)
    assert [m.type for m in filled] == ["human", "ai", "tool", "human"]
    assert filled[2].content == "data"
    assert BACKFILL_CONTENT not in [m.content for m in filled]


def test_complete_history_is_unchanged(mutation_guard):
    history = mutation_guard.watch([HumanMessage("go"), ai_calls(call("a")), result("a")])
    filled = backfill_missing_tool_results(history)
    assert all(new is old for new, old in zip(filled, history, strict=True))


def test_tool_use_block_without_tool_calls_is_answered():
    message = AIMessage([{"type": "tool_use", "id": "tu", "name": "exec", "input": {}}])
    filled = backfill_missing_tool_results([HumanMessage("go"), message])
    assert isinstance(filled[-1], ToolMessage)
    assert (filled[-1].tool_call_id, filled[-1].name) == ("tu", "exec")


def test_runnable_form():
    runnable = backfill_missing_tool_results()
    assert isinstance(runnable, Runnable)
    assert len(runnable.invoke([HumanMessage("go"), ai_calls(call("a"))])) == 3
