"""First contact reads a history in time linear in its length."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance.rules.profile import resolve_profile
from langchain_context_governance.state.repair_stream import RepairStream


class CountingHistory(list[BaseMessage]):
    """A history that counts the elements iterations over it walk."""

    walked = 0

    def __iter__(self) -> Iterator[BaseMessage]:
        for message in super().__iter__():
            CountingHistory.walked += 1
            yield message


def tool_loop(groups: int) -> CountingHistory:
    history = CountingHistory([HumanMessage("go")])
    for n in range(groups):
        call: Any = {"name": "read_file", "args": {"n": n}, "id": f"c{n}"}
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"line {n}", tool_call_id=f"c{n}"),
        ]
    return history


def test_the_repair_stream_walks_a_new_history_a_bounded_number_of_times() -> None:
    profile = resolve_profile("openai")
    walked = {}
    for groups in (500, 2_000):
        history = tool_loop(groups)
        stream = RepairStream(repair_group=profile.repair_group, count_message=lambda m: 1)
        CountingHistory.walked = 0
        stream.read(history)
        walked[len(history)] = CountingHistory.walked / len(history)
    # Each message is walked a few times whatever the length (a walk from the start for
    # every group read made this grow with the history, to about a thousand at 4,001).
    assert max(walked.values()) < 10, walked
