"""Every cut leaves its note, also where the current turn alone is larger than the budget
and the last resort cuts its text (issue 29, the newcomer's case)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance._added import user_parts


def history_with_a_large_result() -> list[BaseMessage]:
    """38 tool steps, then a turn whose tool result alone is far over the budget."""
    history: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("fix the test")]
    for n in range(38):
        call: Any = {"name": "read_file", "args": {"n": n}, "id": f"c{n}"}
        history += [AIMessage("", tool_calls=[call]), ToolMessage("x" * 300, tool_call_id=f"c{n}")]
    big: Any = {"name": "read_file", "args": {"path": "big.log"}, "id": "c99"}
    history += [
        HumanMessage("now read the big log"),
        AIMessage("", tool_calls=[big]),
        ToolMessage("L" * 120_000, tool_call_id="c99"),
    ]
    return history


def note_kinds(messages: list[BaseMessage]) -> list[str]:
    return [
        kind
        for message in messages
        if isinstance(message, HumanMessage)
        for _, kind in user_parts(message)
    ]


@pytest.mark.parametrize("compaction", ["cache_aware", "keep_recent"])
def test_a_cut_beside_a_current_turn_larger_than_the_budget_leaves_its_note(
    compaction: str,
) -> None:
    governor = ContextGovernor(
        context_window_tokens=16_000, max_output_tokens=2_000, compaction=compaction
    )
    result = governor.govern(history_with_a_large_result(), thread_id="t")
    report = result.report
    assert report.changes["snip_history"] > 0
    assert report.truncated == (len(history_with_a_large_result()) - 1,)
    assert report.within_budget
    assert "cut-note" in note_kinds(result.messages)


def test_a_request_the_note_would_take_over_a_tiny_budget_goes_without_it() -> None:
    """Where nothing the last resort can shorten makes room (assistant calls, governance's
    placeholders), the note is left out and the request still fits."""
    thinking = {"type": "thinking", "thinking": "alpha", "signature": "sig-a1"}
    call: Any = {"name": "read_file", "args": {"q": "alpha"}, "id": "c1"}
    answer = AIMessage([{**thinking, "signature": "sig-a0"}, {"type": "text", "text": "alpha"}])
    governor = ContextGovernor(
        provider="glm", context_window_tokens=53, max_output_tokens=0, safety_buffer=0
    )
    governed = governor.govern([answer, AIMessage([thinking], tool_calls=[call])]).messages
    assert governor.count_tokens(governed) <= 53
    assert "cut-note" not in note_kinds(governed)


def test_a_request_governed_again_keeps_its_note_as_it_is() -> None:
    """The note an earlier cut wrote is no message of the conversation: governing the
    governed request again leaves it (a fixed point), even over a budget nothing fits."""
    call: Any = {"name": "read_file", "args": {"q": "alpha"}, "id": "c1"}
    history = [AIMessage("", tool_calls=[call]), AIMessage("", tool_calls=[call])]
    governed = ContextGovernor(provider="glm", max_input_tokens=20).govern(history).messages
    again = ContextGovernor(provider="glm", max_input_tokens=20).govern(governed).messages
    assert [m.content for m in again] == [m.content for m in governed]
