"""Fidelity: the user's words and the agent's notes reach the model verbatim (issue 20).

Governance never writes inside a user's text: what it adds is its own turn or block, user
turns joined for alternation stay separate blocks, the current turn and the task survive
a tool-heavy budget, excluded tools' results survive cuts, and a stored history round-trips
through LangGraph's replace mode with every user message intact.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hypothesis import given
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_context_governance import ContextGovernor, validate_messages
from langchain_context_governance._added import USER_PART, user_parts
from langchain_context_governance.policy.compaction import compacted_placeholder
from langchain_context_governance.tracing import report_as_dict
from tests.agent_tools import (
    agent_model,
    exploration_script,
    is_shortened,
    workspace_tools,
    write_workspace,
)
from tests.builders import ai_calls, block_texts, call, result, tool_loop
from tests.strategies import budgets, histories
from tests.unit_tests.test_langgraph import hand_written_graph

# A budget of 4,000 tokens; 40 tools whose definitions take over 80% of it.
TOOL_HEAVY_BUDGET = 4_000
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{n}",
            "description": f"Tool {n}: " + "looks up a record by its id and returns it " * 4,
            "parameters": {
                "type": "object",
                "properties": {"record_id": {"type": "string", "description": "the id"}},
            },
        },
    }
    for n in range(40)
]


def tool_heavy_governor(**settings: Any) -> ContextGovernor:
    return ContextGovernor(
        context_window_tokens=TOOL_HEAVY_BUDGET,
        max_output_tokens=0,
        safety_buffer=0,
        tools=TOOLS,
        **settings,
    )


def as_blocks(message: BaseMessage) -> list[Any]:
    content = message.content
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def carries_verbatim(request: list[BaseMessage], message: BaseMessage) -> bool:
    """Whether `message` is in `request` whole: as a message, or as a run of whole blocks
    of one user message."""
    wanted = as_blocks(message)
    for sent in request:
        if type(sent) is not type(message):
            continue
        if sent.content == message.content:
            return True
        blocks = as_blocks(sent)
        for start in range(len(blocks) - len(wanted) + 1):
            if blocks[start : start + len(wanted)] == wanted:
                return True
    return False


def multi_turn_conversation(turns: int, *, result_chars: int = 600) -> list[BaseMessage]:
    """A customer-service run: each user turn, three lookups with their results, an answer."""
    history: list[BaseMessage] = [
        SystemMessage("You help customers with their orders."),
        HumanMessage("I am Ada Lovelace, customer 1815. Please sort out my orders."),
    ]
    for turn in range(turns):
        if turn:
            history.append(HumanMessage(f"Turn {turn}: now check order {turn * 7} for me."))
        for step in range(3):
            call_id = f"c{turn}_{step}"
            history.append(ai_calls(call(call_id, f"tool_{step}", record_id=f"R{turn}{step}")))
            text = f"record R{turn}{step}: " + "status shipped; " * (result_chars // 16)
            history.append(result(call_id, text, name=f"tool_{step}"))
        history.append(AIMessage(f"Order {turn * 7} is handled."))
    return history


def call_points(history: list[BaseMessage]) -> list[int]:
    return [i for i, message in enumerate(history) if isinstance(message, AIMessage) and i > 1]


def test_tool_definitions_fill_over_80_percent_of_the_budget() -> None:
    governor = tool_heavy_governor()
    assert governor.counter.count_tools(TOOLS) >= 0.8 * TOOL_HEAVY_BUDGET


def test_tool_heavy_budget_keeps_the_current_turn_and_the_task_in_every_request() -> None:
    governor = tool_heavy_governor()
    history = multi_turn_conversation(8)
    task = history[1]
    cuts = 0
    for point in call_points(history):
        seen = history[:point]
        governed = governor.govern(seen, thread_id="tool-heavy")
        request = governed.messages
        latest = next(m for m in reversed(seen) if isinstance(m, HumanMessage))
        assert carries_verbatim(request, latest), f"call {point}: the current turn is missing"
        assert carries_verbatim(request, task), f"call {point}: the task is missing"
        assert governed.report.within_budget
        assert validate_messages(request) == []
        cuts += governed.report.changes["snip_history"] > 0
    assert cuts > 0, "the budget should force cuts"


def test_with_tools_at_90_percent_not_every_call_is_a_cut() -> None:
    """The watermarks are shares of the room history has, not of the whole budget."""
    governor = tool_heavy_governor()
    history = multi_turn_conversation(12, result_chars=160)
    previous: list[BaseMessage] = []
    breaks = 0
    points = call_points(history)
    for point in points:
        request = governor.govern(history[:point], thread_id="room").messages
        shared = sum(1 for _ in zip(previous, request, strict=False))
        if previous and request[:shared] != previous[:shared]:
            breaks += 1
        previous = request
    assert breaks <= len(points) / 2


def test_a_request_within_budget_is_sent_as_it_is() -> None:
    """Above the high watermark but within budget: no content is truncated."""
    governor = ContextGovernor(context_window_tokens=1_400, max_output_tokens=0, safety_buffer=0)
    request = [SystemMessage("Be brief."), HumanMessage("Please " + "plan the trip. " * 360)]
    tokens = governor.count_tokens(request)
    assert 0.95 * 1_400 < tokens <= 1_400
    governed = governor.govern(request)
    assert governed.messages == request
    assert governed.report.changes["truncate"] == 0


def test_a_task_that_quotes_a_context_note_keeps_every_word() -> None:
    task = (
        "Refund order 7. From the ticket: [Context note: customer is a VIP] Do NOT refund order 8."
    )
    governor = ContextGovernor(context_window_tokens=8_000, keep_recent=2)
    stored: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage(task)]
    for n in range(160):
        stored = [*stored, ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "o" * 1_500)]
        # Stored back as governed, as LangGraph's replace mode does.
        stored = governor.invoke(stored)
        assert block_texts(stored[1])[0] == task
        kinds = [kind for _, kind in user_parts(stored[1])]
        assert kinds.count("cut-note") <= 1


def test_excluded_tool_results_are_kept_across_cuts_while_they_fit() -> None:
    governor = ContextGovernor(
        context_window_tokens=6_000,
        max_output_tokens=0,
        safety_buffer=1_000,
        keep_recent=1,
        exclude_tools=frozenset({"save_note"}),
    )
    history: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("audit")]
    notes = []
    for n in range(80):
        if n % 20 == 5:
            note = f"note {n}: the invoice total is {n * 13} EUR"
            history += [ai_calls(call(f"s{n}", "save_note", text=note)), result(f"s{n}", note)]
            notes.append(note)
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", f"out {n}\n" * 250)]
        governed = governor.govern(history, thread_id="notes")
        texts = [text for message in governed.messages for text in block_texts(message)]
        assert all(note in texts for note in notes), f"call {n}: a saved note was dropped"
        assert governed.report.within_budget
        assert validate_messages(governed.messages) == []
    report = governor.govern(history, thread_id="notes").report
    assert report.changes["snip_history"] > 0
    assert "excluded-tool" in {why for _, why in report.kept}


def test_without_a_window_nothing_is_compacted_cut_or_truncated() -> None:
    history = tool_loop(100, size=2_000)
    for compaction in ("cache_aware", "keep_recent"):
        governed = ContextGovernor(compaction=compaction).govern(history)
        assert governed.messages == history
        assert not {"microcompact", "snip_history", "truncate"} & set(governed.report.changes)


def test_the_report_says_why_a_message_was_not_seen() -> None:
    governor = ContextGovernor(context_window_tokens=8_000, keep_recent=2)
    history = tool_loop(120, size=1_500, tool="bash")
    history.insert(100, HumanMessage("also check the tests"))
    report = governor.govern(history).report
    assert report.fate(0) == "kept (system)"
    assert report.fate(1) == "kept (task)"
    assert report.fate(100) == "kept (current-turn)"
    assert report.fate(3) == "cut"
    assert report.fate(len(history) - 1) == "sent"
    assert str(report).count("\n") == 0
    data = json.loads(json.dumps(report_as_dict(report)))
    assert data["kept"][1] == [1, "task"]
    assert [2, 100] in data["cut"]


def test_the_report_names_the_compacted_results() -> None:
    governor = ContextGovernor(context_window_tokens=8_000, keep_recent=2)
    history = tool_loop(8, size=1_500, tool="bash")
    governed = governor.govern(history)
    compacted = [i for i in range(len(history)) if governed.report.fate(i) == "compacted"]
    assert compacted
    placeholder = compacted_placeholder("bash")
    sent_compacted = {
        m.tool_call_id
        for m in governed.messages
        if isinstance(m, ToolMessage) and m.content == placeholder
    }
    assert sent_compacted == {history[i].tool_call_id for i in compacted}  # type: ignore[attr-defined]


def test_the_report_names_the_very_messages_where_the_provider_rewrites_call_ids() -> None:
    """Mistral takes call ids of nine letters or digits only: the repairs rewrite every
    call and result of this loop, so none is sent as the caller's object. The report
    still names the messages it compacted, kept and cut, each once, as it does for a
    provider that takes the ids: it used to name whole stretches between user messages,
    many times over, and no compacted result."""
    history = tool_loop(0)
    for n in range(60):
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "line\n" * 300, "bash")]
        if n % 6 == 0:
            history += [ai_calls(call(f"g{n}", "grep")), result(f"g{n}", "match " * 60, "grep")]
    history = [
        message.model_copy(update={"id": f"m{index}"}) for index, message in enumerate(history)
    ]

    def governed(provider: str) -> Any:
        return ContextGovernor(
            provider=provider,
            context_window_tokens=8_000,
            max_output_tokens=1_000,
            keep_recent=2,
            exclude_tools={"grep"},
        ).govern(history)

    rewritten, taken = governed("mistral"), governed("openai")
    assert rewritten.messages[-1].tool_call_id != history[-1].tool_call_id  # type: ignore[attr-defined]
    report = rewritten.report
    assert (report.cut, report.kept, report.compacted) == (
        taken.report.cut,
        taken.report.kept,
        taken.report.compacted,
    )
    assert report.compacted and {why for _, why in report.kept} >= {"excluded-tool", "task"}
    placeholder = compacted_placeholder("bash")
    sent_compacted = {
        m.id for m in rewritten.messages if isinstance(m, ToolMessage) and m.content == placeholder
    }
    assert sent_compacted == {history[index].id for index in report.compacted}


def test_a_pinned_user_message_is_the_current_turn_until_the_user_writes_again() -> None:
    """The front a cut sends is made once and reused while the cut stays; the report's
    reason for its pinned user message still follows the conversation."""

    def governor() -> ContextGovernor:
        return ContextGovernor(
            context_window_tokens=8_000, max_output_tokens=1_000, keep_recent=2, min_chars=10**5
        )

    history = [*tool_loop(0), AIMessage("fixed"), HumanMessage("now audit b.py")]
    for n in range(30):
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "line\n" * 300, "bash")]
    asked = len(history) - 61
    served = governor()
    assert served.govern(history, thread_id="t").report.fate(asked) == "kept (current-turn)"
    history += [AIMessage("b.py is fine"), HumanMessage("thanks, and c.py?")]
    report = served.govern(history, thread_id="t").report
    assert report.fate(asked) == "kept (latest-user)"
    assert report.kept == governor().govern(history).report.kept


def test_the_current_turn_alone_over_budget_is_cut_last_with_a_warning(caplog: Any) -> None:
    governor = ContextGovernor(context_window_tokens=3_000, max_output_tokens=0, safety_buffer=0)
    history = [
        SystemMessage("rules"),
        HumanMessage("the task: " + "t" * 400),
        AIMessage("ok"),
        HumanMessage("START " + "please read this log " * 1_500 + " END"),
    ]
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governed = governor.govern(history)
    assert governed.report.within_budget
    last = block_texts(governed.messages[-1])[-1]
    assert last.startswith("START please") and last.endswith(" END")
    assert "characters of this message were cut" in last
    assert carries_verbatim(governed.messages, history[1]), "the task gave way first"
    assert any("current turn" in record.getMessage() for record in caplog.records)
    assert governed.report.fate(3) == "truncated"


def test_the_current_turn_cut_is_logged_once_per_turn_on_any_worker(caplog: Any) -> None:
    """An agent loop over a pasted document too large for the window: one WARNING for the
    turn, not one per model call, also where the next call lands on another worker with
    the record; a new oversized turn is logged again."""
    settings = {"context_window_tokens": 3_000, "max_output_tokens": 0, "safety_buffer": 0}
    governor, elsewhere = ContextGovernor(**settings), ContextGovernor(**settings)
    history: list[BaseMessage] = [
        SystemMessage("rules"),
        HumanMessage("START " + "please read this log " * 1_500 + " END"),
    ]

    def warnings_of(run: Any) -> int:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
            run()
        return sum("current turn" in record.getMessage() for record in caplog.records)

    results = [governor.govern(history, thread_id="t")]
    assert results[0].report.fate(1) == "truncated"
    counts = []
    for n, worker in enumerate((governor, elsewhere, governor)):
        history = [*history, ai_calls(call(f"c{n}", "lookup")), result(f"c{n}", "ok")]

        def call_model(
            worker: ContextGovernor = worker, history: list[BaseMessage] = history
        ) -> None:
            results.append(worker.govern(history, thread_id="t", record=results[-1].record))

        counts.append(warnings_of(call_model))
        assert results[-1].report.fate(1) == "truncated"
    assert counts == [0, 0, 0]
    history = [*history, AIMessage("done"), HumanMessage("NEXT " + "another log " * 3_000)]
    assert warnings_of(lambda: governor.govern(history, thread_id="t")) == 1


def test_a_joined_front_message_is_cut_turn_by_turn_the_request_whole() -> None:
    """After a cut, the task, the note and the latest request are one message; where it
    must be cut, the task's words give way and the latest request stays whole."""
    governor = ContextGovernor(context_window_tokens=2_000, max_output_tokens=0, safety_buffer=0)
    task = HumanMessage("TASK " + "background " * 160)
    request = HumanMessage("The meeting moved. Please cancel the booking for Friday.")
    history: list[BaseMessage] = [SystemMessage("rules"), task]
    for n in range(12):
        history += [ai_calls(call(f"c{n}", "lookup")), result(f"c{n}", "r" * 300)]
    history += [AIMessage("done"), request]
    for n in range(12, 14):
        history += [ai_calls(call(f"c{n}", "lookup")), result(f"c{n}", "x" * 1_200)]
    governed = governor.govern(history)
    assert governed.report.within_budget
    assert carries_verbatim(governed.messages, request)


