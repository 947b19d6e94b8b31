"""What the model still sees: never over budget, the task kept, cuts noted, real tools compacted."""

import itertools
import logging

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance import (
    ContextBudgetExceeded,
    ContextGovernor,
    cut_note,
    validate_messages,
)
from langchain_context_governance._added import added_kind
from langchain_context_governance.policy.compaction import compacted_placeholder
from langchain_context_governance.policy.note import cut_data
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, block_texts, call, result, tool_loop

MODES = ["cache_aware", "keep_recent"]


def texts(messages: list[BaseMessage]) -> list[str]:
    """Each message's text, its blocks (one per turn joined for alternation) one per line."""
    return ["\n\n".join(block_texts(m)) for m in messages]


def read_file_script(count: int) -> list[AIMessage]:
    calls = [ai_calls(call(f"c{n}", "read_file", path=f"f{n}.py")) for n in range(count)]
    return [*calls, AIMessage("done")]


@pytest.mark.parametrize("compaction", MODES)
def test_a_100k_character_result_under_a_16k_window_is_brought_within_budget(compaction):
    model = ScriptedChatModel(read_file_script(3), max_input_tokens=16_000)
    governor = ContextGovernor.from_model(model, compaction=compaction)
    history: list[BaseMessage] = [SystemMessage("You read files."), HumanMessage("audit f0-f2")]
    for step in range(4):
        governed = governor.govern(history)
        assert governed.report.within_budget
        reply = model.invoke(governed.messages)  # rejects an illegal or too long request
        history.append(reply)
        for tool_call in reply.tool_calls:
            content = "".join(f"{step}:{n} data\n" for n in range(12_500))  # ~100k characters
            history.append(result(tool_call["id"], content, name="read_file"))
    last_result = model.requests[-1][-1]
    assert "characters of this read_file result were cut here" in last_result.content
    assert last_result.content.startswith("2:0 data\n")
    assert governed.report.changes["truncate"] >= 0
    assert governor.govern(model.requests[-1]).messages == model.requests[-1]


def test_the_report_says_what_was_truncated():
    history = [HumanMessage("go"), ai_calls(call("a")), result("a", "x" * 200_000)]
    governed = ContextGovernor(context_window_tokens=16_000).govern(history)
    assert governed.report.changes["truncate"] == 1
    assert governed.report.within_budget


def test_a_huge_user_task_is_truncated_within_budget():
    task = HumanMessage("BEGIN " + "demonstration " * 20_000 + "END")
    governor = ContextGovernor(context_window_tokens=16_000)
    governed = governor.govern([SystemMessage("rules"), task])
    assert governed.report.within_budget
    sent = governed.messages[1].content
    assert sent.startswith("BEGIN demonstration") and sent.endswith("demonstration END")
    assert "characters of this message were cut here" in sent
    assert governor.govern(governed.messages).messages == governed.messages


def test_raise_names_budget_and_size_where_nothing_can_fit():
    history = [SystemMessage("policy " * 20_000), HumanMessage("hi")]
    governor = ContextGovernor(context_window_tokens=16_000, on_over_budget="raise")
    with pytest.raises(ContextBudgetExceeded) as raised:
        governor.govern(history)
    assert raised.value.budget == governor.budget
    assert raised.value.tokens > governor.budget
    assert f"{governor.budget:,}" in str(raised.value)


def test_raise_is_quiet_when_truncation_fits():
    history = [HumanMessage("go"), ai_calls(call("a")), result("a", "x" * 200_000)]
    governor = ContextGovernor(context_window_tokens=16_000, on_over_budget="raise")
    assert governor.govern(history).report.within_budget


def test_warn_sends_whole_and_logs_one_warning(caplog):
    history = [HumanMessage("go"), ai_calls(call("a")), result("a", "x" * 200_000)]
    governor = ContextGovernor(context_window_tokens=16_000, on_over_budget="warn")
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governed = governor.govern(history)
    assert governed.messages[-1].content == "x" * 200_000
    assert not governed.report.within_budget
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_truncate_logs_one_warning_where_even_truncation_cannot_fit(caplog):
    history = [SystemMessage("policy " * 20_000), HumanMessage("hi")]
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governed = ContextGovernor(context_window_tokens=16_000).govern(history)
    assert not governed.report.within_budget
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


@pytest.mark.parametrize("compaction", MODES)
def test_the_task_is_in_every_request_of_a_long_loop(compaction):
    governor = ContextGovernor(context_window_tokens=9_000, keep_recent=3, compaction=compaction)
    task = "Port the invoicing module to the new tax rules."
    history: list[BaseMessage] = [SystemMessage("You are a coding agent."), HumanMessage(task)]
    cuts = 0
    for n in range(150):
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", f"out {n}\n" * 120)]
        if n % 25 == 24:
            history += [AIMessage("progress"), HumanMessage(f"follow-up {n}")]
        governed = governor.govern(history)
        request = governed.messages
        assert isinstance(request[0], SystemMessage)
        assert isinstance(request[1], HumanMessage) and texts(request)[1].startswith(task)
        assert governed.report.within_budget
        assert validate_messages(request, provider="openai") == []
        latest = next(m for m in reversed(history) if isinstance(m, HumanMessage))
        assert any(latest.content in text for text in texts(request))
        cuts += governed.report.changes["snip_history"] > 0
    assert cuts > 0


