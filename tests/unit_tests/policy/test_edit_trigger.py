"""When a call edits, driven directly through a small hand-made view (no replay)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance import tuning
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.policy.edit_trigger import decide_call, edit_threshold
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.policy.watermarks import watermarks
from tests.builders import ai_calls, call, result
from tests.unit_tests.policy.fake_view import COMPACTED_TOKENS, FakeView

THINKING = {"type": "thinking", "thinking": "let me see", "signature": "sig"}
SETTINGS = CacheAwareSettings(
    max_tokens=1_000,
    high_share=0.8,
    low_share=0.5,
    compaction=ResultCompaction(keep_recent=2, min_chars=0),
)


def view_of(messages: list[BaseMessage], tokens: list[int] | None = None) -> FakeView:
    return FakeView(messages, tokens or [10] * len(messages), SETTINGS)


def user_turn_after(answer: AIMessage) -> FakeView:
    return view_of([SystemMessage("rules"), HumanMessage("go"), answer, HumanMessage("more")])


def test_a_user_turn_after_an_answer_with_bound_reasoning_edits_below_the_high_watermark() -> None:
    reasoned = user_turn_after(AIMessage([THINKING, {"type": "text", "text": "done"}]))
    plain = user_turn_after(AIMessage("done"))

    early = edit_threshold(reasoned, end=4, high=900, low=500)

    assert early == 500 + int(400 * tuning.TURN_START_SHARE) < 900
    assert edit_threshold(plain, end=4, high=900, low=500) == 900


def loop(calls: int) -> tuple[list[BaseMessage], list[int]]:
    messages: list[BaseMessage] = [SystemMessage("rules"), HumanMessage("the task")]
    tokens = [50, 20]
    for n in range(calls):
        messages += [ai_calls(call(f"c{n}")), result(f"c{n}", "x" * 300, name="read_file")]
        tokens += [10, 100]
    return messages, tokens


def test_a_call_after_a_tool_result_keeps_the_decisions_up_to_the_budget() -> None:
    view = view_of(*loop(8))  # 950 tokens: past the high watermark, within the budget
    decisions = view.fresh_decisions()
    end = len(view.messages)
    high, _ = watermarks(view, decisions, end=end)
    assert high < view.corrected_total(decisions) <= SETTINGS.max_tokens
    assert edit_threshold(view, end=end, high=high, low=0) == SETTINGS.max_tokens

    decide_call(view, decisions, end=end)

    assert decisions == view.fresh_decisions()


def test_past_the_high_watermark_a_new_turn_compacts_the_oldest_down_to_the_low() -> None:
    messages, tokens = loop(8)
    messages += [AIMessage("done"), HumanMessage("next")]
    tokens += [10, 10]
    view = view_of(messages, tokens)
    decisions = view.fresh_decisions()
    end = len(messages)
    _, low = watermarks(view, decisions, end=end)

    decide_call(view, decisions, end=end)

    saved = 100 - COMPACTED_TOKENS
    assert 0 < decisions.compacted_count <= len(view.compactable) - SETTINGS.compaction.keep_recent
    assert view.corrected_total(decisions) <= low < view.corrected_total(decisions) + saved
    assert decisions.cut == 0  # compaction was enough: no cut in the same step