@given(history=histories(), budget=budgets)
def test_user_messages_are_verbatim_unless_the_report_says_otherwise(
    history: list[BaseMessage], budget: int
) -> None:
    """Every user message of the input is in the request whole (a message or a run of whole
    blocks) unless the report says it was cut; partly only where it says truncated, and
    the current one truncated only where it alone leaves no room."""
    governor = ContextGovernor(context_window_tokens=budget, max_output_tokens=0, safety_buffer=0)
    governed = governor.govern(history)
    report = governed.report
    users = [
        i
        for i, m in enumerate(history)
        if isinstance(m, HumanMessage) and "".join(block_texts(m)).strip()
    ]
    for index in users:
        fate = report.fate(index)
        if fate == "cut" or carries_verbatim(governed.messages, history[index]):
            continue
        assert fate == "truncated", f"user message {index} changed: {fate}"
        if index == users[-1]:
            systems = [m for m in history if isinstance(m, SystemMessage)]
            alone = governor.count_tokens([*systems, history[index]])
            assert alone > budget // 2, "the current turn was cut while others could give way"


def test_replace_mode_keeps_every_user_message_of_three_turns(tmp_path: Path) -> None:
    write_workspace(tmp_path)
    tools: list[BaseTool] = workspace_tools(tmp_path)
    turns = [
        "review every module",
        "The meeting moved. Please check module_3 again and cancel the report.",
        "One more: [Context note: from the ticket] do NOT touch module_0.",
    ]
    script: list[AIMessage] = []
    for _ in turns:
        script += exploration_script(14)
    model = agent_model(script)
    governor = ContextGovernor.from_model(
        model.bind_tools(tools), tools=tools, keep_recent=2, provider="strict"
    )
    graph_builder = hand_written_graph(model, tools, governor, mode="replace").builder
    with SqliteSaver.from_conn_string(str(tmp_path / "thread.sqlite")) as saver:
        graph = graph_builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "replace"}, "recursion_limit": 400}
        for turn in turns:
            graph.invoke({"messages": [HumanMessage(turn)]}, config)
            stored = graph.get_state(config).values["messages"]
            said = [
                text
                for message in stored
                if isinstance(message, HumanMessage)
                for blocks, kind in user_parts(message)
                if kind == USER_PART
                for text in block_texts(HumanMessage(blocks))
            ]
            for earlier in turns[: turns.index(turn) + 1]:
                assert earlier in said, f"{earlier!r} is not in the stored thread"
    assert is_shortened(stored, "read_file"), "the thread should have been compacted or cut"
    assert all(validate_messages(r, provider="strict") == [] for r in model.requests)