def test_without_pin_task_the_task_is_an_earlier_user_message_after_the_note():
    governor = ContextGovernor(context_window_tokens=9_000, keep_recent=3, pin_task=False)
    history = tool_loop(150, size=800, tool="bash")
    history.insert(200, HumanMessage("follow-up"))
    governed = governor.govern(history)
    # The note, the data it quotes from what it leaves out, then the user's turns.
    note, data, users = governed.messages[1:4]
    assert block_texts(note)[0].startswith("[Context note: ")
    assert added_kind(data) == "cut-data"
    assert block_texts(users) == ["fix it", "follow-up"]
    assert governed.report.fate(1) == "kept (earlier-user)"
    pinned = ContextGovernor(context_window_tokens=9_000, keep_recent=3).invoke(history)
    task, note_text = block_texts(pinned[1])
    assert task == "fix it" and note_text.startswith("[Context note: ")
    assert added_kind(pinned[2]) == "cut-data"
    assert block_texts(pinned[3]) == ["follow-up"]


def test_the_cut_note_follows_a_cut_and_stays_until_the_next_one():
    governor = ContextGovernor(context_window_tokens=8_000, keep_recent=2)
    history = tool_loop(0, tool="bash")
    notes: list[BaseMessage] = []
    for n in range(120):
        history = [*history, ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "o" * 1_500)]
        governed = governor.govern(history)
        request = governed.messages
        omitted = len(history) - len(request)
        if omitted == 0:
            assert "[Context note" not in texts(request)[1]
            continue
        assert texts(request)[1] == f"fix it\n\n{cut_note(omitted)}"
        notes.append(request[1])
    assert notes, "expected a cut"
    changes = sum(1 for old, new in itertools.pairwise(notes) if old != new)
    assert 0 < changes < len(notes) / 5, "the note must change only at a cut"


def test_a_summary_goes_into_the_note_at_the_cut():
    from langchain_context_governance.state.cache_aware import CacheAwareReplay
    from langchain_context_governance.tokens.counter import get_token_counter

    replay = CacheAwareReplay(max_tokens=3_000, counter=get_token_counter("approximate"))
    plan = replay.plan(
        tool_loop(80, size=600, tool="bash"), summary_for=lambda cut: "Read f0-f60; no bug yet."
    )
    assert plan.omitted > 0 and plan.task_pinned
    note = block_texts(plan.messages[1])[1]
    assert note == cut_note(plan.omitted, data=True)
    # The data turn quotes the summary, then the values of what the cut left out
    # (policy/note.py), framed as data; a user turn follows it.
    data = plan.messages[2]
    assert added_kind(data) == "cut-data"
    assert data.text.startswith(
        cut_data(plan.omitted, summary="Read f0-f60; no bug yet.") + "\n[Values"
    )
    assert isinstance(plan.messages[3], HumanMessage)


@pytest.mark.parametrize("tool", ["bash", "str_replace_editor", "execute_bash"])
def test_compaction_fires_on_real_agent_tools(tool):
    # Large results: compacting them is enough, no cut follows (COMPACTION_ENOUGH_SHARE).
    governor = ContextGovernor(context_window_tokens=40_000, keep_recent=2)
    request = governor.invoke(tool_loop(40, size=4_000, tool=tool))
    assert compacted_placeholder(tool) in texts(request)


def test_excluded_tools_are_never_compacted_by_age():
    governor = ContextGovernor(
        context_window_tokens=12_000, keep_recent=2, exclude_tools=frozenset({"bash"})
    )
    request = governor.invoke(tool_loop(40, size=2_000, tool="bash"))
    assert compacted_placeholder("bash") not in texts(request)


def test_a_custom_placeholder_is_used():
    governor = ContextGovernor(
        context_window_tokens=12_000, keep_recent=2, placeholder="(cleared {tool_name} output)"
    )
    request = governor.invoke(tool_loop(40, size=2_000, tool="open"))
    assert "(cleared open output)" in texts(request)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"on_over_budget": "ignore"}, "on_over_budget"),
        ({"placeholder": "{name} cleared"}, "placeholder"),
        (
            {"compactable_tools": frozenset({"bash"}), "exclude_tools": frozenset({"bash"})},
            "exclude_tools",
        ),
    ],
)
def test_bad_settings_are_named(settings, named):
    with pytest.raises(ValueError, match=named):
        ContextGovernor(**settings)


def test_a_stored_note_is_replaced_not_repeated():
    governor = ContextGovernor(context_window_tokens=8_000, keep_recent=2)
    history = tool_loop(120, size=1_500, tool="bash")
    stored = governor.invoke(history)  # what LangGraph's replace mode stores back
    assert "[Context note: " in texts(stored)[1]
    for n in range(120, 200):
        stored = [*stored, ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "o" * 1_500)]
        stored = governor.invoke(stored)
        assert texts(stored)[1].startswith("fix it\n\n[Context note: ")
        assert texts(stored)[1].count("[Context note: ") == 1
