"""The cut, driven directly through a small hand-made view (no replay)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance import tuning
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.policy.cut import (
    cut_groups,
    excluded_groups_newest_first,
    fitting,
)
from langchain_context_governance.policy.decisions import KeptGroup
from langchain_context_governance.policy.protection import EARLIER_USER, EXCLUDED_TOOL
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.policy.watermarks import excluded_limit, room, watermarks
from langchain_context_governance.tokens.calibration import UNCALIBRATED
from tests.builders import ai_calls, call, result
from tests.unit_tests.policy.fake_view import FakeView

SYSTEM, CALL, RESULT = 50, 10, 90


def settings(*, compaction: ResultCompaction | None = None) -> CacheAwareSettings:
    return CacheAwareSettings(
        max_tokens=1_000,
        high_share=0.8,
        low_share=0.5,
        compaction=compaction or ResultCompaction(),
    )


def opening(task_tokens: int = 20) -> tuple[list[BaseMessage], list[int]]:
    return [SystemMessage("rules"), HumanMessage("the task")], [SYSTEM, task_tokens]


def add_call(
    messages: list[BaseMessage], tokens: list[int], *, tool: str = "read_file", cost: int = RESULT
) -> None:
    call_id = f"c{len(messages)}"
    messages += [ai_calls(call(call_id, tool)), result(call_id, "x" * 200, name=tool)]
    tokens += [CALL, cost]


def tool_loop(calls: int) -> FakeView:
    messages, tokens = opening()
    for _ in range(calls):
        add_call(messages, tokens)
    return FakeView(messages, tokens, settings())


def test_the_cut_moves_over_whole_groups_down_to_the_low_watermark() -> None:
    view = tool_loop(12)
    decisions = view.fresh_decisions()
    end = len(view.messages)
    _, low = watermarks(view, decisions, end=end)
    assert view.corrected_total(decisions) > low

    cut_groups(view, decisions, end=end, low=low)

    assert isinstance(view.messages[decisions.cut], AIMessage)  # a group's first message
    assert view.corrected_total(decisions) <= low
    # It stopped at the first group that took it under: one group fewer is over.
    assert view.corrected_total(decisions) + CALL + RESULT > low
    assert decisions.task_pinned and decisions.pinned is None
    # The note was listed for the cut: the room reserved for its values (there are none in
    # results of x's) became what they take.
    assert (decisions.note_values, decisions.note_values_tokens) == ("", 0)


def test_the_newest_group_is_never_cut() -> None:
    view = tool_loop(6)
    decisions = view.fresh_decisions()
    end = len(view.messages)

    cut_groups(view, decisions, end=end, low=0)

    assert decisions.cut == end - 2
    assert isinstance(view.messages[decisions.cut], AIMessage)


def test_groups_of_excluded_tools_are_kept_newest_first_while_they_fit() -> None:
    messages, tokens = opening()
    for _ in range(8):
        add_call(messages, tokens, tool="grep", cost=150)
    add_call(messages, tokens)
    compaction = ResultCompaction(exclude_tools={"grep"})
    view = FakeView(messages, tokens, settings(compaction=compaction))
    decisions = view.fresh_decisions()
    end = len(messages)
    _, low = watermarks(view, decisions, end=end)

    cut_groups(view, decisions, end=end, low=low)

    groups = list(excluded_groups_newest_first(view, decisions))
    assert [g.start for g in groups] == sorted((g.start for g in groups), reverse=True)
    kept = [g for g in decisions.kept_groups if g.why == EXCLUDED_TOOL]
    assert sorted(g.start for g in kept) == sorted(g.start for g in groups[: len(kept)])
    # The newest one left out is remembered, to come back where it fits again.
    assert decisions.readmit_tokens == groups[len(kept)].tokens == CALL + 150
    # Five groups fit beside the higher classes at first, but history was still over the
    # low watermark they left: they gave way in one step, down to the limit that leaves
    # history the room between the watermarks (not one a call).
    limit = excluded_limit(view, decisions, end=end)
    base, _ = room(view, decisions, end=end)
    base -= decisions.kept_excluded_tokens
    assert len(kept) == 3
    assert base + 3 * (CALL + 150) <= limit < base + 4 * (CALL + 150)
    assert view.corrected_total(decisions) <= view.settings.max_tokens


def test_fitting_keeps_the_leading_groups_under_the_limit_and_names_the_first_left_out() -> None:
    groups = [KeptGroup(start, start + 2, 100, EXCLUDED_TOOL) for start in (20, 10, 4)]

    kept, left_out = fitting(groups, base=700, limit=900, calibration=UNCALIBRATED)

    assert [g.start for g in kept] == [20, 10]
    assert left_out is groups[2]
    assert fitting(groups, base=0, limit=900, calibration=UNCALIBRATED) == (groups, None)


def test_earlier_user_messages_give_way_oldest_first_beyond_their_share() -> None:
    messages, tokens = opening()
    for turn in range(12):
        messages += [AIMessage(f"answer {turn}"), HumanMessage(f"question {turn}")]
        tokens += [10, 60]
    add_call(messages, tokens)
    view = FakeView(messages, tokens, settings())
    decisions = view.fresh_decisions()
    end = len(messages)
    _, low = watermarks(view, decisions, end=end)

    cut_groups(view, decisions, end=end, low=low)

    passed = [i for i in view.users[1:] if i < decisions.cut]
    kept = [g.start for g in decisions.kept_groups if g.why == EARLIER_USER]
    assert 0 < len(kept) < len(passed)
    assert kept == passed[-len(kept) :]  # the newest stay, the oldest gave way
    _, space = room(view, decisions, end=end)
    assert sum(g.tokens for g in decisions.kept_groups) <= int(space * tuning.EARLIER_USERS_SHARE)


def task_then_loop(task_tokens: int) -> FakeView:
    messages, tokens = opening(task_tokens)
    messages += [AIMessage("first answer"), HumanMessage("and now this")]
    tokens += [10, 10]
    for _ in range(6):
        add_call(messages, tokens)
    return FakeView(messages, tokens, settings())


def test_the_task_is_pinned_after_a_cut() -> None:
    view = task_then_loop(100)
    decisions = view.fresh_decisions()
    end = len(view.messages)

    cut_groups(view, decisions, end=end, low=0)

    assert decisions.task_pinned
    assert decisions.pinned == 3  # the latest user message before the cut


def test_the_task_is_unpinned_where_it_keeps_the_request_over_budget() -> None:
    view = task_then_loop(1_200)
    decisions = view.fresh_decisions()
    end = len(view.messages)
    _, low = watermarks(view, decisions, end=end)

    cut_groups(view, decisions, end=end, low=low)

    assert not decisions.task_pinned
    assert decisions.pinned == 3
    assert view.corrected_total(decisions) <= view.settings.max_tokens
    assert isinstance(view.messages[decisions.cut], AIMessage)
