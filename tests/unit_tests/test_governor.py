import logging

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

from langchain_context_governance import (
    BACKFILL_CONTENT,
    SYNTHETIC_USER_CONTENT,
    ContextGovernor,
    GovernanceReport,
    cut_note,
)
from langchain_context_governance.passes import snip as snip_module
from tests.builders import ai_calls, block_texts, call, result, tool_loop

PASS_NAMES = {
    "drop_orphan_tool_results",
    "backfill_missing_tool_results",
    "microcompact",
    "snip_history",
    "enforce_role_alternation",
    "apply_provider_rules",
    "truncate",
}


def broken_history():
    return [
        SystemMessage("You are terse."),
        result("ghost", "orphan"),
        HumanMessage("read two files"),
        ai_calls(call("a"), call("b")),
        result("a", "content a"),
        HumanMessage("sorry, restarted"),
        HumanMessage("please continue"),
        AIMessage("on it"),
    ]


def test_repairs_a_broken_history_and_reports_each_pass(mutation_guard):
    history = mutation_guard.watch(broken_history())
    result_ = ContextGovernor().govern(history)
    assert [m.type for m in result_.messages] == ["system", "human", "ai", "tool", "tool", "human"]
    assert result_.messages[4].content == BACKFILL_CONTENT
    assert block_texts(result_.messages[-1]) == ["sorry, restarted", "please continue"]
    report = result_.report
    assert isinstance(report, GovernanceReport)
    assert report.changes["drop_orphan_tool_results"] == 1
    assert report.changes["backfill_missing_tool_results"] == 1
    assert report.changes["enforce_role_alternation"] == 2
    assert report.budget is None
    assert "snip_history" not in report.changes
    assert report.tokens_before > 0 and report.tokens_after > 0


def test_report_has_every_pass_when_a_window_is_set():
    governed = ContextGovernor(context_window_tokens=50_000).govern(tool_loop(3))
    assert set(governed.report.changes) == PASS_NAMES
    assert governed.report.budget == 50_000 - 4096 - 1024


def test_budget_is_window_minus_output_minus_buffer():
    governor = ContextGovernor(
        context_window_tokens=10_000, max_output_tokens=2_000, safety_buffer=500
    )
    assert governor.budget == 7_500


@pytest.mark.parametrize("compaction", ["cache_aware", "keep_recent"])
def test_long_tool_loop_fits_budget_and_keeps_the_request(compaction):
    history = tool_loop(200, size=1500)
    governor = ContextGovernor(
        context_window_tokens=12_000, max_output_tokens=2_000, keep_recent=4, compaction=compaction
    )
    governed = governor.govern(history)
    assert governed.report.tokens_after <= governor.budget
    assert governed.report.within_budget
    omitted = governed.report.changes["snip_history"]
    task, note = block_texts(governed.messages[1])
    assert task == history[1].content
    # The cache-aware note says that the next message quotes the values of what it omits
    # (policy/note.py).
    assert note == cut_note(omitted, data=compaction == "cache_aware")
    assert governed.report.changes["snip_history"] > 0
    if compaction == "keep_recent":
        # The cache-aware policy cuts the results it compacted in the same step, where
        # compacting alone is not enough (COMPACTION_ENOUGH_SHARE).
        assert governed.report.changes["microcompact"] > 0
    assert governed.messages[-1] is history[-1]


def test_stored_history_is_never_touched(mutation_guard):
    history = mutation_guard.watch(tool_loop(30))
    ContextGovernor(context_window_tokens=9_000, keep_recent=2).invoke(history)


def test_report_is_logged_at_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="langchain_context_governance"):
        ContextGovernor().invoke([HumanMessage("hi")])
    assert any("tokens 5 -> 5" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        (
            {"context_window_tokens": 5000, "max_output_tokens": 4096, "safety_buffer": 1024},
            "budget",
        ),
        ({"context_window_tokens": 0}, "context_window_tokens"),
        ({"keep_recent": -1}, "keep_recent"),
        ({"min_chars": -1}, "min_chars"),
        ({"token_counter": "no-such-counter"}, "token_counter"),
        ({"max_output_tokens": -1}, "max_output_tokens"),
        ({"safety_buffer": -1}, "safety_buffer"),
        ({"compaction": "sometimes"}, "compaction"),
        ({"high_watermark": 1.5}, "high_watermark"),
        ({"low_watermark": 0.95, "high_watermark": 0.9}, "low_watermark"),
    ],
)
def test_bad_configuration_names_the_setting(settings, name):
    with pytest.raises(ValueError, match=name):
        ContextGovernor(**settings)


