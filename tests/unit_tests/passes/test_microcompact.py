import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import DEFAULT_COMPACTABLE_TOOLS, microcompact
from tests.builders import ai_calls, call, result, tool_loop


def contents(messages):
    return [m.content for m in messages if isinstance(m, ToolMessage)]


def test_default_tools_are_the_re_obtainable_ones():
    assert isinstance(DEFAULT_COMPACTABLE_TOOLS, frozenset)
    assert {"read_file", "exec", "grep", "find_files", "web_search", "web_fetch"} <= (
        DEFAULT_COMPACTABLE_TOOLS
    )
    assert {"list_dir", "list_exec_sessions"} <= DEFAULT_COMPACTABLE_TOOLS


def test_newest_results_stay_whole_and_older_large_ones_become_placeholders(mutation_guard):
    history = mutation_guard.watch(tool_loop(5, size=800))
    compacted = contents(microcompact(history, keep_recent=2))
    assert compacted[:3] == ["[read_file result omitted from context]"] * 3
    assert compacted[3:] == contents(history)[3:]


def test_short_results_and_other_tools_stay(mutation_guard):
    history = mutation_guard.watch(
        [
            HumanMessage("go"),
            ai_calls(call("a", "write_file")),
            result("a", "x" * 2000),
            ai_calls(call("b", "grep")),
            result("b", "short"),
            ai_calls(call("c", "grep")),
            result("c", "y" * 2000),
        ]
    )
    assert contents(microcompact(history, keep_recent=0, min_chars=500)) == [
        "x" * 2000,
        "short",
        "[grep result omitted from context]",
    ]


def test_tool_name_comes_from_the_call_when_result_has_none():
    history = [HumanMessage("go"), ai_calls(call("a", "web_fetch")), result("a", "z" * 900)]
    assert contents(microcompact(history, keep_recent=0)) == [
        "[web_fetch result omitted from context]"
    ]


def test_keep_recent_counts_only_compactable_results():
    history = [
        HumanMessage("go"),
        ai_calls(call("a", "grep")),
        result("a", "g" * 900),
        ai_calls(call("b", "write_file")),
        result("b", "w" * 900),
    ]
    assert contents(microcompact(history, keep_recent=1)) == ["g" * 900, "w" * 900]


def test_list_content_is_measured_by_text_only():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}}
    history = [
        HumanMessage("go"),
        ai_calls(call("a", "read_file")),
        result("a", [{"type": "text", "text": "tiny"}, image]),
    ]
    assert microcompact(history, keep_recent=0)[2].content == history[2].content


def test_compaction_keeps_ids_and_status_and_is_idempotent():
    history = tool_loop(3)
    history[3] = history[3].model_copy(update={"id": "keep-me", "status": "error"})
    once = microcompact(history, keep_recent=0)
    assert once[3].id == "keep-me"
    assert once[3].status == "error"
    twice = microcompact(once, keep_recent=0)
    assert all(a is b for a, b in zip(once, twice, strict=True))


@pytest.mark.parametrize(("setting", "value"), [("keep_recent", -1), ("min_chars", -5)])
def test_negative_settings_are_rejected_by_name(setting, value):
    with pytest.raises(ValueError, match=setting):
        microcompact(tool_loop(1), **{setting: value})


def test_runnable_form_binds_settings():
    runnable = microcompact(keep_recent=0)
    assert isinstance(runnable, Runnable)
    assert "omitted" in contents(runnable.invoke(tool_loop(1)))[0]
