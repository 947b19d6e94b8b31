import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import DEFAULT_COMPACTABLE_TOOLS, microcompact
from langchain_context_governance.policy.compaction import compacted_placeholder
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
    assert compacted[:3] == [compacted_placeholder("read_file")] * 3
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
    allow_list = microcompact(
        history, keep_recent=0, min_chars=500, compactable_tools=DEFAULT_COMPACTABLE_TOOLS
    )
    assert contents(allow_list) == ["x" * 2000, "short", compacted_placeholder("grep")]
    excluded = microcompact(history, keep_recent=0, exclude_tools={"write_file"})
    assert contents(excluded) == ["x" * 2000, "short", compacted_placeholder("grep")]


def test_tool_name_comes_from_the_call_when_result_has_none():
    history = [HumanMessage("go"), ai_calls(call("a", "web_fetch")), result("a", "z" * 900)]
    assert contents(microcompact(history, keep_recent=0)) == [compacted_placeholder("web_fetch")]


def test_keep_recent_counts_only_compactable_results():
    history = [
        HumanMessage("go"),
        ai_calls(call("a", "grep")),
        result("a", "g" * 900),
        ai_calls(call("b", "write_file")),
        result("b", "w" * 900),
    ]
    allow_list = microcompact(history, keep_recent=1, compactable_tools={"grep"})
    assert contents(allow_list) == ["g" * 900, "w" * 900]


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
    assert contents(runnable.invoke(tool_loop(1)))[0] == compacted_placeholder("read_file")


@pytest.mark.parametrize("tool", ["bash", "str_replace_editor", "execute_bash", "open"])
def test_by_default_any_tool_of_a_real_agent_is_compactable(tool):
    history = tool_loop(3, size=800, tool=tool)
    compacted = contents(microcompact(history, keep_recent=1))
    assert compacted[:2] == [compacted_placeholder(tool)] * 2
    assert compacted[2] == contents(history)[2]


def test_placeholder_template_names_the_tool_and_is_validated():
    history = tool_loop(2, size=800, tool="bash")
    custom = microcompact(history, keep_recent=1, placeholder="<{tool_name} output cleared>")
    assert contents(custom)[0] == "<bash output cleared>"
    with pytest.raises(ValueError, match="placeholder"):
        microcompact(history, placeholder="{tool} cleared")