def test_unforeseen_failure_falls_back_to_minimal_repair(monkeypatch, caplog):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    import langchain_context_governance.pipeline as pipeline_module

    steps = pipeline_module.STEPS
    monkeypatch.setattr(
        pipeline_module, "STEPS", (steps[0], ("compact and cut", explode), *steps[2:])
    )
    with caplog.at_level(logging.ERROR, logger="langchain_context_governance"):
        governed = ContextGovernor().govern(broken_history())
    assert governed.report.fell_back
    assert "boom" in caplog.text
    assert [m.type for m in governed.messages] == ["system", "human", "ai", "tool", "tool", "human"]


def test_never_returns_a_list_without_a_user_message():
    governed = ContextGovernor().invoke([SystemMessage("rules"), result("ghost")])
    assert [m.type for m in governed] == ["system", "human"]
    assert governed[1].content == SYNTHETIC_USER_CONTENT


def test_never_empty_for_input_with_a_user_message():
    governed = ContextGovernor(context_window_tokens=6_000, max_output_tokens=1_000).invoke(
        [HumanMessage("x" * 100_000)]
    )
    assert len(governed) == 1


def test_message_shapes_seen_in_the_wild():
    anthropic_ai = AIMessage(
        [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ],
        tool_calls=[call("toolu_1")],
    )
    invalid = AIMessage(
        "", invalid_tool_calls=[{"name": "grep", "args": "{", "id": "bad", "error": None}]
    )
    history = [
        HumanMessage("go", id="h1"),
        anthropic_ai,
        ToolMessage([{"type": "text", "text": "file"}], tool_call_id="toolu_1", status="error"),
        invalid,
    ]
    governed = ContextGovernor().invoke(history)
    assert [m.type for m in governed] == ["human", "ai", "tool", "ai", "tool"]
    assert governed[-1].tool_call_id == "bad"
    assert governed[2] is history[2]


def test_prompt_value_input_and_lcel_pipe():
    seen = []

    def record(messages):
        seen.append(messages)
        return AIMessage("answer")

    prompt = ChatPromptTemplate.from_messages([("system", "rules"), ("human", "{question}")])
    chain = prompt | ContextGovernor() | RunnableLambda(record)
    assert chain.invoke({"question": "why?"}).content == "answer"
    assert [m.type for m in seen[0]] == ["system", "human"]


def test_pipe_into_a_chat_model():
    model = GenericFakeChatModel(messages=iter([AIMessage("hi there")]))
    chain = ContextGovernor() | model
    assert chain.invoke([HumanMessage("a"), HumanMessage("b")]).content == "hi there"


def test_batch_stream_and_async():
    governor = ContextGovernor()
    inputs = [broken_history(), [HumanMessage("x"), AIMessage("y")]]
    batched = governor.batch(inputs)
    assert [len(b) for b in batched] == [6, 1]
    assert list(governor.stream(inputs[1])) == [batched[1]]


async def test_ainvoke_and_abatch_match_invoke():
    governor = ContextGovernor(context_window_tokens=9_000)
    history = tool_loop(40)
    expected = governor.invoke(history)
    assert await governor.ainvoke(history) == expected
    assert await governor.abatch([history]) == [expected]


def test_shows_up_as_one_named_run_in_callbacks():
    class Recorder(BaseCallbackHandler):
        def __init__(self):
            self.names = []

        def on_chain_start(self, serialized, inputs, **kwargs):
            self.names.append(kwargs.get("name"))

    recorder = Recorder()
    ContextGovernor().invoke([HumanMessage("hi")], config={"callbacks": [recorder]})
    assert recorder.names == ["ContextGovernor"]