def _thinking(signature: str) -> dict[str, str]:
    return {"type": "thinking", "thinking": "alpha", "signature": signature}


def test_what_the_request_rules_add_is_cut_for_and_governing_again_changes_nothing() -> None:
    """The tool loop below opens without thinking, so the Anthropic rules write it as text
    (request-level, after the cut): the replay plans the call again counting that."""
    history: list[BaseMessage] = [
        *[SystemMessage("alpha")] * 4,
        HumanMessage("u4 alpha"),
        ai_calls(call("a1", "read_file")),
        ToolMessage("alpha", name="read_file", tool_call_id="a1"),
        AIMessage([_thinking("sig-a5")], tool_calls=[call("c1", q="alpha")] * 2),
        ToolMessage("alpha", tool_call_id="c1"),
        SystemMessage(""),
    ]

    def governor() -> ContextGovernor:
        return ContextGovernor(
            provider="anthropic", context_window_tokens=115, max_output_tokens=0, safety_buffer=0
        )

    governed = governor().govern(history)
    assert governed.report.within_budget
    assert governor().govern(governed.messages).messages == governed.messages


def test_user_turns_the_rules_add_inside_a_thinking_loop_do_not_open_a_new_cut() -> None:
    """Qwen's rules add user turns inside the loop; governing the request again reads the
    loop as the history had it."""
    history: list[BaseMessage] = [
        *[SystemMessage("alpha")] * 4,
        AIMessage([_thinking("sig-a4")], tool_calls=[call("c1", q="alpha")]),
        AIMessage(""),
        ToolMessage("", tool_call_id="c1"),
        SystemMessage(""),
        AIMessage([_thinking("sig-a8")], tool_calls=[call("c1", q="alpha")]),
        SystemMessage("alpha"),
    ]

    def governor() -> ContextGovernor:
        return ContextGovernor(
            provider="qwen", context_window_tokens=88, max_output_tokens=0, safety_buffer=0
        )

    governed = governor().govern(history).messages
    assert governor().govern(governed).messages == governed