def test_from_model_reads_profile_and_unwraps_bindings():
    model = GenericFakeChatModel(
        messages=iter([]), profile={"max_input_tokens": 20_000, "max_output_tokens": 3_000}
    )
    governor = ContextGovernor.from_model(model.bind(stop=["x"]))
    assert governor.context_window_tokens == 20_000
    assert governor.max_output_tokens == 3_000
    assert ContextGovernor.from_model(model, keep_recent=3).keep_recent == 3


def test_from_model_prefers_the_models_own_max_tokens():
    class LimitedModel(GenericFakeChatModel):
        max_tokens: int = 1_234

    model = LimitedModel(messages=iter([]), profile={"max_input_tokens": 50_000})
    assert ContextGovernor.from_model(model).max_output_tokens == 1_234


def test_snip_runs_before_the_second_repair(monkeypatch):
    order = []
    real_snip = snip_module.snip_history_with_count

    def tracking_snip(messages, **kwargs):
        order.append("snip")
        return real_snip(messages, **kwargs)

    import langchain_context_governance.pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "snip_history_with_count", tracking_snip)
    ContextGovernor(context_window_tokens=9_000, compaction="keep_recent").invoke(tool_loop(10))
    assert order == ["snip"]


def test_the_tools_of_a_call_count_against_its_budget():
    tool = {
        "type": "function",
        "function": {"name": "read_file", "description": "d" * 2_000, "parameters": {}},
    }
    governor = ContextGovernor(context_window_tokens=9_000)
    history = tool_loop(30, size=600)
    assert governor.count_tokens(history, tools=[tool]) > governor.count_tokens(history)
    with_tools = governor.govern(history, tools=[tool]).report
    without = governor.govern(history).report
    # Each within the budget; which is larger depends on when each replay compacted or cut.
    assert with_tools.tokens_after <= governor.budget
    assert without.tokens_after <= governor.budget
    assert with_tools.tokens_before - without.tokens_before == governor.count_tokens(
        [], tools=[tool]
    )
    # The governor's own `tools` setting is what a call without tools= sends.
    setting = governor.model_copy(update={"tools": [tool]}).govern(history)
    per_call = governor.govern(history, tools=[tool])
    assert setting.messages == per_call.messages
    assert setting.report.tokens_after == per_call.report.tokens_after


def test_from_model_picks_up_tools_bound_with_bind_tools():
    from langchain_context_governance.testing import ScriptedChatModel

    def read_file(path: str) -> str:
        """Read a file."""
        return path

    model = ScriptedChatModel([], max_input_tokens=20_000).bind_tools([read_file])
    governor = ContextGovernor.from_model(model)
    assert governor.tools
    assert governor.count_tokens([]) > ContextGovernor(
        token_counter=governor.token_counter
    ).count_tokens([])


def test_repr_stays_short_whatever_the_settings_hold():
    from langchain_context_governance.testing import ScriptedChatModel

    script = [AIMessage("x" * 1_000)] * 800  # a model whose own repr is 800 KB
    tools = [
        {"type": "function", "function": {"name": f"tool_{n}", "parameters": {}}} for n in range(40)
    ]
    governor = ContextGovernor(
        context_window_tokens=64_000,
        summary_model=ScriptedChatModel(script),
        tools=tools,
        chat_template="{{ messages }}" * 500,
        exclude_tools=frozenset({"memory"}),
    )
    text = repr(governor)
    assert len(text) < 300, text
    assert text.startswith("ContextGovernor(provider='openai', context_window_tokens=64000")
    assert "summary_model=<ScriptedChatModel>" in text and "tools=<40 tools: tool_0," in text
    assert "chat_template=<text of 7,000 characters>" in text
    assert repr(ContextGovernor()) == "ContextGovernor(provider='openai')"


def test_version_comes_from_the_installed_distribution():
    import subprocess
    import sys
    from importlib.metadata import version

    import langchain_context_governance

    assert langchain_context_governance.__version__ == version("langchain-context-governance")
    not_installed = (
        "import importlib.metadata as metadata\n"
        "def missing(name): raise metadata.PackageNotFoundError(name)\n"
        "metadata.version = missing\n"
        "import langchain_context_governance\n"
        "print(langchain_context_governance.__version__)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", not_installed], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "0+unknown"
